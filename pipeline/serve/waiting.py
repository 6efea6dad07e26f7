"""A turn that waits, from the gateway: the calls it waits on (``GET
/v1/sessions/{id}/approvals``), the decisions on them (``POST`` the same, from a token allowed
to give them: ``[serve] approvers``), and messages steered into a running turn (``POST
/v1/sessions/{id}/steer``).

    POST /v1/sessions/{id}/approvals
    {"decisions": {"call_1": "once", "call_2": {"choice": "deny", "reason": "not on prod"}}}
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pipeline.serve import openai_compat as oa
from pipeline.serve.plumbing import json_body, owner_of, session_of, until_done
from pipeline.serve.pool import SessionPool
from pipeline.shell.decisions import ApprovalDecision
from stages.errors import UsageError


def _pool(request: Request) -> SessionPool:
    return request.app.state.pool


def _described(pending: Any) -> dict[str, Any]:
    return {"call_id": pending.call_id, "tool": pending.tool, "command": pending.command,
            "pattern": pending.pattern, "description": pending.description}


async def pending(request: Request) -> Response:
    owner, pool = owner_of(request), _pool(request)
    session = await session_of(request, owner, request.path_params["session_id"])
    calls = await pool.call(lambda: session.agent.pending_approvals)
    return JSONResponse({"object": "list", "data": [_described(p) for p in calls]})


def _decision(call_id: str, value: Any) -> ApprovalDecision:
    if isinstance(value, str):
        value = {"choice": value}
    if not isinstance(value, dict) or not isinstance(value.get("choice"), str) or not (
            value.get("reason") is None or isinstance(value["reason"], str)):
        raise oa.bad(f"The decision on {call_id} must be a choice (\"once\", \"session\", "
                     "\"always\", \"deny\") or {\"choice\": ..., \"reason\": ...}.", "decisions")
    try:
        return ApprovalDecision(choice=value["choice"], reason=value.get("reason"))
    except UsageError as exc:
        raise oa.bad(str(exc), "decisions") from None


async def decide(request: Request) -> Response:
    """The decisions; the turn goes on with them, and its result is the answer."""
    owner, pool = owner_of(request), _pool(request)
    approvers = request.app.state.config.approvers
    session = await session_of(request, owner, request.path_params["session_id"])
    if approvers is not None and owner not in approvers:
        raise oa.ApiError(403, "This token may not decide on approvals.",
                          type="permission_error", code="not_an_approver")
    body = await json_body(request)
    given = body.get("decisions") if isinstance(body, dict) else None
    if not isinstance(given, dict) or not given:
        raise oa.bad("Missing required parameter: 'decisions' (call id -> decision).",
                     "decisions")
    decisions = {str(k): _decision(str(k), v) for k, v in given.items()}
    with session.claimed():
        result = await until_done(request, session, pool.turn(
            lambda: session.run(None, decisions=decisions)))
    return JSONResponse(session.agent.result_dict(result))


async def steer(request: Request) -> Response:
    owner = owner_of(request)
    session = await session_of(request, owner, request.path_params["session_id"])
    body = await json_body(request)
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise oa.bad("Missing required parameter: 'content' (the message to steer with).",
                     "content")
    if not session.steer(content):
        raise oa.ApiError(409, "No turn is running: send the message as a new one.",
                          type="conflict_error", code="no_running_turn")
    return JSONResponse({"steered": True})


WAITING_ROUTES = [
    Route("/v1/sessions/{session_id}/approvals", pending, methods=["GET"]),
    Route("/v1/sessions/{session_id}/approvals", decide, methods=["POST"]),
    Route("/v1/sessions/{session_id}/steer", steer, methods=["POST"]),
]

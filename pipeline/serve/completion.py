"""A completion's turn, shared by ``/v1/chat/completions`` and ``/v1/responses``: the session
it goes on in, the turn in a worker, and the 502 of a turn that failed with no answer."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from pipeline.result import TurnResult
from pipeline.serve import openai_compat as oa
from pipeline.serve.gateway_config import AGENT_MODEL
from pipeline.serve.plumbing import created, session_of
from pipeline.serve.pool import SessionPool
from pipeline.serve.sessions import ServedSession

SESSION_HEADER = "x-mibyan-session-id"


async def chat_session(request: Request, owner: str, chat: oa.ChatRequest,
                       wanted: str | None, found: ServedSession | None = None
                       ) -> tuple[ServedSession, Any]:
    """The session a completion goes on in, and the history it takes: the header's session,
    or the one whose turn ended on the calls the request's tool messages answer (with their
    own history: only the results are new), else a new one with the request's messages.
    ``found``: the header's session, when the caller has already looked it up."""
    pool: SessionPool = request.app.state.pool
    if not wanted and chat.tool_results:
        wanted = pool.waiting_on(owner, str(chat.tool_results[0].get("tool_call_id")))
    if wanted:
        session = found or await session_of(request, owner, wanted)
        same_model(session, chat.model)
        return session, None
    if chat.results_need_session:
        raise oa.bad("The 'tool' messages at the end answer calls no assistant message of the "
                     "request made, and no session of yours waits for them: send the whole "
                     f"conversation, or the session's {SESSION_HEADER} header.", "messages")
    return await created(request, owner, "api"), chat.history


def same_model(session: ServedSession, named: str) -> None:
    """A session goes on with the model it recorded; a request naming another model for it is
    refused rather than answered by a model it did not ask for (``mibyan`` names whichever)."""
    own = session.agent.settings.model
    if named not in (AGENT_MODEL, own):
        raise oa.ApiError(409, f"Session {session.id!r} runs on the model `{own}`, not "
                               f"`{oa.echoed(named)}`: send `{own}` or `{AGENT_MODEL}` with it, "
                               "or start a new session for another model.", param="model",
                          code="session_model_mismatch")


def chat_turn(pool: SessionPool, session: ServedSession, chat: oa.ChatRequest, history: Any,
          on_delta: Any = None) -> TurnResult:
    """The completion's turn (in a worker); the calls to the client's tools it ended on are
    noted, for the request that brings their results."""
    result = session.run(chat.user_message, system_message=chat.system_message,
                         history=history, on_delta=on_delta, output=chat.output,
                         client_tools=chat.client_tools, tool_results=chat.tool_results,
                         images=chat.images)
    pool.note_calls(session, result.tool_calls)
    return result


def failed(result: TurnResult) -> oa.ApiError | None:
    """A turn that failed with no answer, as the 502 its client gets (the session made its
    error one a client may see)."""
    if result.paused:
        return oa.ApiError(409, "The agent's turn waits for approvals: decide them with POST "
                           f"/v1/sessions/{result.session_id}/approvals.",
                           type="conflict_error", code="approval_pending")
    if result.failed and (not result.final_response or (result.output is None
                          and result.turn_exit_reason == "output_invalid")):
        return oa.ApiError(502, f"The agent's turn failed: {result.error}", type="api_error",
                           code="upstream_failed")
    return None

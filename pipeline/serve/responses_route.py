"""``POST /v1/responses``: OpenAI's Responses API over the same sessions as chat completions
(``pipeline.serve.responses_api`` has the wire shapes). ``previous_response_id`` goes on in
the session of that response; without it a request starts a new session whose history is its
``input``. Streamed, the answer is the Responses event stream (``response.created`` ...
``response.completed``, each event with its ``sequence_number``; a failed turn ends in
``response.failed``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pipeline.result import TurnResult
from pipeline.serve import openai_compat as oa
from pipeline.serve import responses_api as ra
from pipeline.serve import sse
from pipeline.serve.completion import SESSION_HEADER, chat_session, chat_turn, failed
from pipeline.serve.plumbing import drain, failure, json_body, owner_of, streamed_turn, until_done
from pipeline.serve.pool import SessionPool
from pipeline.serve.sessions import ServedSession


async def responses(request: Request) -> Response:
    owner = owner_of(request)
    pool: SessionPool = request.app.state.pool
    body = await json_body(request)
    chat = oa.parse_chat_request(ra.chat_body(body), request.app.state.models)
    prior = ra.previous(body.get("previous_response_id"))
    session, history = await _session(request, owner, chat, prior)
    previous_id = body.get("previous_response_id")
    headers = {SESSION_HEADER: session.id}

    def run(on_delta: Any = None) -> tuple[TurnResult, str]:
        result = chat_turn(pool, session, chat, history, on_delta=on_delta)
        return result, ra.response_id(session.id, session.turns)

    if chat.stream:
        return _stream(pool, session, body, previous_id, run, headers)
    with session.claimed():
        result, resp_id = await until_done(request, session, pool.turn(run))
    refused = failed(result)
    if refused is not None:
        raise refused
    return JSONResponse(ra.response_body(
        resp_id, body, status=ra.status_of(result), output=ra.output_items(resp_id, result),
        usage=result.usage, previous_id=previous_id), headers=headers)


async def _session(request: Request, owner: str, chat: oa.ChatRequest,
                   prior: tuple[str, int] | None) -> tuple[ServedSession, Any]:
    """The session the request goes on in; ``prior`` must be its latest response (the turn
    count when it was given)."""
    if prior is None:
        return await chat_session(request, owner, chat, None)
    try:
        session, history = await chat_session(request, owner, chat, prior[0])
    except oa.ApiError as exc:
        if exc.status != 404:
            raise
        raise ra.not_found(ra.response_id(*prior)) from exc
    if session.turns != prior[1]:
        raise oa.bad(f"Previous response '{ra.response_id(*prior)}' is not the latest response "
                     "of its session; go on from the latest, or fork the session at that "
                     "turn (POST /v1/sessions/{id}/fork).", "previous_response_id")
    return session, history


class _Events:
    """The stream's events, numbered (``sequence_number``) as they are sent."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def __call__(self, kind: str, **fields: Any) -> bytes:
        return sse.encode({"type": kind, "sequence_number": next(self._numbers), **fields},
                          event=kind)


def _stream(pool: SessionPool, session: ServedSession, body: Mapping[str, Any],
            previous_id: str | None, run: Any, headers: dict[str, str]) -> Response:
    """The turn's text as ``response.output_text.delta`` events of one message item while it
    runs, then the calls to the client's tools as ``function_call`` items, then
    ``response.completed`` with the whole response (or ``response.failed``)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()
    session.claim()  # 409 now, before the stream starts; the worker releases it
    # Claimed, the session runs no other turn: this one's number is known now.
    pending = ra.response_id(session.id, session.turns + 1)
    worker, left = streamed_turn(
        pool, session, lambda: run(lambda t: loop.call_soon_threadsafe(queue.put_nowait, t)))
    created = int(time.time())
    event = _Events()

    async def events() -> AsyncIterator[bytes]:
        opening = ra.response_body(pending, body, status="in_progress", created=created,
                                   previous_id=previous_id)
        yield event("response.created", response=opening)
        yield event("response.in_progress", response=opening)
        texts: list[str] = []
        item_id = f"msg_{pending[5:]}"
        async for text in drain(queue, worker, sse.KEEPALIVE):
            if isinstance(text, bytes):
                yield text
                continue
            if not texts:
                yield event("response.output_item.added", output_index=0,
                            item=ra.message_item(item_id, "", status="in_progress"))
                yield event("response.content_part.added", item_id=item_id, output_index=0,
                            content_index=0, part=_part(""))
            texts.append(text)
            yield event("response.output_text.delta", item_id=item_id, output_index=0,
                        content_index=0, delta=text, logprobs=[])
        try:
            result, resp_id = await worker
        except Exception as exc:  # the turn could not run: the stream says why
            yield event("response.failed", response=ra.response_body(
                pending, body, status="failed", created=created, previous_id=previous_id,
                error=_error(failure(exc))))
            return
        for chunk in _closing(event, item_id, "".join(texts), result, streamed=bool(texts)):
            yield chunk
        refused = failed(result)
        final = ra.response_body(
            resp_id, body, status="failed" if refused else ra.status_of(result),
            created=created, previous_id=previous_id, usage=result.usage,
            output=_output(item_id, "".join(texts), result),
            error=None if refused is None else _error(refused))
        kind = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(
            final["status"], "response.completed")
        yield event(kind, response=final)
    return sse.EventStream(events(), on_disconnect=left, headers=headers)


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _error(error: oa.ApiError) -> dict[str, Any]:
    return {"code": error.code or "server_error", "message": error.message}


def _output(item_id: str, streamed: str, result: TurnResult) -> list[dict[str, Any]]:
    """The output items as the stream sent them: the text streamed (else the answer)."""
    text = streamed or result.final_response or ""
    message = [ra.message_item(item_id, text)] if text else []
    return message + [ra.call_item(c) for c in result.tool_calls]


def _closing(event: _Events, item_id: str, text: str, result: TurnResult, *,
             streamed: bool) -> Iterator[bytes]:
    """The message item closed (opened now when nothing streamed: a turn not streamed by its
    provider), then each call to the client's tools as a whole item."""
    if not streamed and result.final_response:
        text = result.final_response
        yield event("response.output_item.added", output_index=0,
                    item=ra.message_item(item_id, "", status="in_progress"))
        yield event("response.content_part.added", item_id=item_id, output_index=0,
                    content_index=0, part=_part(""))
        yield event("response.output_text.delta", item_id=item_id, output_index=0,
                    content_index=0, delta=text, logprobs=[])
    index = 0
    if text:
        yield event("response.output_text.done", item_id=item_id, output_index=0,
                    content_index=0, text=text, logprobs=[])
        yield event("response.content_part.done", item_id=item_id, output_index=0,
                    content_index=0, part=_part(text))
        yield event("response.output_item.done", output_index=0,
                    item=ra.message_item(item_id, text))
        index = 1
    for offset, call in enumerate(result.tool_calls, index):
        item = ra.call_item(call)
        yield event("response.output_item.added", output_index=offset,
                    item=ra.call_item(call, status="in_progress"))
        yield event("response.function_call_arguments.delta", item_id=item["id"],
                    output_index=offset, delta=call.arguments)
        yield event("response.function_call_arguments.done", item_id=item["id"],
                    output_index=offset, name=call.name, arguments=call.arguments)
        yield event("response.output_item.done", output_index=offset, item=item)

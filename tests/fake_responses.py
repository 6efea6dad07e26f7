"""An in-tree fake OpenAI Responses API server (``POST /v1/responses``).

Real HTTP/1.1 on loopback (keep-alive, chunked SSE with ``event:`` and ``data:`` lines in the
real event order), no mocking of any SDK. The server machinery (threads, lifecycle, request
recording, ``assert_done``) is ``tests.fake_http``'s; its own errors (404, bad JSON, no reply
left) are the chat fake's OpenAI-style ones::

    with FakeResponsesServer() as srv:
        srv.script(ResponsesReply.text("hi"), ResponsesReply.function_calls([("ls", "{}")]))
        ...
        srv.assert_done()

The stream of a reply is ``response.created``, ``response.in_progress``, then per output item
(reasoning, message, function calls, in that order) ``response.output_item.added``, its part and
delta events and ``response.output_item.done``, then ``response.completed`` /
``response.incomplete`` / ``response.failed`` (or an ``error`` event). No ``[DONE]`` follows.

Logprobs as OpenAI sends them: a request that includes ``message.output_text.logprobs`` gets
each ``output_text`` part's ``logprobs`` (``token``, ``bytes``, ``logprob``, ``top_logprobs``)
and, streamed, each text delta's (``token``, ``logprob``, ``top_logprobs``: no bytes); the
fake's tokens are the stream's pieces (``piece_size`` characters), one token per delta. Without
the include both lists are empty, as OpenAI leaves them.

Encrypted reasoning as a stateless (``store: false``) client meets it: a reasoning item of an
``encrypted`` reply carries ``encrypted_content`` only when the request asked for it
(``include: ["reasoning.encrypted_content"]``). The server remembers what it issued and refuses
(400, listed in ``rejections``, taking no scripted reply) a request that sends back encrypted
content it did not issue (``invalid_encrypted_content``), refers to an item by id while
``store`` is false, or (asking for encrypted reasoning, so replaying it) answers a function call
whose encrypted reasoning item was not sent back.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from tests.fake_http import MAX_HANG, FakeHTTPServer, dumps, http_chunk
from tests.fake_openai import OpenAIErrorsHandler, Usage, error_body

__all__ = ["FakeResponsesServer", "ResponsesReply", "Usage"]

_dumps = dumps
_ids = itertools.count(1)
_MAX_HANG = MAX_HANG
_DEFAULT_MODEL = "gpt-fake"


@dataclass(frozen=True, slots=True)
class ResponsesReply:
    """One scripted answer. Build it with the class-method constructors."""

    kind: str  # "response" | "error" | "raw" | "drop"
    content: str | None = None
    reasoning: str | None = None
    encrypted: bool = False  # the reasoning item carries opaque encrypted_content
    calls: tuple[tuple[str, str, str], ...] = ()  # (call_id, name, arguments)
    status: str = "completed"
    incomplete_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    stream_error: bool = False  # end the stream with an ``error`` event instead
    empty_final_output: bool = False  # response.completed carries "output": [] (Codex quirk)
    phase: str | None = None
    usage: Usage | None = None
    status_code: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    after_deltas: int = 0
    clean_end: bool = False
    delay: float = 0.0
    piece_size: int | None = None
    chunk_delay: float = 0.0  # seconds between written pieces (SSE events, or JSON body slices)

    # ---- constructors -------------------------------------------------------------------

    @classmethod
    def text(cls, content: str, *, reasoning: str | None = None, usage: Usage | None = None,
             phase: str | None = None, empty_final_output: bool = False,
             piece_size: int | None = None, chunk_delay: float = 0.0,
             encrypted: bool = False) -> ResponsesReply:
        """A completed response with one assistant message (after a reasoning item if given,
        ``encrypted`` when asked for). With ``chunk_delay`` the headers go out at once, then
        each SSE event (or each 64 bytes of a JSON body) after that many seconds."""
        return cls(kind="response", content=content, reasoning=reasoning, usage=usage,
                   phase=phase, empty_final_output=empty_final_output, piece_size=piece_size,
                   chunk_delay=chunk_delay, encrypted=encrypted)

    @classmethod
    def function_calls(cls, calls: Iterable[tuple[str, str]], *, content: str | None = None,
                       ids: Sequence[str] | None = None, reasoning: str | None = None,
                       usage: Usage | None = None, empty_final_output: bool = False,
                       piece_size: int | None = None, encrypted: bool = False) -> ResponsesReply:
        """``function_call`` items ``[(name, arguments_json_text), ...]`` (after a reasoning
        item if given, ``encrypted`` when asked for: then the item must come back with the
        calls' outputs)."""
        calls = list(calls)
        ids = list(ids) if ids is not None else [f"call_{next(_ids)}" for _ in calls]
        if len(ids) != len(calls):
            raise ValueError("ids must have one entry per call")
        return cls(kind="response", content=content, reasoning=reasoning, usage=usage,
                   calls=tuple((i, n, a) for i, (n, a) in zip(ids, calls)),
                   empty_final_output=empty_final_output, piece_size=piece_size,
                   encrypted=encrypted)

    @classmethod
    def reasoning_only(cls, reasoning: str = "", *, usage: Usage | None = None) -> ResponsesReply:
        """A completed response holding only a reasoning item (encrypted, maybe a summary)."""
        return cls(kind="response", reasoning=reasoning, encrypted=True, usage=usage)

    @classmethod
    def incomplete(cls, content: str, reason: str = "max_output_tokens", *,
                   usage: Usage | None = None) -> ResponsesReply:
        """``status: incomplete`` with ``incomplete_details.reason``; the message is cut."""
        return cls(kind="response", content=content, status="incomplete",
                   incomplete_reason=reason, usage=usage)

    @classmethod
    def failed(cls, code: str = "server_error",
               message: str = "The model failed to generate a response.") -> ResponsesReply:
        """``status: failed`` with ``error {code, message}`` (a ``response.failed`` event)."""
        return cls(kind="response", status="failed", error_code=code, error_message=message)

    @classmethod
    def stream_failure(cls, code: str = "server_error", message: str = "Something went wrong",
                       *, content: str | None = None) -> ResponsesReply:
        """Streaming: items as usual, then an ``error`` event and the end of the stream.
        Not streaming: HTTP 500 with an OpenAI error body."""
        return cls(kind="response", content=content, stream_error=True, error_code=code,
                   error_message=message)

    @classmethod
    def error(cls, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
              code: str | None = None, headers: Mapping[str, str] | None = None) -> ResponsesReply:
        """``status`` with OpenAI's body ``{"error": {message, type, param, code}}``."""
        return cls(kind="error", status_code=status, body=error_body(message, type, code),
                   headers=tuple((headers or {}).items()))

    @classmethod
    def raw(cls, status: int, body: bytes | str, content_type: str = "application/json", *,
            headers: Mapping[str, str] | None = None) -> ResponsesReply:
        """Exactly ``body`` with ``status`` (garbage, or an SSE body written by hand)."""
        return cls(kind="raw", status_code=status,
                   body=body.encode() if isinstance(body, str) else body,
                   content_type=content_type, headers=tuple((headers or {}).items()))

    @classmethod
    def drop_stream(cls, after_deltas: int = 0, *, content: str = "This answer is cut off.",
                    clean_end: bool = False) -> ResponsesReply:
        """Streaming: events up to the ``after_deltas``-th text delta, then the socket closes
        mid-body (or, with ``clean_end``, the body ends properly but with no terminal event).
        Not streaming: the connection closes without a response."""
        return cls(kind="drop", content=content, after_deltas=after_deltas, clean_end=clean_end)

    @classmethod
    def hang(cls, seconds: float) -> ResponsesReply:
        """Sleep ``seconds`` (at most 60, cut short by ``close()``), then answer text "late"."""
        return cls(kind="response", content="late", delay=min(float(seconds), _MAX_HANG))

    def with_headers(self, headers: Mapping[str, str]) -> ResponsesReply:
        """The same reply with extra response headers (e.g. ``x-ratelimit-*``)."""
        return replace(self, headers=self.headers + tuple(headers.items()))


# ---- response objects --------------------------------------------------------------------


def _input_chars(body: Mapping[str, Any]) -> int:
    n = len(body.get("instructions") or "")
    for item in body.get("input") or ():
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if isinstance(content, str):
            n += len(content)
        for part in content if isinstance(content, list) else ():
            n += len(part.get("text") or "") if isinstance(part, dict) else 0
        n += len(str(item.get("output") or "")) + len(str(item.get("arguments") or ""))
    return n


def _usage(reply: ResponsesReply, body: Mapping[str, Any]) -> dict[str, Any]:
    u = reply.usage
    if u is None:
        out = len(reply.content or "") + sum(len(n) + len(a) for _, n, a in reply.calls)
        thought = len(reply.reasoning or "") // 4 + (8 if reply.encrypted else 0)
        u = Usage(prompt=max(1, _input_chars(body) // 4), completion=out // 4 + 1 + thought,
                  reasoning=thought)
    return {"input_tokens": u.prompt,
            "input_tokens_details": {"cached_tokens": u.cached, "cache_write_tokens": 0},
            "output_tokens": u.completion,
            "output_tokens_details": {"reasoning_tokens": u.reasoning},
            "total_tokens": u.prompt + u.completion}


def _asked_for_encrypted(body: Mapping[str, Any]) -> bool:
    return "reasoning.encrypted_content" in (body.get("include") or ())


LOGPROBS_INCLUDE = "message.output_text.logprobs"


def _token_logprob(index: int) -> float:
    return -round(0.05 + (index % 5) / 10, 2)


def _text_logprobs(text: str, size: int) -> list[dict[str, Any]]:
    return [{"token": p, "bytes": list(p.encode()), "logprob": _token_logprob(i),
             "top_logprobs": []} for i, p in enumerate(_pieces(text, size))]


def _items(reply: ResponsesReply, fake: FakeResponsesServer | None = None,
           body: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The complete output items of a reply."""
    item_status = "incomplete" if reply.status == "incomplete" else "completed"
    items: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        item: dict[str, Any] = {"id": f"rs_fake{next(_ids)}", "type": "reasoning", "summary": (
            [{"type": "summary_text", "text": reply.reasoning}] if reply.reasoning else [])}
        if reply.encrypted and fake is not None and body is not None \
                and _asked_for_encrypted(body):
            item["encrypted_content"] = fake._issue(item["id"], reply.reasoning,
                                                    [i for i, _, _ in reply.calls])
        items.append(item)
    if reply.content is not None:
        asked = LOGPROBS_INCLUDE in ((body or {}).get("include") or ())
        size = max(1, reply.piece_size or (fake.piece_size if fake is not None else 3))
        message: dict[str, Any] = {
            "id": f"msg_fake{next(_ids)}", "type": "message", "status": item_status,
            "role": "assistant", "content": [
                {"type": "output_text", "annotations": [], "text": reply.content,
                 "logprobs": _text_logprobs(reply.content, size) if asked else []}]}
        if reply.phase is not None:
            message["phase"] = reply.phase
        items.append(message)
    items.extend({"id": f"fc_fake{next(_ids)}", "type": "function_call", "status": "completed",
                  "call_id": i, "name": n, "arguments": a} for i, n, a in reply.calls)
    return items


def _response(fake: FakeResponsesServer, reply: ResponsesReply,
              body: Mapping[str, Any]) -> dict[str, Any]:
    failed = reply.status == "failed"
    return {
        "id": fake._next_id(), "object": "response", "created_at": int(time.time()),
        "status": reply.status, "background": False,
        "error": ({"code": reply.error_code, "message": reply.error_message} if failed else None),
        "incomplete_details": ({"reason": reply.incomplete_reason}
                               if reply.status == "incomplete" else None),
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model") or _DEFAULT_MODEL,
        "output": [] if failed else _items(reply, fake, body),
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"), "summary": None},
        "store": bool(body.get("store", True)), "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [], "top_p": 1.0, "truncation": "disabled",
        "usage": None if failed else _usage(reply, body), "user": None, "metadata": {},
    }


# ---- the event stream --------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _skeleton(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` shows it: in progress, nothing generated."""
    out = {**item, "status": "in_progress"}
    if item["type"] == "message":
        out["content"] = []
    elif item["type"] == "function_call":
        out["arguments"] = ""
    else:
        out = {**item, "summary": []}
    return out


def _item_events(index: int, item: Mapping[str, Any], size: int) -> list[dict[str, Any]]:
    at = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _skeleton(item)}]
    if item["type"] == "message":
        part = item["content"][0]
        text = part["text"]
        events.append({"type": "response.content_part.added", **at, "content_index": 0,
                       "part": {**part, "text": ""}})
        # One token per delta; a delta's entry carries no bytes (ResponseTextDeltaEvent).
        entries = [{k: e[k] for k in ("token", "logprob", "top_logprobs")}
                   for e in part.get("logprobs") or ()]
        events += [{"type": "response.output_text.delta", **at, "content_index": 0,
                    "delta": p, "logprobs": entries[i:i + 1]}
                   for i, p in enumerate(_pieces(text, size))]
        events.append({"type": "response.output_text.done", **at, "content_index": 0,
                       "text": text, "logprobs": entries})
        events.append({"type": "response.content_part.done", **at, "content_index": 0,
                       "part": part})
    elif item["type"] == "function_call":
        events += [{"type": "response.function_call_arguments.delta", **at, "delta": p}
                   for p in _pieces(item["arguments"], size)]
        events.append({"type": "response.function_call_arguments.done", **at,
                       "name": item["name"], "arguments": item["arguments"]})
    else:
        for s, part in enumerate(item["summary"]):
            where = {**at, "summary_index": s}
            events.append({"type": "response.reasoning_summary_part.added", **where,
                           "part": {**part, "text": ""}})
            events += [{"type": "response.reasoning_summary_text.delta", **where, "delta": p}
                       for p in _pieces(part["text"], size)]
            events.append({"type": "response.reasoning_summary_text.done", **where,
                           "text": part["text"]})
            events.append({"type": "response.reasoning_summary_part.done", **where,
                           "part": part})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def _events(reply: ResponsesReply, response: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """Every SSE event of the reply, in the real order (sequence numbers added)."""
    opening = {**response, "status": "in_progress", "output": [], "usage": None,
               "error": None, "incomplete_details": None}
    events = [{"type": "response.created", "response": opening},
              {"type": "response.in_progress", "response": opening}]
    for index, item in enumerate(response["output"]):
        events += _item_events(index, item, size)
    if reply.stream_error:
        events.append({"type": "error", "code": reply.error_code,
                       "message": reply.error_message, "param": None})
    else:
        final = {**response, "output": []} if reply.empty_final_output else response
        kind = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(
            reply.status, "response.completed")
        events.append({"type": kind, "response": final})
    if reply.kind == "drop":
        deltas = [i for i, e in enumerate(events) if e["type"] == "response.output_text.delta"]
        cut = deltas[reply.after_deltas] if reply.after_deltas < len(deltas) else len(events) - 1
        events = events[:cut]
    return [{"type": e["type"], "sequence_number": n, **e} for n, e in enumerate(events)]


def _sse_chunk(event: Mapping[str, Any]) -> bytes:
    """One HTTP/1.1 chunk holding one SSE event (``event:`` line, then ``data:``)."""
    return http_chunk(b"event: %s\ndata: %s\n\n" % (event["type"].encode(),
                                                     _dumps(event).encode()))


# ---- the handler and the server ----------------------------------------------------------


def _reasoning_refusal(fake: FakeResponsesServer, body: Mapping[str, Any]) -> bytes | None:
    """Why the real API would refuse the request's replayed reasoning (None: it would not)."""
    items = [i for i in body.get("input") or () if isinstance(i, dict)]
    sent = set()
    for item in items:
        if item.get("type") != "reasoning":
            continue
        if item.get("id") and body.get("store") is False:
            return error_body(f"Item with id '{item['id']}' not found. Items are not persisted "
                              "when `store` is set to false.")
        content = item.get("encrypted_content")
        if content is not None and not fake._issued_content(content):
            return error_body("The encrypted content for item could not be verified.",
                              code="invalid_encrypted_content")
        sent.add(content)
    if not _asked_for_encrypted(body):  # the client does not replay reasoning at all
        return None
    for item in items:
        if item.get("type") != "function_call_output":
            continue
        needed = fake._reasoning_of_call(str(item.get("call_id")))
        if needed is not None and needed not in sent:
            return error_body(f"Item for call '{item.get('call_id')}' of type 'function_call' "
                              "was provided without its required 'reasoning' item.")
    return None


class _ResponsesHandler(OpenAIErrorsHandler):
    route = "/v1/responses"

    def _reject(self, fake: FakeResponsesServer, body: dict[str, Any]) -> bytes | None:
        return _reasoning_refusal(fake, body)

    def _wait_seconds(self, reply: ResponsesReply) -> float:
        return reply.delay

    def _answer(self, fake: FakeResponsesServer, reply: ResponsesReply,
                body: dict[str, Any]) -> None:
        stream = bool(body.get("stream"))
        extra = (("x-request-id", "fake"), *reply.headers)
        if reply.kind in ("error", "raw"):
            self._send(reply.status_code, reply.content_type, reply.body, extra)
        elif reply.kind == "drop" and not stream:
            self._abort()
        elif stream:
            size = max(1, reply.piece_size or fake.piece_size)
            events = _events(reply, _response(fake, reply, body), size)
            self._send_stream(extra, [_sse_chunk(e) for e in events],
                              chunk_delay=reply.chunk_delay,
                              ends=reply.kind != "drop" or reply.clean_end)
        elif reply.stream_error:
            self._send(500, "application/json",
                       error_body(reply.error_message or "", "server_error", reply.error_code),
                       extra)
        else:
            payload = _dumps(_response(fake, reply, body)).encode()
            self._send(200, "application/json", payload, extra, chunk_delay=reply.chunk_delay)


class FakeResponsesServer(FakeHTTPServer):
    """A loopback Responses API server. Use as a context manager (or call close())."""

    handler = _ResponsesHandler
    reply_type = ResponsesReply
    base_path = "/v1"
    thread_name = "fake-responses"

    def __init__(self, default: ResponsesReply | None = None, *, piece_size: int = 3,
                 window: int | None = None) -> None:
        super().__init__(default, piece_size=piece_size, window=window)
        self._encrypted: dict[str, str] = {}  # encrypted content issued -> its item id
        self._call_reasoning: dict[str, str] = {}  # call id -> the encrypted content before it

    def _next_id(self) -> str:
        return f"resp_fake{next(self._ids)}"

    def _overflow_body(self, tokens: int, window: int) -> bytes:
        # The Responses API names neither count: only the code says what happened.
        return error_body("Your input exceeds the context window of this model. Please adjust "
                          "your input and try again.", param="input",
                          code="context_length_exceeded")

    def _issue(self, item_id: str, reasoning: str, call_ids: list[str]) -> str:
        content = "gAAAAB" + hashlib.sha256(f"{item_id}:{reasoning}".encode()).hexdigest()
        with self._lock:
            self._encrypted[content] = item_id
            self._call_reasoning.update(dict.fromkeys(call_ids, content))
        return content

    def _issued_content(self, content: str) -> bool:
        with self._lock:
            return content in self._encrypted

    def _reasoning_of_call(self, call_id: str) -> str | None:
        with self._lock:
            return self._call_reasoning.get(call_id)

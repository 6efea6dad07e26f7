"""A loopback server speaking llama.cpp's token endpoints beside its chat API: chat
completions with ``logprobs`` (each entry with its token ``id``, the end-of-turn token last
with an empty piece, as llama.cpp writes them; per chunk when streamed), ``/apply-template``,
``/tokenize`` and ``/detokenize``.

Its tokenizer is a toy: ``<|im_start|>`` is 1, ``<|im_end|>`` 2, any other byte ``b`` is
``10 + b``. Its template is ChatML; an assistant's tool calls are rendered as
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (``json.dumps``), the form a
scripted reply (the text the model "wrote") is parsed from, so a reply written in another form
breaks the prefix of the next prompt, as a real template does.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from tests.fake_http import FakeHandler, FakeHTTPServer, dumps, http_chunk

START, END = 1, 2
_SPECIALS = {"<|im_start|>": START, "<|im_end|>": END}
_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def tokenize(text: str, *, parse_special: bool = True) -> list[int]:
    ids: list[int] = []
    pattern = "(" + "|".join(map(re.escape, _SPECIALS)) + ")" if parse_special else None
    for part in re.split(pattern, text) if pattern else [text]:
        if part in _SPECIALS and parse_special:
            ids.append(_SPECIALS[part])
        else:
            ids.extend(10 + b for b in part.encode())
    return ids


def detokenize(ids: list[int]) -> str:
    names = {v: k for k, v in _SPECIALS.items()}
    out, pending = [], bytearray()
    for i in ids:
        if i in names:
            out.append(pending.decode("utf-8", "replace") + names[i])
            pending = bytearray()
        else:
            pending.append(i - 10)
    return "".join(out) + pending.decode("utf-8", "replace")


def _calls_text(calls: list[dict[str, Any]]) -> str:
    return "".join(
        "<tool_call>\n" + json.dumps({"name": c["function"]["name"],
                                      "arguments": json.loads(c["function"]["arguments"])})
        + "\n</tool_call>" for c in calls)


def render(body: dict[str, Any]) -> str:
    """The prompt of a chat request, ChatML, generation prompt last."""
    out = []
    for m in body.get("messages") or []:
        content = m.get("content") or ""
        if m["role"] == "system" and body.get("tools"):
            content += "\n<tools>" + json.dumps(body["tools"]) + "</tools>"
        if m["role"] == "assistant" and m.get("tool_calls"):
            content += _calls_text(m["tool_calls"])
        out.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


@dataclass(frozen=True)
class Written:
    """What the model writes: raw text, tool calls inside ``<tool_call>`` tags."""

    text: str


def _logprob(index: int) -> float:
    return -round(0.01 + (index % 7) / 10, 2)


def _entries(text: str) -> list[dict[str, Any]]:
    ids = [*tokenize(text, parse_special=False), END]
    return [{"id": t, "token": "" if t == END else bytes([t - 10]).decode("latin-1"),
             "bytes": [] if t == END else [t - 10], "logprob": _logprob(i),
             "top_logprobs": []} for i, t in enumerate(ids)]


def _message(text: str) -> tuple[dict[str, Any], str]:
    calls = [json.loads(m) for m in _CALL.findall(text)]
    if not calls:
        return {"role": "assistant", "content": text}, "stop"
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "id": f"call_{i}",
         "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for i, c in enumerate(calls)]}, "tool_calls"


class _Handler(FakeHandler):
    route = "/v1/chat/completions"
    error_headers = ()
    no_reply_body = b'{"error":{"code":500,"message":"no scripted reply"}}'

    def _not_found_body(self) -> bytes:
        return b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}'

    def _bad_json_body(self, exc: ValueError) -> bytes:
        return dumps({"error": {"code": 400, "message": str(exc)}}).encode()

    def _post(self, fake: FakeHTTPServer) -> None:
        side = {"/apply-template": self._apply_template, "/tokenize": self._tokenize,
                "/detokenize": self._detokenize}.get(self.path.rstrip("/"))
        if side is None:
            super()._post(fake)
            return
        body = json.loads(self._read_body())
        fake.side_calls.append(self.path)  # type: ignore[attr-defined]
        self._send(200, "application/json", dumps(side(body)).encode())

    def _apply_template(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"prompt": render(body)}

    def _tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        if "content" not in body:  # llama.cpp's answer to vLLM's form
            return {"tokens": []}
        return {"tokens": tokenize(body["content"], parse_special=body.get("parse_special",
                                                                            True))}

    def _detokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"content": detokenize(body["tokens"])}

    def _answer(self, fake: Any, reply: Written, body: dict[str, Any]) -> None:
        message, finish = _message(reply.text)
        entries = _entries(reply.text) if body.get("logprobs") else None
        usage = {"prompt_tokens": len(tokenize(render(body))),
                 "completion_tokens": len(_entries(reply.text)),
                 "total_tokens": 0}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish,
                      "logprobs": None if entries is None else {"content": entries}}
            payload = {"id": "chatcmpl-llama", "object": "chat.completion",
                       "created": int(time.time()), "model": body.get("model"),
                       "choices": [choice], "usage": usage}
            self._send(200, "application/json", dumps(payload).encode())
            return
        chunks = []
        for entry in entries or [{"token": c} for c in message.get("content") or ""]:
            delta = {"content": entry["token"]} if message.get("content") else {}
            choice = {"index": 0, "delta": delta, "finish_reason": None}
            if entries is not None:
                choice["logprobs"] = {"content": [entry]}
            chunks.append({"choices": [choice]})
        last = {"index": 0, "finish_reason": finish,
                "delta": {"tool_calls": [dict(c, index=i) for i, c in
                                         enumerate(message.get("tool_calls") or [])]}}
        chunks += [{"choices": [last]}, {"choices": [], "usage": usage}]
        self._send_stream((), [http_chunk(b"data: " + dumps(dict(c, model=body.get("model")))
                                          .encode() + b"\n\n") for c in chunks]
                          + [http_chunk(b"data: [DONE]\n\n")])


class FakeLlamaServer(FakeHTTPServer):
    """Scripted with :class:`Written` replies; ``side_calls`` lists the token endpoints hit."""

    handler = _Handler
    reply_type = Written
    base_path = "/v1"
    thread_name = "fake-llamacpp"

    def __init__(self, default: Written | None = None) -> None:
        super().__init__(default)
        self.side_calls: list[str] = []

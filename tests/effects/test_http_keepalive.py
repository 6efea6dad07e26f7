"""A kept-alive connection the server closed while it sat in the pool (llama.cpp's server
does this) is not a failed call: the request goes again, once, on a new connection. A
connection dropped right after it was opened still is a failure."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from effects.providers.openai_chat import OpenAIChatClient
from stages.decision import ModelRequest
from stages.errors import ProviderUnavailableError
from stages.log.messages import Message

REPLY = json.dumps({
    "id": "r", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "fine"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class ClosingServer:
    """Answers ``answers_per_connection`` requests on a connection (keeping it alive, as the
    response says), then closes it silently when the next request comes on it."""

    def __init__(self, answers_per_connection: int) -> None:
        self.answers = answers_per_connection
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            for answered in range(self.answers + 1):
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                              if h.lower().startswith(b"content-length"))
                reader.read(length)
                if answered == self.answers:
                    return  # closed without a word
                self.requests += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Connection: keep-alive\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(REPLY), REPLY))

    def close(self) -> None:
        self.sock.close()


def _request() -> ModelRequest:
    return ModelRequest(model="m", provider="fake", api_mode="chat_completions",
                        purpose="step", system_prompt=None,
                        messages=(Message(role="user", content="hi"),), tools=(), stream=False)


@pytest.fixture
def server() -> Iterator[ClosingServer]:
    srv = ClosingServer(answers_per_connection=1)
    yield srv
    srv.close()


def test_a_pooled_connection_the_server_closed_is_replaced_not_a_failure(server) -> None:
    client = OpenAIChatClient(base_url=server.base_url, api_key="k", provider="fake",
                              timeout=5.0)
    for _ in range(3):
        assert client.complete(_request()).message.content == "fine"
    assert server.requests == 3 and server.connections == 3


def test_a_new_connection_dropped_unanswered_is_a_failure() -> None:
    srv = ClosingServer(answers_per_connection=0)
    try:
        client = OpenAIChatClient(base_url=srv.base_url, api_key="k", provider="fake",
                                  timeout=5.0)
        with pytest.raises(ProviderUnavailableError, match="disconnected"):
            client.complete(_request())
        assert srv.connections == 1
    finally:
        srv.close()

"""mibyan's own log lines are redacted before their values are escaped."""

from __future__ import annotations

import io
import logging

import pytest

from effects.logs import get_logger


@pytest.mark.parametrize(("body", "secret"), [
    ("GET / HTTP/1.1\nAuthorization: Basic dXNlcjpwYXNzd29yZDEyMw==\n", "dXNlcjpwYXNzd29yZDEy"),
    ("HTTP/1.1 200\nProxy-Authorization: Basic Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA\n",
     "Zm9vYmFyYmF6cXV4cXV1"),
    ("line\nBearer Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ", "Xk9mP2qR7sT4uV8wY1zA3"),
])
def test_a_header_on_a_later_line_of_a_logged_value_is_hidden(body: str, secret: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("mibyan.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        get_logger("mibyan.test.logs").info("request", body=body, nested={"lines": [body]})
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert "request" in line and secret not in line, line

"""Reading provider error bodies and Retry-After (pure: no server, a fixed clock)."""

from __future__ import annotations

import email.utils
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects.providers.http_errors import (
    ErrorDetail,
    endpoint_label,
    error_detail,
    retry_after_seconds,
)

NOW = 1_750_000_000.0  # a fixed "now", epoch seconds


@pytest.mark.parametrize("body, detail", [
    ('{"error": {"message": "m", "type": "invalid_request_error", "code": "bad"}}',
     ErrorDetail("m", "bad", "invalid_request_error")),                       # OpenAI
    ('{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
     ErrorDetail("busy", None, "overloaded_error")),                          # Anthropic
    ('{"error": {"code": 500, "message": "ctx", "type": "server_error"}}',
     ErrorDetail("ctx", "500", "server_error")),                              # llama.cpp
    ('{"error": {"message": "m", "code": null}}', ErrorDetail("m", None, None)),
    ('{"error": {"error": {"message": "deep", "code": 429}}}', ErrorDetail("deep", "429", None)),
    ('{"error": "plain words"}', ErrorDetail("plain words")),
    ('{"detail": "Not Found"}', ErrorDetail("Not Found")),                     # FastAPI
    ('{"error": {"message": 12, "code": true}}', ErrorDetail("12", "true", None)),
    ("<html>502</html>", ErrorDetail()),
    ("upstream connect error", ErrorDetail()),
    ("", ErrorDetail()),
    ("[1, 2]", ErrorDetail()),
    ("null", ErrorDetail()),
])
def test_error_detail_reads_every_shape(body, detail):
    assert error_detail(body) == detail


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["error", "message", "code", "type",
                                                        "detail", "x"]), inner, max_size=4),
                     max_leaves=12)


@given(_json)
def test_any_json_body_gives_text_or_none(value):
    detail = error_detail(json.dumps(value))
    for part in (detail.message, detail.code, detail.type):
        assert part is None or type(part) is str


@given(st.text(max_size=200))
def test_any_text_body_gives_text_or_none(text):
    detail = error_detail(text)
    assert all(p is None or type(p) is str for p in (detail.message, detail.code, detail.type))


@pytest.mark.parametrize("headers, seconds", [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"retry-after": email.utils.formatdate(NOW + 90, usegmt=True)}, 90.0),
    ({"retry-after": email.utils.formatdate(NOW - 90, usegmt=True)}, 0.0),
    ({"retry-after": "Sunday, 06-Nov-94 08:49:37 GMT"}, 0.0),  # obsolete RFC 850 form, past
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after-ms": "nope", "retry-after": "9"}, 9.0),
    ({"retry-after": "-3"}, 0.0),
    ({"retry-after": "inf"}, None),
    ({"retry-after": "soon"}, None),
    ({}, None),
])
def test_retry_after_as_seconds_milliseconds_or_http_date(headers, seconds):
    assert retry_after_seconds(headers, NOW) == seconds


@pytest.mark.parametrize("url, label", [
    ("https://user:secret@api.example.com/v1", "https://api.example.com/v1"),
    ("http://127.0.0.1:8080/v1/responses?key=abc", "http://127.0.0.1:8080/v1/responses"),
    ("http://[::1]:9000/v1", "http://[::1]:9000/v1"),
])
def test_an_endpoint_is_named_without_credentials_or_query(url, label):
    assert endpoint_label(url) == label

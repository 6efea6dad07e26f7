"""``mibyan serve`` run as a user would: a subprocess on an ephemeral port."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log.redact import redact
from tests.fake_openai import Reply
from tests.pipeline.test_cli import ROOT, clean_env, mibyan
from tests.stages.redaction_corpus import ORDINARY, SECRETS

KEY_IN_PATH = "sk-Q1w2E3r4T5Q1w2E3r4T5Q1w2E3r4T5Q1w2E3r4T5"


def test_serve_answers_with_its_tokens_and_stops_on_sigterm(server, home, tmp_path):
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[serve]\ntokens = { ci = "MIBYAN_TEST_TOKEN" }\n')
    server.script(Reply.text("served"))
    env = clean_env(home, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-x-0123456",
                           "MIBYAN_TEST_TOKEN": "tok-ci-0123456789"})
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli.main", "serve", "--port", "0",
                             "--model", "fake", "--workdir", str(tmp_path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = _port_of(proc)
        url = f"http://127.0.0.1:{port}"
        assert httpx2.get(f"{url}/v1/models").status_code == 401
        answer = httpx2.post(f"{url}/v1/chat/completions", timeout=30,
                            headers={"Authorization": "Bearer tok-ci-0123456789"},
                            json={"model": "mibyan",
                                  "messages": [{"role": "user", "content": "hi"}]})
        assert answer.json()["choices"][0]["message"]["content"] == "served"
        # A key in a path (a client's mistake) is in no line of the server's output.
        unknown = httpx2.get(f"{url}/v1/sessions/{KEY_IN_PATH}",
                            headers={"Authorization": "Bearer tok-ci-0123456789"})
        assert unknown.status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal: the status tells it.
    assert proc.returncode == -signal.SIGTERM
    # Every request has its access line (uvicorn writes them to stdout), and none is a
    # "--- Logging error ---" traceback.
    assert proc.stdout is not None
    printed = proc.stdout.read()
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in printed
    assert '"GET /v1/sessions/sk-' in printed and KEY_IN_PATH not in printed
    rest = proc.stderr.read()
    assert "Logging error" not in rest and "Traceback" not in rest, rest
    assert KEY_IN_PATH not in rest


def _port_of(proc: subprocess.Popen) -> int:
    """The port the server says it listens on (its first line on stderr)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        # Issue 25: `--port 0` was announced as port 0; the line names the bound port.
        if found := re.search(r"mibyan serve: http://127\.0\.0\.1:(\d+)/v1", line):
            return int(found.group(1))
    raise AssertionError("the server never said where it listens")


def test_sigterm_ends_an_open_events_stream_with_closed_and_no_traceback(server, home,
                                                                         tmp_path):
    # Issue 25: with an /events stream open, SIGTERM gave no `closed` event and, after the
    # 10 s graceful timeout, a 40-line traceback.
    import time
    env = clean_env(home, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-x-0123456"})
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli.main", "serve", "--no-auth",
                             "--port", "0", "--model", "fake", "--workdir", str(tmp_path)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        url = f"http://127.0.0.1:{_port_of(proc)}"
        with httpx2.Client(base_url=url, timeout=30) as client:
            sid = client.post("/v1/sessions").json()["id"]
            with client.stream("GET", f"/v1/sessions/{sid}/events") as stream:
                lines = stream.iter_lines()
                assert next(lines) == ": keep-alive"
                started = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                rest = list(lines)
        assert "event: closed" in rest and "data: [DONE]" in rest, rest
        proc.wait(timeout=30)
        assert time.monotonic() - started < 8  # not the 10 s graceful timeout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    errors = proc.stderr.read()
    assert "Traceback" not in errors and "CancelledError" not in errors, errors


def test_serve_no_auth_refuses_what_a_web_page_sends_and_cuts_silent_clients(server, home,
                                                                            tmp_path):
    import socket
    import time
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[serve]\nheader_timeout = 1\n")
    env = clean_env(home, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-x-0123456"})
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli.main", "serve", "--no-auth",
                             "--port", "0", "--model", "fake", "--workdir", str(tmp_path)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        url = f"http://127.0.0.1:{_port_of(proc)}/v1/chat/completions"
        chat = b'{"model": "mibyan", "messages": [{"role": "user", "content": "rm -rf ~"}]}'
        page = httpx2.post(url, content=chat, headers={"Origin": "https://evil.example",
                                                       "Content-Type": "text/plain"})
        rebound = httpx2.post(url, content=chat, headers={"Host": "evil.example",
                                                          "Content-Type": "text/plain"})
        plain = httpx2.post(url, content=chat, headers={"Content-Type": "text/plain"})
        assert [page.status_code, rebound.status_code, plain.status_code] == [403, 421, 415]
        with socket.create_connection(("127.0.0.1", int(url.split(":")[2].split("/")[0])),
                                      timeout=10) as raw:
            start = time.monotonic()
            assert raw.recv(100) == b""
            assert time.monotonic() - start < 10
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert server.requests == []


def test_serve_refuses_to_start_without_tokens_or_off_loopback_without_auth(home):
    missing = mibyan(home, "serve", "--port", "0")
    assert missing.returncode == 2 and "no bearer tokens" in missing.stderr
    exposed = mibyan(home, "serve", "--no-auth", "--host", "0.0.0.0", "--port", "0")
    assert exposed.returncode == 2 and "only on loopback" in exposed.stderr


def test_uvicorn_lines_and_tracebacks_are_redacted(caplog):
    import logging

    from effects.logs import redact_loggers
    from pipeline.serve.server import UVICORN_LOGGERS
    token = "tok-gateway-secret-0123456789"
    redact_loggers(UVICORN_LOGGERS)  # as a gateway without tokens did earlier in the process
    redact_loggers(UVICORN_LOGGERS, (token,))
    logger = logging.getLogger("uvicorn.error")
    try:
        raise RuntimeError(f"a handler failed holding {token} and sk-proj-ABCDEFGHIJKLMNOPQRST")
    except RuntimeError:
        with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
            logger.exception("Exception in ASGI application for %s", token)
    [record] = [r for r in caplog.records if r.name == "uvicorn.error"]
    text = caplog.text
    assert "Exception in ASGI application" in text and "RuntimeError" in text
    assert token not in text and "sk-proj-ABCDEFGHIJKLMNOPQRST" not in text
    assert record.exc_text is not None and token not in record.exc_text


def _access_lines(path: str, known: tuple[str, ...] = ()) -> tuple[str, str]:
    """An access line as uvicorn logs it, through uvicorn's own access formatter and the
    redacting filter; and what logging printed about it going wrong."""
    import io
    import logging

    from uvicorn.logging import AccessFormatter

    from effects.logs import RedactingFilter

    out, errors = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s',
                                         use_colors=False))
    logger = logging.getLogger(f"mibyan.test.access.{len(path)}")
    logger.addHandler(handler)
    logger.addFilter(RedactingFilter(known))
    logger.propagate = False
    logger.setLevel(logging.INFO)
    stderr, sys.stderr = sys.stderr, errors  # where logging reports a formatter's failure
    try:
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", path, "1.1", 200)
    finally:
        sys.stderr = stderr
        logger.removeHandler(handler)
    return out.getvalue(), errors.getvalue()


def test_access_lines_keep_uvicorn_s_format_through_the_redaction() -> None:
    """The filter used to turn every record into a finished line with no arguments, which
    uvicorn's access formatter unpacks: each request printed a logging error instead."""
    line, errors = _access_lines("/v1/sessions")
    assert errors == ""
    assert line == '127.0.0.1:5000 - "POST /v1/sessions HTTP/1.1" 200 OK\n'


def test_a_secret_in_an_access_line_is_hidden_and_the_line_still_formats() -> None:
    token = "tok-gateway-secret-0123456789"
    line, errors = _access_lines(f"/v1/models?key={token}&api_key=sk-proj-ABCDEFGHIJKLMNOPQRST",
                                 (token,))
    assert errors == ""
    assert token not in line and "sk-proj-ABCDEFGHIJKLMNOPQRST" not in line
    assert line.startswith('127.0.0.1:5000 - "POST /v1/models?key=') and line.endswith(" 200 OK\n")


_PIECES = [text for text, _ in SECRETS] + ORDINARY[:20] + ["password:", "Bearer", "%", "%s"]


@settings(max_examples=200, deadline=None)
@given(template=st.lists(st.sampled_from(_PIECES), max_size=3).map(" ".join),
       args=st.lists(st.sampled_from(_PIECES), max_size=3))
def test_a_filtered_line_holds_no_secret_however_template_and_arguments_split_it(
        template: str, args: list[str]) -> None:
    """Whether the arguments keep their shape or the line is given whole, what a formatter
    prints of it holds none of the corpus's secrets (a name in the template, its value in an
    argument, included)."""
    import logging

    from effects.logs import RedactingFilter

    template = template.replace("%", "%%") + " %s" * len(args)
    record = logging.LogRecord("mibyan.test", logging.INFO, __file__, 1, template,
                               tuple(args), None)
    whole = record.getMessage()
    RedactingFilter().filter(record)
    printed = logging.Formatter().format(record)
    assert printed == redact(printed)
    for text, secret in SECRETS:
        if text in whole:
            assert secret not in printed

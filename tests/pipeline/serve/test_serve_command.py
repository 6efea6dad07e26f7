"""``mibyan serve`` run as a user would: a subprocess on an ephemeral port."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx

from tests.fake_openai import Reply
from tests.pipeline.test_cli import ROOT, clean_env, mibyan


def test_serve_answers_with_its_tokens_and_stops_on_sigterm(server, home, tmp_path):
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[serve]\ntokens = { ci = "MIBYAN_TEST_TOKEN" }\n')
    server.script(Reply.text("served"))
    env = clean_env(home, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-x-0123456",
                           "MIBYAN_TEST_TOKEN": "tok-ci-0123456789"})
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "serve", "--port", "0",
                             "--model", "fake", "--workdir", str(tmp_path)], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            if found := re.search(r"running on http://127\.0\.0\.1:(\d+)", line):
                port = int(found.group(1))
                break
        assert port, "the server never said where it listens"
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/v1/models").status_code == 401
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                            headers={"Authorization": "Bearer tok-ci-0123456789"},
                            json={"model": "mibyan",
                                  "messages": [{"role": "user", "content": "hi"}]})
        assert answer.json()["choices"][0]["message"]["content"] == "served"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal: the status tells it.
    assert proc.returncode == -signal.SIGTERM


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

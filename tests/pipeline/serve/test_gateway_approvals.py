"""A kind of command allowed "always" at a terminal is not allowed for the gateway's clients,
unless ``[serve] trust_terminal_approvals``; the gateway's own list allows it for them."""

from __future__ import annotations

import json

import pytest

from stages.log.events import ApprovalAnswered
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import start_gateway

ALWAYS = json.dumps({"always": ["recursive_delete"]})


def _run_rm(upstream, tmp_path, *, serve=None, lists=("approvals.json",)):
    """A gateway client asks for ``rm -rf build``; (the approval's choice and source, whether
    ``build`` is still there)."""
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "build").mkdir(parents=True)
    for name in lists:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(ALWAYS)
    upstream.script(Reply.tool_calls([("terminal", '{"command": "rm -rf build"}')]),
                    Reply.text("done"))
    for gateway in start_gateway(upstream, home, work, serve=serve,
                                 toolsets=("terminal",)):
        with gateway.client() as client:
            response = client.post("/v1/chat/completions", json={
                "model": "mibyan", "messages": [{"role": "user", "content": "clean up"}]})
        assert response.status_code == 200, response.text
        sid = response.headers["x-mibyan-session-id"]
        [answer] = [e for e in gateway.events(sid) if isinstance(e, ApprovalAnswered)]
        assert gateway.assert_every_session_replays() == 1
    upstream.assert_done()
    return (answer.choice, answer.source), (work / "build").is_dir()


def test_a_terminal_s_always_does_not_hold_for_gateway_clients(upstream, tmp_path):
    assert _run_rm(upstream, tmp_path) == (("deny", "default"), True)


@pytest.mark.parametrize(("serve", "lists"), [
    ({"trust_terminal_approvals": True}, ("approvals.json",)),
    (None, ("serve/approvals.json",))])
def test_the_gateway_s_own_list_or_a_trusted_terminal_s_allows_it(upstream, tmp_path, serve,
                                                                 lists):
    assert _run_rm(upstream, tmp_path, serve=serve, lists=lists) == (
        ("always", "allowlist"), False)


def test_trust_terminal_approvals_must_be_true_or_false():
    from pipeline.serve.gateway_config import serve_config
    from stages.errors import UsageError
    with pytest.raises(UsageError, match="trust_terminal_approvals must be true or false"):
        serve_config({"serve": {"trust_terminal_approvals": "yes"}}, no_auth=True)

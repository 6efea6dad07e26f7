"""The provider router: one place that builds adapters, names the endpoint in errors, and keeps
the live set of secrets the journal redacts with."""

from __future__ import annotations

from typing import ClassVar

import pytest

from pipeline.providers import ProviderRouter, Secrets
from stages.decision import ModelRequest
from stages.errors import ProviderHTTPError
from stages.log.events import ModelFailed
from stages.log.redact import redact_event


def request(**kw) -> ModelRequest:
    kw.setdefault("base_url", "http://host.test/v1")
    kw.setdefault("provider", "acme")
    kw.setdefault("api_mode", "chat_completions")
    return ModelRequest(model="m", purpose="turn", system_prompt=None, messages=(), **kw)


class Recorded:
    """An adapter class that remembers how it was built and fails every call."""

    built: ClassVar[list[dict]] = []

    def __init__(self, *, base_url, api_key, provider, keys, timeout, deadline=None) -> None:
        Recorded.built.append({"base_url": base_url, "api_key": api_key, "provider": provider,
                               "timeout": timeout, "deadline": deadline})

    def complete(self, request, *, on_delta=None, cancel=None):
        raise ProviderHTTPError("HTTP 502 from acme: bad gateway for sk-live-key-0123456789",
                                status=502, body='{"echo": "sk-live-key-0123456789"}')


@pytest.fixture(autouse=True)
def _forget():
    Recorded.built.clear()


def test_the_read_timeout_and_the_deadline_reach_the_adapter_once():
    router = ProviderRouter(default_key="k", keys={}, timeout=7.0, deadline=70.0,
                            adapters=lambda mode: Recorded,
                            userinfo={"http://host.test/v1": "bob:pw-pw-pw-pw"})
    for _ in range(2):
        with pytest.raises(ProviderHTTPError):
            router.complete(request())
    assert Recorded.built == [{"base_url": "http://bob:pw-pw-pw-pw@host.test/v1", "api_key": "k",
                               "provider": "acme", "timeout": 7.0, "deadline": 70.0}]


def test_an_error_names_the_provider_and_endpoint_and_masks_known_secrets():
    router = ProviderRouter(default_key="sk-live-key-0123456789", keys={},
                            adapters=lambda mode: Recorded)
    with pytest.raises(ProviderHTTPError) as caught:
        router.complete(request())
    assert str(caught.value).endswith("[acme at http://host.test/v1]")
    assert "sk-live-key-0123456789" not in str(caught.value)
    assert "sk-live-key-0123456789" not in caught.value.body


def test_secrets_grow_and_the_journal_sees_each_new_one():
    secrets = Secrets(["first-secret-value", None, ""])
    event = ModelFailed(error_type="X", message="second-secret-value leaked")
    assert redact_event(event, secrets).message == event.message
    secrets.add("second-secret-value")
    secrets.add("second-secret-value")
    assert len(secrets) == 2 and list(secrets) == ["first-secret-value", "second-secret-value"]
    assert "second-secret-value" not in redact_event(event, secrets).message
    assert "hidden" in repr(secrets) and "first" not in repr(secrets)


def test_a_refresh_adds_the_new_key_to_the_secrets():
    router = ProviderRouter(default_key="k", keys={"A": "old-key-000000000"},
                            refresh_hook=lambda label: "new-key-1111111111")
    assert router.refresh("A") and router.keys == {"A": "new-key-1111111111"}
    assert list(router.secrets) == ["k", "old-key-000000000", "new-key-1111111111"]
    assert not ProviderRouter(default_key="k", keys={}).refresh("A")


def test_an_error_in_anthropic_mode_never_says_from_openai():
    """An endpoint no one named is provider ``openai``; spoken to in Anthropic's Messages
    protocol (``api_mode="anthropic_messages"``), its errors name ``anthropic``."""
    from tests.fake_anthropic import FakeAnthropicServer, Reply
    with FakeAnthropicServer() as server:
        server.script(Reply.error(400, "bad thing"))
        router = ProviderRouter(default_key="sk-ant-test-key-000000", keys={})
        with pytest.raises(ProviderHTTPError) as caught:
            router.complete(request(provider="openai", api_mode="anthropic_messages",
                                    base_url=server.base_url, max_tokens=64))
    message = str(caught.value)
    assert "from anthropic at" in message and message.endswith(f"[anthropic at {server.base_url}]")
    assert "openai" not in message

"""The recorded settings' rules: each refuses what no stage can follow, as an error both the
caller (``UsageError``) and code building the value (``ValueError``) recognise."""

from __future__ import annotations

import math

import pytest

from effects.providers.http_shell import check_timeouts
from stages.errors import SettingError, UsageError
from stages.log import events as ev
from stages.log.api_mode import resolve_api_mode

BAD = [
    ({"max_turns": 0}, "max_turns must be a whole number of at least 1, got 0"),
    ({"max_turns": True}, "max_turns must be a whole number of at least 1, got True"),
    ({"max_tokens": 2.5}, "max_tokens must be a whole number of at least 1, got 2.5"),
    ({"context_length": 0}, "context_length must be a whole number of at least 1, got 0"),
    ({"max_retries": -1}, "max_retries must be a whole number of at least 0, got -1"),
    ({"retry_base_delay": math.nan}, "retry_base_delay must be a number of seconds, at least 0"),
    ({"billing_cooldown": math.inf}, "billing_cooldown must be a number of seconds, at least 0"),
    ({"rate_limit_cooldown": -1.0}, "rate_limit_cooldown must be a number of seconds"),
    ({"preflight_threshold": 0.0}, "preflight_threshold must be a fraction in (0, 1], got 0.0"),
    ({"between_turns_threshold": "1"}, "between_turns_threshold must be a fraction in (0, 1]"),
    ({"cache_ttl": "2h"}, "cache_ttl must be one of 5m, 1h, got '2h'"),
    ({"platform": "tv"}, "platform must be one of cli, gateway, cron, api, got 'tv'"),
    ({"credential_strategy": "random"}, "unknown credential_strategy 'random'; expected one"),
    ({"api_mode": "chat"}, "unknown api_mode 'chat'; expected one of"),
    ({"reasoning_effort": "max"}, "reasoning_effort must be one of"),
    ({"reasoning_budget": 0}, "reasoning_budget must be a positive number of tokens; got 0"),
    ({"rules": 0}, "unknown rules version 0"),
    ({"sandbox": "none"}, "sandbox must be one of read-only, workspace-write, full-access"),
    ({"network": "yes"}, "network must be true or false, got 'yes'"),
    ({"allow_unconfined": 1}, "allow_unconfined must be true or false, got 1"),
    # A string is no list of its letters: it would have excluded "*", "K", "E", "Y".
    ({"env_exclude": "*KEY*"}, "env_exclude must be a list of names or patterns"),
    ({"env_keep": ["GH_TOKEN", " "]}, "env_keep must be a list of names or patterns"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_a_setting_no_stage_can_follow_is_refused_when_built(change, message) -> None:
    with pytest.raises(SettingError) as refused:
        ev.SessionSettings(model="m", provider="p", **change)
    assert str(refused.value).startswith(message)
    assert isinstance(refused.value, UsageError) and isinstance(refused.value, ValueError)


def test_a_provider_entry_follows_the_same_rules() -> None:
    with pytest.raises(SettingError, match="context_length must be a whole number of at least"):
        ev.ProviderEntry(provider="p", model="m", context_length=0)


def test_an_explicit_api_mode_is_refused_in_the_wording_of_the_settings() -> None:
    with pytest.raises(SettingError, match="unknown api_mode 'chat'; expected one of"):
        resolve_api_mode(explicit="chat", provider="openai", base_url=None, model="m")


def test_timeouts_follow_the_rule_of_the_agent_settings() -> None:
    assert check_timeouts(10, None) == (10.0, 30.0)
    with pytest.raises(UsageError, match=r"^timeout must be a positive number of seconds, got 0$"):
        check_timeouts(0, None)
    with pytest.raises(UsageError, match="deadline must be a positive number of seconds, got"):
        check_timeouts(1, math.nan)


def test_a_list_of_names_is_held_as_a_tuple() -> None:
    settings = ev.SessionSettings(model="m", provider="p", env_keep=["GH_TOKEN"])
    assert settings.env_keep == ("GH_TOKEN",)

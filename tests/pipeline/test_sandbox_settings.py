"""The sandbox settings: arguments, then ``[sandbox]`` in config.toml, then the defaults; a
resumed session keeps what it recorded; each reaches the terminal when the session opens."""

from __future__ import annotations

import pytest

from pipeline.agent import Agent
from pipeline.chat.build import build_agent
from pipeline.chat.options import ChatOptions
from pipeline.testing import ScriptedModel
from pipeline.toolsets import builtin_tools
from stages.errors import UsageError


def _agent(home, **given) -> Agent:
    return Agent(client=ScriptedModel("ok"), home=home, **given)


def test_the_defaults_confine_with_the_network_off(tmp_path) -> None:
    settings = _agent(tmp_path).settings
    assert (settings.sandbox, settings.network, settings.allow_unconfined) == (
        "workspace-write", False, False)


def test_arguments_beat_the_file_and_a_resumed_session_keeps_its_own(tmp_path) -> None:
    (tmp_path / "config.toml").write_text(
        '[sandbox]\nmode = "read-only"\nnetwork = true\nallow_unconfined = true\n')
    from_file = _agent(tmp_path)
    assert (from_file.settings.sandbox, from_file.settings.network,
            from_file.settings.allow_unconfined) == ("read-only", True, True)
    with _agent(tmp_path, sandbox="full-access", network=False) as agent:
        agent.run("hi")
    assert (agent.settings.sandbox, agent.settings.network) == ("full-access", False)
    (tmp_path / "config.toml").unlink()
    resumed = _agent(tmp_path, session_id=agent.session_id)
    assert (resumed.settings.sandbox, resumed.settings.network) == ("full-access", False)


@pytest.mark.parametrize("section, message", [
    ('mode = "open"', "[sandbox] mode: sandbox must be one of read-only, workspace-write, "
                      "full-access, got 'open'"),
    ('network = "yes"', "[sandbox] network: network must be true or false"),
    ('allow_unconfined = 1', "[sandbox] allow_unconfined: allow_unconfined must be true or false"),
    ('modes = "read-only"', "unknown setting [sandbox] modes"),
    ('mode = ["read-only"]', "[sandbox] mode: sandbox must be one of"),
])
def test_a_bad_sandbox_setting_is_named_with_its_table_and_key(tmp_path, section,
                                                                message) -> None:
    (tmp_path / "config.toml").write_text(f"[sandbox]\n{section}\n")
    with pytest.raises(UsageError) as raised:
        _agent(tmp_path)
    assert message in str(raised.value)


def test_a_bad_sandbox_argument_is_named_as_the_argument(tmp_path) -> None:
    (tmp_path / "config.toml").write_text('[sandbox]\nmode = "read-only"\n')
    with pytest.raises(UsageError) as raised:
        _agent(tmp_path, sandbox="none")
    assert str(raised.value).startswith("sandbox must be one of")


def test_a_sandbox_section_that_is_no_table_is_named(tmp_path) -> None:
    (tmp_path / "config.toml").write_text('sandbox = "read-only"\n')
    with pytest.raises(UsageError, match=r"\[sandbox\] in config.toml must be a table"):
        _agent(tmp_path)


def test_the_session_s_policy_reaches_the_terminal_when_it_opens(tmp_path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    tools = builtin_tools(work, toolsets=("terminal",))
    with Agent(client=ScriptedModel("ok"), tools=tools, home=home, sandbox="read-only",
               network=True) as agent:
        agent.open()
    policy = tools.terminal.sandbox.policy
    assert (policy.mode, policy.network, policy.home) == ("read-only", True, home)


def test_the_chat_passes_its_sandbox_on(tmp_path) -> None:
    from pipeline.chat.listen import EventRouter

    options = ChatOptions(home=tmp_path, workdir=tmp_path, sandbox="read-only",
                          overrides={"client": ScriptedModel()})
    agent = build_agent(options, model=None, session_id=None, router=EventRouter(None),
                        inbox=None)
    assert agent.settings.sandbox == "read-only"
    agent.close()


def test_a_session_under_rules_6_records_no_probe_and_is_still_confined(tmp_path) -> None:
    from effects.clock import RandomIds, SystemClock
    from effects.eventlog.codec import from_payload
    from effects.eventlog.store import read_envelopes, session_path
    from effects.performers import Effects
    from pipeline.settings import AgentSettings
    from stages.log.events import SessionSettings

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    tools = builtin_tools(work, toolsets=("terminal",))
    effects = Effects(clock=SystemClock(), ids=RandomIds(), model=ScriptedModel("ok"))
    settings = SessionSettings(model="m", provider="p", rules=6)
    with Agent(settings=settings, effects=effects, tools=tools,
               agent_settings=AgentSettings(home=home)) as agent:
        agent.run("hi")
    kinds = [from_payload(e.kind, e.schema_version, e.payload).kind
             for e in read_envelopes(session_path(home / "sessions", agent.session_id))]
    assert "sandbox_probed" not in kinds and "turn_finished" in kinds
    assert tools.terminal.sandbox.confined and tools.terminal.sandbox.policy.home == home


def test_the_environment_settings_come_from_the_file_and_arguments(tmp_path) -> None:
    assert _agent(tmp_path).settings.env_exclude == ("*KEY*", "*SECRET*", "*TOKEN*")
    (tmp_path / "config.toml").write_text(
        '[sandbox]\nenv_exclude = ["*KEY*", "AWS_*"]\nenv_keep = ["GH_TOKEN"]\n')
    from_file = _agent(tmp_path).settings
    assert (from_file.env_exclude, from_file.env_keep) == (("*KEY*", "AWS_*"), ("GH_TOKEN",))
    given = _agent(tmp_path, env_exclude=[], env_keep=["X"]).settings
    assert (given.env_exclude, given.env_keep) == ((), ("X",))


@pytest.mark.parametrize("section", ['env_exclude = "*KEY*"', 'env_keep = ["", "A"]',
                                     "env_keep = [1]"])
def test_a_bad_environment_setting_is_named(tmp_path, section) -> None:
    (tmp_path / "config.toml").write_text(f"[sandbox]\n{section}\n")
    with pytest.raises(UsageError) as raised:
        _agent(tmp_path)
    key = section.split(" ")[0]
    assert f"[sandbox] {key}: {key} must be a list of names or patterns" in str(raised.value)

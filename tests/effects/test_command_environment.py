"""The environment of a tool's commands: keys by name stay with mibyan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects.tools.environment import command_environment
from effects.tools.sandbox import SandboxPolicy
from effects.tools.terminal import Terminal
from effects.tools.workspace import Workspace
from stages.log.events import ENV_EXCLUDE

USER_ENV = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
            "OPENAI_API_KEY": "sk-1", "aws_secret_access_key": "a", "GITHUB_TOKEN": "ghp_1",
            "SSH_AUTH_SOCK": "/run/ssh", "KEYBOARD": "us", "MONKEY": "1"}


def test_the_default_patterns_drop_keys_secrets_and_tokens_in_any_case() -> None:
    kept = command_environment(ENV_EXCLUDE, environ=USER_ENV)
    assert kept == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
                    "SSH_AUTH_SOCK": "/run/ssh"}


def test_keep_lets_a_named_variable_through_and_no_patterns_drop_nothing() -> None:
    kept = command_environment(ENV_EXCLUDE, ("GITHUB_TOKEN", "key*"), environ=USER_ENV)
    assert set(kept) == {"PATH", "HOME", "LANG", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "KEYBOARD"}
    assert command_environment((), environ=USER_ENV) == USER_ENV


_NAMES = st.text(st.sampled_from("ABKEYSCRTOKN_ab12"), min_size=1, max_size=12)


@given(st.dictionaries(_NAMES, st.text(max_size=5)), st.lists(_NAMES, max_size=3))
def test_a_variable_passes_only_if_no_pattern_names_it_or_keep_does(environ, keep) -> None:
    kept = command_environment(ENV_EXCLUDE, keep, environ=environ)
    for name, value in environ.items():
        secret_looking = any(word in name.upper() for word in ("KEY", "SECRET", "TOKEN"))
        kept_by_name = name.upper() in {k.upper() for k in keep}
        if not secret_looking:
            assert kept[name] == value
        elif not kept_by_name:
            assert name not in kept


@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
def test_a_command_does_not_see_a_key_exported_in_mibyan_s_environment(
        tmp_path, monkeypatch, mode) -> None:
    monkeypatch.setenv("MIBYAN_TEST_API_KEY", "sk-exported-0123456789")
    monkeypatch.setenv("MIBYAN_TEST_PLAIN", "plain-value")
    terminal = Terminal(Workspace(root=tmp_path))
    terminal.confine(SandboxPolicy(mode=mode))
    try:
        out = terminal.terminal("env")["output"]
        assert "MIBYAN_TEST_PLAIN=plain-value" in out
        assert "sk-exported" not in out and "MIBYAN_TEST_API_KEY" not in out
        terminal.confine(SandboxPolicy(mode=mode, env_keep=("MIBYAN_TEST_API_KEY",)))
        assert "MIBYAN_TEST_API_KEY=sk-exported-0123456789" in terminal.terminal("env")["output"]
    finally:
        terminal.close()


_READ_PROC = """
import os, sys, tempfile
from pathlib import Path
from effects.tools.sandbox import SandboxPolicy, probe
from effects.tools.terminal import Terminal
from effects.tools.workspace import Workspace
assert probe().started, probe()
terminal = Terminal(Workspace(root=Path(tempfile.mkdtemp())))
terminal.confine(SandboxPolicy(mode="workspace-write"))
print(terminal.terminal("cat /proc/*/environ 2>/dev/null | tr '\\\\0' '\\\\n'")["output"])
terminal.close()
"""


def test_a_confined_command_cannot_read_the_key_from_mibyan_s_proc_entry() -> None:
    """The key was in mibyan's environment when it started (as a shell's export puts it), so
    ``/proc/<mibyan>/environ`` holds it: the sandbox's own /proc does not show mibyan."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _READ_PROC], cwd=root, capture_output=True,
                          text=True, check=True, timeout=120,
                          env={**os.environ, "MIBYAN_TEST_API_KEY": "sk-exported-0123456789"})
    assert "PATH=" in done.stdout  # the command did read environments
    assert "sk-exported" not in done.stdout

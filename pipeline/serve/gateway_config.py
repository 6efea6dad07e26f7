"""The gateway's settings: ``[serve]`` in config.toml, then the command line.

    [serve]
    host = "127.0.0.1"
    port = 8642
    tokens = { alice = "MIBYAN_TOKEN_ALICE", ci = "MIBYAN_TOKEN_CI" }
    toolsets = ["files", "terminal", "planning"]
    workdir = "/srv/agent"
    max_open_sessions = 1000

``tokens`` maps each owner's name to the environment variable holding its bearer token (as
``api_key_env`` does for providers: secrets stay out of the file). Each token sees only the
sessions made with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pipeline.toolsets import DEFAULT_TOOLSETS, TOOLSETS
from stages.errors import UsageError

DEFAULT_PORT = 8642
MAX_PORT = 65_535
AGENT_MODEL = "mibyan"
_KEYS = {"host": str, "port": int, "tokens": dict, "toolsets": list, "workdir": str,
         "max_open_sessions": int}
_NAMES = {str: "a string", int: "a whole number", dict: "a table", list: "a list"}


@attrs.frozen(kw_only=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    # token -> owner; empty only when authentication is switched off.
    tokens: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    auth: bool = True
    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS
    workdir: Path = attrs.field(factory=Path.cwd)
    max_open_sessions: int = 1000


def _section(file: Mapping[str, Any]) -> Mapping[str, Any]:
    section = file.get("serve", {})
    if not isinstance(section, Mapping):
        raise UsageError(f"[serve] in config.toml must be a table, got {section!r}")
    for key, value in section.items():
        if key not in _KEYS:
            raise UsageError(f"unknown setting [serve] {key}; expected one of "
                             f"{', '.join(sorted(_KEYS))}")
        if isinstance(value, bool) or not isinstance(value, _KEYS[key]):
            raise UsageError(f"[serve] {key} must be {_NAMES[_KEYS[key]]}, got {value!r}")
    return section


def _tokens(table: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for owner, variable in table.items():
        if not isinstance(variable, str) or not variable:
            raise UsageError(f"[serve] tokens.{owner} must name an environment variable, "
                             f"got {variable!r}")
        token = env.get(variable, "").strip()
        if not token:
            raise UsageError(f"[serve] tokens.{owner}: ${variable} is not set")
        if token in tokens:
            raise UsageError(f"[serve] tokens.{owner} and tokens.{tokens[token]} hold the "
                             "same token; each owner needs its own")
        tokens[token] = owner
    return tokens


def serve_config(file: Mapping[str, Any], *, host: str | None = None, port: int | None = None,
                 no_auth: bool = False, workdir: Path | None = None,
                 toolsets: tuple[str, ...] | None = None,
                 env: Mapping[str, str] | None = None) -> ServeConfig:
    """The arguments first, then ``[serve]``; a bad value is a ``UsageError`` naming it."""
    section = _section(file)
    tokens = {} if no_auth else _tokens(section.get("tokens", {}), os.environ if env is None
                                        else env)
    if not tokens and not no_auth:
        raise UsageError("no bearer tokens are configured: add [serve] tokens = { name = "
                         "\"ENV_VARIABLE\" } to config.toml, or pass --no-auth (loopback only)")
    chosen = toolsets or tuple(section.get("toolsets", DEFAULT_TOOLSETS))
    unknown = [t for t in chosen if t not in TOOLSETS]
    if unknown:
        raise UsageError(f"unknown toolset(s) {', '.join(map(str, unknown))}; choose from "
                         f"{', '.join(TOOLSETS)}")
    max_open = section.get("max_open_sessions", 1000)
    if max_open < 1:
        raise UsageError(f"[serve] max_open_sessions must be at least 1, got {max_open}")
    port = port if port is not None else section.get("port", DEFAULT_PORT)
    if not 0 <= port <= MAX_PORT:
        raise UsageError(f"[serve] port must be from 0 (any free port) to {MAX_PORT}, "
                         f"got {port}")
    return ServeConfig(host=host or section.get("host", "127.0.0.1"), port=port,
                       tokens=tokens, auth=not no_auth, toolsets=chosen,
                       workdir=Path(workdir or section.get("workdir") or Path.cwd()),
                       max_open_sessions=max_open)

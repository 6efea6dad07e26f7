"""The gateway's settings: ``[serve]`` in config.toml, then the command line.

    [serve]
    host = "127.0.0.1"
    port = 8642
    tokens = { alice = "MIBYAN_TOKEN_ALICE", ci = "MIBYAN_TOKEN_CI" }
    toolsets = ["files", "terminal", "planning"]
    workdir = "/srv/agent"
    max_open_sessions = 1000
    max_busy = 8                 # turns at once (default: 4 per core); one more gets a 503
    max_retry_after = 60.0       # the longest Retry-After a refused client is told
    allowed_hosts = ["agent.example.internal"]   # Host names besides loopback and ``host``
    cors_origins = ["https://chat.example.com"]  # browser origins allowed to call it
    max_body_bytes = 33554432
    max_json_depth = 64
    header_timeout = 10.0        # seconds for a request's head (line and headers)
    body_timeout = 30.0          # seconds for its whole body
    trust_terminal_approvals = false
    metrics_owners = ["ops"]     # who may read /metrics (default: every token)
    approvals = "deny"           # or "pause": the turn waits for a client's decisions
    approvers = ["alice"]        # owners whose tokens may decide (absent: every owner)

``tokens`` maps each owner's name to the environment variable holding its bearer token (as
``api_key_env`` does for providers: secrets stay out of the file). Each token sees only the
sessions made with it. The limits and the Host and Origin checks are ``pipeline.serve.guard``'s
(docs/gateway-security.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pipeline.serve.admission import MAX_RETRY_AFTER, default_max_busy
from pipeline.toolsets import DEFAULT_TOOLSETS, TOOLSETS
from stages.errors import UsageError

DEFAULT_PORT = 8642
MAX_PORT = 65_535
AGENT_MODEL = "mibyan"
# Far above any text conversation (a whole long context is a few MB of JSON), and below what
# would let a few clients exhaust the process's memory; Anthropic's Messages API allows 32 MB.
MAX_BODY_BYTES = 32 * 1024 * 1024
# OpenAI's bodies nest about 6 deep (tool call arguments are JSON text, not nested JSON);
# Python's parser recurses, and fails deep down at about 1000.
MAX_JSON_DEPTH = 64
# nginx allows 60 s for a head; a client on loopback or a LAN sends one in milliseconds.
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
_KEYS: dict[str, type | tuple[type, ...]] = {
    "host": str, "port": int, "tokens": dict, "toolsets": list, "workdir": str,
    "max_open_sessions": int, "max_busy": int, "max_retry_after": (int, float),
    "allowed_hosts": list, "cors_origins": list,
    "max_body_bytes": int, "max_json_depth": int, "header_timeout": (int, float),
    "body_timeout": (int, float), "trust_terminal_approvals": bool,
    "metrics_owners": list, "approvals": str, "approvers": list}
_NAMES = {str: "a string", int: "a whole number", dict: "a table", list: "a list",
          bool: "true or false", (int, float): "a number of seconds"}
_POSITIVE = ("max_body_bytes", "max_json_depth", "header_timeout", "body_timeout",
             "max_retry_after")


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
    # Turns running or waiting at once; past it a turn is refused (503, Retry-After).
    max_busy: int = attrs.field(factory=default_max_busy)
    # The longest wait a refused turn is told (``pipeline.serve.admission``).
    max_retry_after: float = MAX_RETRY_AFTER
    # Host header names accepted besides loopback's and ``host`` (DNS rebinding).
    allowed_hosts: tuple[str, ...] = ()
    # Browser origins that may call the gateway (CORS); any other Origin is refused.
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    max_json_depth: int = MAX_JSON_DEPTH
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    # Whether the home's "always" approvals (given in a terminal) hold for remote clients.
    trust_terminal_approvals: bool = False
    # The owners whose tokens may read /metrics; None: every owner's.
    metrics_owners: frozenset[str] | None = None
    # What a call that needs approval does: "deny" (clients that know nothing of approvals
    # keep working), or "pause" (the turn waits; ``/v1/sessions/{id}/approvals``).
    approvals: str = "deny"
    # Owners whose tokens may decide on their sessions' pending calls (None: every owner).
    approvers: tuple[str, ...] | None = None


def _section(file: Mapping[str, Any]) -> Mapping[str, Any]:
    section = file.get("serve", {})
    if not isinstance(section, Mapping):
        raise UsageError(f"[serve] in config.toml must be a table, got {section!r}")
    for key, value in section.items():
        if key not in _KEYS:
            raise UsageError(f"unknown setting [serve] {key}; expected one of "
                             f"{', '.join(sorted(_KEYS))}")
        wanted = _KEYS[key]
        if (isinstance(value, bool) and wanted is not bool) or not isinstance(value, wanted):
            raise UsageError(f"[serve] {key} must be {_NAMES[wanted]}, got {value!r}")
    for key in _POSITIVE:
        if section.get(key, 1) <= 0:
            raise UsageError(f"[serve] {key} must be more than 0, got {section[key]!r}")
    for key in ("allowed_hosts", "cors_origins", "metrics_owners", "approvers"):
        if not all(isinstance(item, str) and item for item in section.get(key, ())):
            raise UsageError(f"[serve] {key} must be a list of names, got "
                             f"{section[key]!r}")
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
    metrics_owners = section.get("metrics_owners")
    unknown_owners = sorted(set(metrics_owners or ()) - set(section.get("tokens", {})))
    if unknown_owners:
        raise UsageError(f"[serve] metrics_owners names no owner of [serve] tokens: "
                         f"{', '.join(unknown_owners)}")
    max_open = section.get("max_open_sessions", 1000)
    if max_open < 1:
        raise UsageError(f"[serve] max_open_sessions must be at least 1, got {max_open}")
    max_busy = section["max_busy"] if "max_busy" in section else default_max_busy()
    if max_busy < 1:
        raise UsageError(f"[serve] max_busy must be at least 1, got {max_busy}")
    port = port if port is not None else section.get("port", DEFAULT_PORT)
    if not 0 <= port <= MAX_PORT:
        raise UsageError(f"[serve] port must be from 0 (any free port) to {MAX_PORT}, "
                         f"got {port}")
    return ServeConfig(host=host or section.get("host", "127.0.0.1"), port=port,
                       tokens=tokens, auth=not no_auth, toolsets=chosen,
                       workdir=Path(workdir or section.get("workdir") or Path.cwd()),
                       max_open_sessions=max_open, max_busy=max_busy,
                       max_retry_after=float(section.get("max_retry_after", MAX_RETRY_AFTER)),
                       allowed_hosts=tuple(section.get("allowed_hosts", ())),
                       cors_origins=tuple(o.rstrip("/") for o in
                                          section.get("cors_origins", ())),
                       max_body_bytes=section.get("max_body_bytes", MAX_BODY_BYTES),
                       max_json_depth=section.get("max_json_depth", MAX_JSON_DEPTH),
                       header_timeout=float(section.get("header_timeout", HEADER_TIMEOUT)),
                       body_timeout=float(section.get("body_timeout", BODY_TIMEOUT)),
                       metrics_owners=None if metrics_owners is None
                       else frozenset(metrics_owners),
                       trust_terminal_approvals=section.get("trust_terminal_approvals", False),
                       approvals=_approvals(section), approvers=_approvers(section, tokens))


def _approvals(section: Mapping[str, Any]) -> str:
    mode = section.get("approvals", "deny")
    if mode not in ("deny", "pause"):
        raise UsageError(f"[serve] approvals must be \"deny\" or \"pause\", got {mode!r}")
    return str(mode)


def _approvers(section: Mapping[str, Any], tokens: Mapping[str, str]) -> tuple[str, ...] | None:
    if "approvers" not in section:
        return None
    names = tuple(section["approvers"])
    owners = set(tokens.values())
    if owners and (unknown := sorted(set(names) - owners)):
        raise UsageError(f"[serve] approvers names no owner of a token: {', '.join(unknown)}")
    return names

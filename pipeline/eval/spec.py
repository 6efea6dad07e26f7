"""What an evaluation runs: the configurations the forks go on with, where the sessions fork,
and how the forks run. Configurations come from a TOML or JSON file or from flags::

    [[config]]                 # TOML; JSON: {"config": [{...}, ...]} or a list of objects
    name = "mini"
    model = "gpt-4o-mini"      # any session setting: provider, base_url, api_mode,
    reasoning_effort = "low"   # preflight_threshold, identity, cheap_model, max_tokens, ...
    toolsets = ["file"]        # built-in toolsets the fork is offered (else the caller's tools)
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pipeline.export.select import ExportFilters
from pipeline.shell.fork import check_changes
from stages.errors import UsageError

__all__ = ["BACKENDS", "POINTS", "Configuration", "EvalSpec", "load_configurations",
           "parse_point"]

BACKENDS = ("local", "threads", "ray")  # local: processes
# Named fork points; "kind:<event kind>" forks after each turn's first record of that kind.
POINTS = ("turns", "last-turn", "first-tool-result")


def _settings(value: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    changes = dict(value)
    check_changes(changes)
    return tuple(sorted(changes.items()))


@attrs.frozen(kw_only=True)
class Configuration:
    """One arm of the evaluation: a name, the session settings the forks change, and the
    built-in toolsets they are offered (None: the tools given to :func:`evaluate`)."""

    name: str
    settings: tuple[tuple[str, Any], ...] = attrs.field(default=(), converter=_settings)
    toolsets: tuple[str, ...] | None = None

    @classmethod
    def of(cls, name: str, toolsets: Sequence[str] | None = None,
           **settings: Any) -> Configuration:
        return cls(name=name, settings=settings,
                   toolsets=None if toolsets is None else tuple(toolsets))

    @property
    def changes(self) -> dict[str, Any]:
        return dict(self.settings)


def parse_point(text: str) -> str:
    """A fork point as given (``turns``, ``last-turn``, ``first-tool-result``, ``kind:K``)."""
    if text in POINTS or (text.startswith("kind:") and len(text) > 5):
        return text
    raise UsageError(f"unknown fork point {text!r}; choose from {', '.join(POINTS)} or "
                     "kind:<event kind>")


def _entry(item: object, where: str) -> Configuration:
    if not isinstance(item, dict):
        raise UsageError(f"{where}: a configuration is a table of settings, got {item!r}")
    values = dict(item)
    name = values.pop("name", None)
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}: every configuration needs a name")
    toolsets = values.pop("toolsets", None)
    if toolsets is not None and (not isinstance(toolsets, list)
                                 or not all(isinstance(t, str) for t in toolsets)):
        raise UsageError(f"{where}: toolsets must be a list of toolset names")
    try:
        return Configuration.of(name, toolsets, **values)
    except UsageError as exc:
        raise UsageError(f"{where} ({name}): {exc}") from exc


def load_configurations(path: Path) -> tuple[Configuration, ...]:
    """The configurations of a ``.toml`` or ``.json`` file; a bad file is a UsageError."""
    try:
        text = path.read_text(encoding="utf-8")
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise UsageError(f"{path}: {exc}") from exc
    items = data.get("config") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise UsageError(f"{path}: expected a list of configurations ([[config]] in TOML)")
    configs = tuple(_entry(item, f"{path} configuration {i + 1}") for i, item in enumerate(items))
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: configuration names repeat")
    return configs


@attrs.frozen(kw_only=True)
class EvalSpec:
    """An evaluation: the recorded sessions under ``home`` that pass ``filters``, forked at
    ``points`` onto each of ``configs``; the forks are written under ``out`` (a home of its
    own: ``MIBYAN_HOME=<out> mibyan replay <fork>``), with the results."""

    home: Path
    out: Path
    configs: tuple[Configuration, ...]
    points: tuple[str, ...] = ("last-turn",)
    filters: ExportFilters = ExportFilters()
    scorers: tuple[str, ...] = ("exact",)
    workers: int = 2
    backend: str = "local"
    ray_address: str | None = None
    limit: int | None = None  # at most this many forks per configuration
    resamples: int = 2000
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.configs:
            raise UsageError("an evaluation needs at least one configuration")
        if len({c.name for c in self.configs}) != len(self.configs):
            raise UsageError("configuration names repeat")
        for point in self.points:
            parse_point(point)
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}; choose from "
                             f"{', '.join(BACKENDS)}")
        if self.workers < 1:
            raise UsageError(f"workers must be at least 1, got {self.workers}")

"""The public face: ``from pipeline import ...`` names exactly these, and each resolves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pipeline
import pipeline.testing

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = [
    "Agent",
    "AgentSettings",
    "Effects",
    "MibyanError",
    "ProviderEntry",
    "ReplayReport",
    "SessionSettings",
    "Tool",
    "ToolArgumentsError",
    "ToolRegistry",
    "TurnResult",
    "UsageError",
    "replay",
    "tool",
]

TESTING = ["CountingIds", "FakeClock", "ScriptedModel", "Step", "ToolCalls",
           "UnexpectedModelCall", "tool_calls"]


def test_all_is_pinned_and_sorted():
    assert pipeline.__all__ == PUBLIC
    assert pipeline.__all__ == sorted(pipeline.__all__)
    assert pipeline.testing.__all__ == TESTING == sorted(TESTING)


def test_every_public_name_resolves():
    for name in PUBLIC:
        assert getattr(pipeline, name) is not None, name
    for name in TESTING:
        assert getattr(pipeline.testing, name) is not None, name
    assert set(PUBLIC) <= set(dir(pipeline))


def test_replay_is_the_module_at_every_look_up():
    code = ("import pipeline, pipeline.shell.replay as m\n"
            "print(pipeline.replay is m, pipeline.replay is m, callable(m.replay))")
    fresh = ("import pipeline\nfirst = pipeline.replay\nfrom pipeline import replay\n"
             "print(first is replay, type(first).__name__)")
    assert _python(code) == "True True True"
    assert _python(fresh) == "True module"


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT).stdout.strip()


def test_an_unknown_name_is_an_attribute_error():
    try:
        pipeline.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("pipeline.NoSuchThing resolved")


def test_importing_the_package_does_not_import_the_sdks():
    code = ("import sys, pipeline; "
            "print(sorted(m for m in ('openai', 'anthropic', 'duckdb', 'pydantic') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"

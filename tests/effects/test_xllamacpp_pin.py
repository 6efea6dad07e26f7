"""Why pyproject.toml pins xllamacpp (the [local] extra), and the guard on moving the pin.

Measured (SmolLM2-135M with effects/local/chatml_tools.jinja, "What is the weather in Paris?",
one get_weather tool, tool_choice="required", max_tokens 64, greedy): xllamacpp 0.2.14,
2026.4.8672 and 2026.4.8929 answer with the tool call and empty content; 2026.5.9093,
2026.5.9294, 2026.6.9538 and 2026.10.11549 answer with prose cut at the token limit
(finish_reason "length", no tool call). The cause is upstream: from llama.cpp build 9093 the chat
autoparser (common/chat-auto-parser-generator.cpp) builds, for tool_choice="required",
`optional(content until "<tool_call>") + one or more tool calls`: prose before the call is
allowed, only ending without a call is not (the server log's generated parser shows
`Repetition(Tag(content, Until(<tool_call>)), 0, 1)`, where build 8929 had `Epsilon`). No flag
or template changes that: the content before a call is optional for every template, a named
tool_choice behaves the same, and a request `grammar` is refused with tools ("Cannot use custom
grammar constraints with tools"). Prefilling the assistant turn with "<tool_call>\n" does force
the call on 2026.10 (the server parses prefill and reply together). Build 11549 also renamed
CommonParams.hostname to hostnames, which effects/local/llama_server.py sets.

2026.4.8929 forces the call but fails the realserver and local_model lanes for two other
reasons (measured): CommonParamsSampling.grammar became a CommonGrammar, so the server with the
[local] grammar setting exits at start ("expected xllamacpp.xllamacpp.CommonGrammar, got str");
and a forced reply carries several calls (parallel tool calls: the same list_directory call
twice, or calls until max_tokens), where the tests expect one.

The behavioural test that tells when the pin can move is
tests/effects/test_local_server.py::test_tool_choice_required_allows_no_prose_before_the_call
(the local_model lane): install the candidate version, run it, and add the version here if it
passes, then the two lanes
(uv run pytest -m "realserver or local_model").
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from effects.local.model_file import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]
# Versions measured to force tool_choice="required" from the first token and to pass the
# realserver and local_model lanes (2026.4.x force the call but fail the lanes: see above).
PASSES_THE_LANES = {"0.2.14"}
WHY = ("xllamacpp from 2026.5.9093 (llama.cpp build 9093) lets tool_choice='required' write "
       "prose before the tool call, and SmolLM2 never reaches the call (see the docstring of "
       "tests/effects/test_xllamacpp_pin.py and docs/local-model.md). Before "
       "moving the pin, run tests/effects/test_local_server.py::"
       "test_tool_choice_required_allows_no_prose_before_the_call with the new version "
       "(-m local_model), then uv run pytest -m 'realserver or local_model', and add it to "
       "PASSES_THE_LANES if both pass")


def pinned() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["local"]
    [req] = [Requirement(r) for r in extras if Requirement(r).name == "xllamacpp"]
    [spec] = req.specifier
    assert spec.operator == "==", f"xllamacpp must be pinned to one version: {WHY}"
    return spec.version


def test_the_pin_is_a_version_measured_to_force_required_tool_calls_and_pass_the_lanes():
    version = pinned()
    assert version in PASSES_THE_LANES, f"xllamacpp=={version} in pyproject.toml: {WHY}"


def test_the_lock_the_install_hint_and_the_docs_name_the_pinned_version():
    version = pinned()
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    [locked] = [p["version"] for p in lock["package"] if p["name"] == "xllamacpp"]
    assert locked == version, f"uv.lock has xllamacpp {locked}, pyproject.toml {version}"
    assert f"xllamacpp=={version}" in INSTALL_HINT
    assert f"pinned to {version}" in (ROOT / "docs" / "local-model.md").read_text()


def test_the_installed_xllamacpp_is_the_pinned_one():
    try:
        installed = importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the [local] extra is not installed")
    version = pinned()
    assert installed == version, (f"xllamacpp {installed} is installed, pyproject.toml pins "
                                  f"{version}: uv sync --all-extras")


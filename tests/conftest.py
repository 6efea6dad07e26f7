"""Hypothesis profiles, and the lanes of the suite.

Hypothesis: the default profile is derandomized: every run tries the same examples, so the suite
(and CI) passes or fails the same way each time. ``HYPOTHESIS_PROFILE=explore`` draws fresh
random examples, to hunt for new failures; pin each one it finds with ``@example``.

Lanes: ``uv run pytest`` runs the default lane, the tests that take well under a few seconds
each, on every core (pytest-xdist). The slow lanes are left out of it by ``addopts`` in
pyproject.toml (``-m "not (realserver or ...)"``) and run by name, e.g.
``uv run pytest -m realserver``; ``.ci/run`` runs them all. A test joins a lane by its marker,
written in the test file (``realserver``, ``local_model``) or added here by file and name, so
that a slow test is listed in one place and the test files stay as they are."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

TESTS = Path(__file__).resolve().parent

# The slow lanes, each a marker (registered in pyproject.toml). ``addopts`` leaves out exactly
# these; keep the two lists the same.
SLOW_LANES = ("realserver", "local_model", "ray", "tmux", "subprocess", "slow")

# Whole files (or folders) of a lane, by path under tests/.
FILE_LANES: dict[str, str] = {
    "realserver/": "realserver",              # llama.cpp's own server (also marked in the files)
    "pipeline/test_batch_ray.py": "ray",      # a local Ray cluster in a process of its own
    "pipeline/test_eval_ray.py": "ray",       # secured Ray clusters started by `ray start`
    "pipeline/test_home_ray.py": "ray",       # replay, export and the index on a local Ray
    "pipeline/test_home_jobs.py": "subprocess",  # export and replay on pools of processes
    # datasets 5 and (through `uv run --isolated`) 3.6 in processes of their own
    "pipeline/test_export_datasets3.py": "subprocess",
    "pipeline/test_chat_terminal.py": "tmux",  # `mibyan chat` in a real terminal
    "pipeline/test_chat_steer_terminal.py": "tmux",  # typing into its running turns
    # `python -m pipeline.cli ...` in a process of its own, in every test of the file
    "pipeline/test_cli.py": "subprocess",
    "pipeline/test_cli_fork.py": "subprocess",
    "pipeline/test_pause_processes.py": "subprocess",  # a paused turn resumed elsewhere
    "pipeline/test_cli_log.py": "subprocess",
    "pipeline/test_cli_output.py": "subprocess",
    "pipeline/test_conventions.py": "subprocess",
    "pipeline/test_signed_logs.py": "subprocess",
    "pipeline/test_rollback_commands.py": "subprocess",
    # slow clients are cut after deadlines of seconds
    "pipeline/serve/test_slow_clients.py": "slow",
    "pipeline/serve/test_gateway_pause.py": "slow",  # turns that run tools over the gateway
    # transformers' import and a tokenizer folder's load: some seconds before the first test
    "pipeline/test_named_tokenizer.py": "slow",
    "pipeline/test_insights_jobs.py": "subprocess",  # the index read on a pool of processes
    "pipeline/test_startup_imports.py": "subprocess",
    # real MCP servers (stdio subprocesses, an HTTP one) and `mibyan run` with one configured
    "pipeline/test_mcp.py": "subprocess",
    # the gateway's sessions with real MCP servers (stdio, sandboxed), and kill -9 of a driver
    "pipeline/serve/test_gateway_mcp.py": "subprocess",
    # the chat's MCP servers from config.toml (real stdio servers), and `mibyan chat` piped
    "pipeline/test_chat_mcp.py": "subprocess",
}

# Single tests, by ``path::name`` under tests/ (the name without its parameters: every
# parametrized case joins). ``subprocess``: runs a mibyan CLI (or a fresh interpreter that
# imports the packages) in a process of its own, a second or more each; ``slow``: over a few
# seconds on a 2-core machine for another reason.
TEST_LANES: dict[str, str] = {
    # a whole replay through the command line, in process (some seconds)
    "effects/test_log_downgrade.py::"
    "test_an_old_corpus_log_replays_unless_signatures_are_required": "slow",
    # a fresh interpreter whose environment holds the key from its start
    "effects/test_command_environment.py::"
    "test_a_confined_command_cannot_read_the_key_from_mibyan_s_proc_entry": "subprocess",
    # 48 forks, each replayed
    "pipeline/test_eval.py::test_every_fork_pairs_with_its_recording_and_replays": "slow",
    "pipeline/serve/test_serve_command.py::test_serve_answers_with_its_tokens_and_stops_on_sigterm":
        "subprocess",
    "pipeline/serve/test_serve_command.py::"
    "test_serve_refuses_to_start_without_tokens_or_off_loopback_without_auth": "subprocess",
    # hypothesis properties and stateful machines with many, long examples
    "stages/test_compression_in_turn.py::"
    "test_any_number_of_compressions_in_a_turn_keeps_the_history_sound": "slow",
    "stages/test_shell_danger.py::test_strings_run_as_code_are_read_to_a_depth_then_asked_about":
        "slow",
    "stages/test_compression_properties.py::"
    "test_compression_keeps_the_rules_and_the_latest_user_message": "slow",
    "stages/test_properties.py::test_turn_loop_keeps_alternation_budget_and_fold_equality": "slow",
    "stages/test_memory.py::test_content_cannot_break_out_of_the_fence": "slow",
    "stages/test_messages.py::test_from_openai_round_trip": "slow",
    "stages/test_credential_pool.py::TestPoolMachine::runTest": "slow",
    "stages/test_codec.py::test_round_trip_through_a_log_line": "slow",
    # Hugging Face datasets: its import and first load take seconds
    "pipeline/test_token_export.py::"
    "test_token_exports_load_in_datasets_as_json_lines_and_parquet": "slow",
    "pipeline/test_export_properties.py::test_every_call_is_answered_and_roles_come_in_order":
        "slow",
    "pipeline/test_export_properties.py::"
    "test_every_segment_of_a_compressed_session_ends_answered": "slow",
    # DuckDB, pyarrow, datasets, notebooks and the cron command over recorded homes
    "pipeline/test_insights.py::test_index_then_query_equals_a_query_over_the_raw_logs": "slow",
    "pipeline/test_export.py::test_parquet_output_reads_back": "slow",
    "pipeline/test_export_datasets.py::"
    "test_the_logs_of_every_rules_version_export_and_match_the_schemas": "slow",
    "pipeline/test_cron.py::test_the_cron_command_adds_lists_and_removes": "slow",
    # a fresh Jupyter kernel per notebook
    "test_notebooks.py::test_each_notebook_runs_in_a_fresh_kernel_and_finds_the_sessions":
        "slow",
    # gguf's own reader makes a numpy view of every field's every part (over ten seconds)
    "effects/test_gguf_metadata.py::test_the_embedded_models_tokenizer_reads_as_with_ggufs_reader":
    "slow",
    # the documented `mibyan ... --help` lines, each in a process of its own
    "test_docs.py::test_the_documented_help_commands_run": "subprocess",
}


def _lane_of(item: pytest.Item) -> list[str]:
    try:
        rel = item.path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return []
    lanes = [lane for prefix, lane in FILE_LANES.items() if rel.startswith(prefix)]
    name = item.nodeid.split("::", 1)[1].split("[", 1)[0] if "::" in item.nodeid else ""
    lane = TEST_LANES.get(f"{rel}::{name}")
    return [*lanes, lane] if lane else lanes


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: set[str] = set()
    for item in items:
        for lane in _lane_of(item):
            item.add_marker(getattr(pytest.mark, lane))
        seen.add(item.nodeid.split("[", 1)[0].removeprefix("tests/"))
    # A whole run (no paths given) must find every listed test: a renamed or moved test would
    # otherwise fall back into the default lane unnoticed.
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        stale = sorted(set(TEST_LANES) - seen) + [
            f"{lane} (not left out by addopts)" for lane in SLOW_LANES
            if lane not in " ".join(config.getini("addopts")).partition("-m")[2]]
        if stale:
            warnings.warn(pytest.PytestConfigWarning(
                "tests/conftest.py lists tests that were not collected (moved or renamed?): "
                + ", ".join(stale)), stacklevel=1)

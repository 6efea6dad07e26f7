"""``mibyan eval`` / ``pipeline.eval.evaluate``: recorded sessions (made against the fake
OpenAI server) forked onto two configurations served by two more fake servers, on threads."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from effects.eventlog.store import read_envelopes, session_path
from pipeline.cli.main import main
from pipeline.eval import Configuration, EvalSpec, evaluate, load_configurations
from pipeline.eval.points import fork_points
from pipeline.eval.stats import paired
from pipeline.export.select import ExportFilters
from pipeline.shell.replay import replay
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.eval_sessions import lookup, record_sessions


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("eval") / "home"
    record_sessions(home, 6, turns=2)
    return home


@pytest.fixture(scope="module")
def servers():
    with FakeOpenAIServer(default=Reply.text("answer 1")) as same, \
            FakeOpenAIServer(default=Reply.text("something else entirely")) as other:
        yield same, other


def _spec(home: Path, out: Path, servers, **kw) -> EvalSpec:
    same, other = servers
    kw.setdefault("backend", "threads")
    return EvalSpec(home=home, out=out, configs=(
        Configuration.of("same", base_url=same.base_url),
        Configuration.of("other", base_url=other.base_url, model="gpt-4o")), **kw)


def test_every_fork_pairs_with_its_recording_and_replays(home, servers, tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-test")
    seen: list[tuple[int, int]] = []
    out = tmp_path / "out"
    report = evaluate(_spec(home, out, servers, points=("turns", "first-tool-result"),
                            scorers=("exact", "contains:answer",
                                     "py:tests.pipeline.eval_scorer:length_ok")),
                      tools=[lookup], progress=lambda done, total: seen.append((done, total)))
    # 6 sessions x 2 turns x (turn start, after the tool) x 2 configurations
    assert len(report.rows) == 48 and seen[-1] == (48, 48)
    assert all(r.error is None for r in report.rows)
    by_name = {c.name: c for c in report.configs}
    same, other = by_name["same"].paired, by_name["other"].paired
    # The recordings made 2 model calls from a turn's start and 1 after the tool; the forks
    # answer at once (1 call) wherever they start.
    assert same["model_calls"].recorded_mean == 1.5 and same["model_calls"].fork_mean == 1
    assert same["model_calls"].real and same["model_calls"].high < 0
    # Every third question's tool failed in the recording; the forks call no tool.
    assert same["tool_errors"].recorded_mean == pytest.approx(1 / 6)
    # "answer 1" is the recorded answer of one session in six; "other" never says "answer".
    assert same["score:exact"].fork_mean == pytest.approx(1 / 6)
    assert other["score:contains:answer"].diff == -1 and other["score:contains:answer"].real
    assert other["score:py:tests.pipeline.eval_scorer:length_ok"].fork_mean == 0
    # gpt-4o costs more than gpt-4o-mini per token: the interval says so.
    assert other["cost"].low > 0
    root = out / "sessions"
    for row in report.rows:
        assert row.fork_session_id is not None
        fork = list(read_envelopes(session_path(root, row.fork_session_id)))
        origin = list(read_envelopes(session_path(root, row.session_id)))
        assert [e.payload for e in fork[1:row.at]] == [e.payload for e in origin[1:row.at]]
        switch = next(i for i, e in enumerate(fork) if e.kind == "session_forked")
        assert switch >= row.at
        assert [e.kind for e in fork[row.at:switch]] == [e.kind for e in origin[row.at:switch]]
        assert replay(root, row.fork_session_id).identical
    saved = json.loads((out / "eval.json").read_text())
    assert saved["forks"] == 48 and {c["name"] for c in saved["configs"]} == {"same", "other"}
    table = pq.read_table(out / "results.parquet").to_pandas()
    assert len(table) == 48 and table["fork_model_calls"].sum() == 48
    assert duckdb.execute(f"SELECT count(*) FROM '{out / 'results.parquet'}' "
                      "WHERE config = 'other' AND fork_model = 'gpt-4o'").fetchone() == (24,)
    assert "6 sessions, 48 forks" in report.lines()[-1]


def test_filters_points_and_limits_choose_the_forks(home, servers, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-test")
    first = sorted(p.stem for p in (home / "sessions").glob("*.jsonl"))[0]
    report = evaluate(_spec(home, tmp_path / "one", servers, points=("last-turn",),
                            filters=ExportFilters(session_ids=(first,))), tools=[lookup])
    assert {(r.session_id, r.config) for r in report.rows} == {(first, "same"), (first, "other")}
    log = list(read_envelopes(session_path(home / "sessions", first)))
    last_turn = max(e.seq for e in log if e.kind == "turn_started")
    assert {r.at for r in report.rows} == {last_turn}
    limited = evaluate(_spec(home, tmp_path / "two", servers, limit=3), tools=[lookup])
    assert [c.forks for c in limited.configs] == [3, 3]


def test_fork_points_fall_after_a_turn_start_a_whole_tool_batch_or_a_kind(home):
    sid = sorted(p.stem for p in (home / "sessions").glob("*.jsonl"))[0]
    log = list(read_envelopes(session_path(home / "sessions", sid)))
    starts = [e.seq for e in log if e.kind == "turn_started"]
    tools = [e.seq + 1 for e in log if e.kind == "tool_ran"]
    assert [p.at for p in fork_points(sid, log, ["turns"])] == starts
    assert [p.at for p in fork_points(sid, log, ["last-turn"])] == starts[-1:]
    assert [p.at for p in fork_points(sid, log, ["first-tool-result"])] == tools
    replied = [e.seq + 1 for e in log if e.kind == "model_replied"][::2]
    assert [p.at for p in fork_points(sid, log, ["kind:model_replied"])] == replied
    both = fork_points(sid, log, ["turns", "last-turn"])
    assert [p.at for p in both] == starts  # each point once


def test_the_bootstrap_interval_brackets_the_mean_and_is_seeded():
    fork = [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    recorded = [0.0] * 8
    result = paired(fork, recorded, seed=3)
    assert result.diff == 0.75 and result.low < 0.75 < result.high and result.real
    assert paired(fork, recorded, seed=3) == result
    constant = paired([2.0, 3.0], [1.0, 2.0])
    assert (constant.low, constant.high) == (1.0, 1.0)
    missing = paired([None, 1.0], [1.0, None])
    assert missing.n == 0 and missing.diff is None and not missing.real
    noisy = paired([1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0])
    assert noisy.diff == 0 and noisy.low < 0 < noisy.high and not noisy.real


def test_configurations_come_from_toml_or_json_and_bad_ones_are_named(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[[config]]\nname = "mini"\nmodel = "gpt-4o-mini"\nreasoning_effort = "low"'
                    '\ntoolsets = ["file"]\n\n[[config]]\nname = "strict"\n'
                    'preflight_threshold = 0.3\nidentity = "You are terse."\n')
    mini, strict = load_configurations(toml)
    assert mini.changes == {"model": "gpt-4o-mini", "reasoning_effort": "low"}
    assert mini.toolsets == ("file",) and strict.toolsets is None
    assert strict.changes == {"identity": "You are terse.", "preflight_threshold": 0.3}
    js = tmp_path / "c.json"
    js.write_text(json.dumps([{"name": "a", "model": "m"}]))
    assert load_configurations(js)[0].changes == {"model": "m"}
    bad = tmp_path / "bad.toml"
    for text, message in [('[[config]]\nmodel = "m"\n', "needs a name"),
                          ('[[config]]\nname = "a"\nmodle = "m"\n', "unknown settings: modle"),
                          ('[[config]]\nname = "a"\n[[config]]\nname = "a"\n', "repeat"),
                          ("name = ", str(bad))]:
        bad.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_configurations(bad)


def test_bad_points_scorers_and_backends_are_usage_errors(home, tmp_path):
    config = (Configuration.of("a", model="m"),)
    for kw, message in [({"points": ("middle",)}, "unknown fork point 'middle'"),
                        ({"backend": "slurm"}, "unknown backend"),
                        ({"configs": ()}, "at least one configuration")]:
        with pytest.raises(UsageError, match=message):
            EvalSpec(home=home, out=tmp_path, **{"configs": config, **kw})
    for scorer, message in [("fuzzy", "unknown scorer 'fuzzy'"), ("regex:(", "scorer regex:"),
                            ("py:no_such_module:f", "cannot import f")]:
        with pytest.raises(UsageError, match=message):
            evaluate(EvalSpec(home=home, out=tmp_path / "x", configs=config,
                              scorers=(scorer,)))


def test_a_model_judges_and_its_judgements_are_sessions(home, servers, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-test")
    first = sorted(p.stem for p in (home / "sessions").glob("*.jsonl"))[0]
    with FakeOpenAIServer(default=Reply.text("8/10")) as judge:
        report = evaluate(_spec(home, tmp_path / "out", servers,
                                filters=ExportFilters(session_ids=(first,)),
                                scorers=(f"judge:judge-model@{judge.base_url}",)),
                          tools=[lookup])
        asked = judge.requests
    name = f"judge:judge-model@{judge.base_url}"
    assert [r.fork_scores for r in report.rows] == [{name: 0.8}] * 2
    assert len(asked) == 4  # both forks and the recorded answer, twice
    judged = list((tmp_path / "out" / "judge" / "sessions").glob("*.jsonl"))
    assert len(judged) == 4 and all(replay(j.parent, j.stem).identical for j in judged)


def test_the_eval_command_prints_the_paired_table(home, servers, tmp_path, monkeypatch,
                                                  capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-test")
    same, _ = servers
    configs = tmp_path / "configs.toml"
    configs.write_text(f'[[config]]\nname = "same"\nbase_url = "{same.base_url}"\n'
                       'toolsets = []\n')
    code = main(["--home", str(home), "eval", "--out", str(tmp_path / "out"), "--configs",
                 str(configs), "--backend", "threads", "--scorer", "contains:answer",
                 "--min-turns", "2", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "same: 6 forks, 0 failed" in printed
    assert "score:contains:answer" in printed and "6 sessions, 6 forks" in printed
    assert main(["--home", str(home), "eval", "--out", str(tmp_path / "o2")]) == 2
    assert "--configs FILE or --onto MODEL" in capsys.readouterr().err


def test_a_ray_cluster_that_cannot_be_joined_is_named_not_a_traceback(home, tmp_path, capsys):
    with socket.socket() as unused:  # a port where nothing listens
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    for argv in (["batch", str(prompts), "--out", str(tmp_path / "b")],
                 ["eval", "--onto", "m", "--out", str(tmp_path / "e")]):
        code = main(["--home", str(home), *argv, "--backend", "ray", "--ray-address", address,
                     "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and f"cannot join the Ray cluster at {address}" in err
        assert "Traceback" not in err

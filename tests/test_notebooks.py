"""Every notebook runs, cell by cell, against a real event log made here: the sample home of
``tests/sample_home.py`` (a retried 503, a failing tool, compressions into child sessions, an
interrupt and an exhausted budget), so that every table and plot has data."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sample_home import record

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("notebook-home") / "home").root


def _queries(namespace: dict) -> None:
    rows = {name: namespace[name].fetchall() for name in
            ("sessions", "kinds", "usage", "tools", "recoveries")}
    assert len(rows["sessions"]) == 4 and sorted(r[3] for r in rows["sessions"]) == [0, 2, 2, 4]
    assert [r[:3] for r in rows["tools"]] == [("add", 2, 2), ("boom", 1, 0)]
    assert rows["recoveries"] == [("overloaded", "retry", 1)]  # 503
    assert [(r[0], r[1]) for r in rows["usage"]] == [("gpt-4o-mini", 7),
                                                     ("claude-sonnet-4-5", 2)]


def _bars(ax) -> list[float]:
    return [patch.get_height() for patch in ax.patches]


def _plots(namespace: dict) -> None:
    tokens = namespace["tokens_fig"].axes
    assert sum(_bars(tokens[0])) > 0 and len(tokens[1].lines[0].get_ydata()) == 2
    assert max(tokens[1].lines[0].get_ydata()) > 0  # a cost per day
    assert sorted(_bars(namespace["tools_fig"].axes[0])) == [0.0, 1.0]  # boom always fails
    model, tool = namespace["latency_fig"].axes
    assert sum(_bars(model)) == 12 and sum(_bars(tool)) == 3  # 9 replies, a 503, 2 summaries
    before_after = _bars(namespace["compression_fig"].axes[0])
    assert len(before_after) == 4 and before_after[0] > before_after[2] > 0


CHECKS: dict[str, Callable[[dict], None]] = {"insights": _queries, "insights_plots": _plots}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_cells_run_and_find_the_sessions(notebook, sessions, monkeypatch):
    monkeypatch.setenv("MIBYAN_SESSIONS", str(sessions))
    namespace: dict = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{notebook.name}", "exec"), namespace)
    CHECKS[notebook.stem](namespace)


def test_every_notebook_is_checked():
    assert NOTEBOOKS and {p.stem for p in NOTEBOOKS} == set(CHECKS)

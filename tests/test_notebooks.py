"""Every notebook runs where users run it: in a fresh Jupyter kernel (nbclient starts the
environment's own ``python3`` kernel), against a real event log made here, the sample home of
``tests/sample_home.py`` (a retried 503, a failing tool, compressions into child sessions, an
interrupt and an exhausted budget), so that every table and plot has data.

Running the cells with ``exec`` outside a kernel hid two failures a user met at once: DuckDB
refuses its progress-bar setting in Jupyter without ipywidgets, and a forced Agg backend showed
no plot. So the checks read what the kernel produced: the outputs of the cells (images
included) and, from a last cell appended here, the figures' data as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import nbclient
import nbformat
import pytest

from tests.sample_home import record

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("notebook-home") / "home").root


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory) -> Path:
    """An evaluation (``mibyan eval``) of four recorded sessions onto two configurations."""
    from pipeline.eval import Configuration, EvalSpec, evaluate
    from tests.fake_openai import FakeOpenAIServer, Reply
    from tests.pipeline.eval_sessions import lookup, record_sessions
    base = tmp_path_factory.mktemp("notebook-eval")
    record_sessions(base / "home", 4)
    with FakeOpenAIServer(default=Reply.text("answer 1")) as same, \
            FakeOpenAIServer(default=Reply.text("a much longer answer than that")) as other:
        evaluate(EvalSpec(home=base / "home", out=base / "eval", backend="threads",
                          scorers=("contains:answer",),
                          configs=(Configuration.of("same", base_url=same.base_url),
                                   Configuration.of("other", base_url=other.base_url))),
                 tools=[lookup])
    return base / "eval"


# A last cell per notebook: prints, as JSON, what the checks below need from the kernel.
PROBES = {
    "insights": """
import json
print(json.dumps({name: [list(row) for row in globals()[name].fetchall()]
                  for name in ("sessions", "kinds", "usage", "tools", "recoveries")},
                 default=str))
""",
    "eval": """
import json
print(json.dumps({
    "configs": configs,
    "paired": [[float(p.get_height()) for p in ax.patches] for ax in paired_fig.axes],
    "titles": [ax.get_title() for ax in paired_fig.axes],
    "spread": {name: sorted(values) for name, values in spread.items()},
}))
""",
    "insights_plots": """
import json
def _bars(ax):
    return [float(patch.get_height()) for patch in ax.patches]
print(json.dumps({
    "tokens": _bars(tokens_fig.axes[0]),
    "cost": [float(y) for y in tokens_fig.axes[1].lines[0].get_ydata()],
    "tools": _bars(tools_fig.axes[0]),
    "latency": [_bars(ax) for ax in latency_fig.axes],
    "compression": _bars(compression_fig.axes[0]),
}))
""",
}


def _queries(data: dict) -> None:
    assert len(data["sessions"]) == 4
    assert sorted(int(r[3]) for r in data["sessions"]) == [0, 2, 2, 4]
    assert [r[:3] for r in data["tools"]] == [["add", 2, 2], ["boom", 1, 0]]
    assert data["recoveries"] == [["overloaded", "retry", 1]]  # 503
    assert [r[:2] for r in data["usage"]] == [["gpt-4o-mini", 7], ["claude-sonnet-4-5", 2]]


def _plots(data: dict) -> None:
    assert sum(data["tokens"]) > 0 and len(data["cost"]) == 2
    assert max(data["cost"]) > 0  # a cost per day
    assert sorted(data["tools"]) == [0.0, 1.0]  # boom always fails
    model, tool = data["latency"]
    assert sum(model) == 12 and sum(tool) == 3  # 9 replies, a 503, 2 summaries
    before_after = data["compression"]
    assert len(before_after) == 4 and before_after[0] > before_after[2] > 0


def _eval(data: dict) -> None:
    assert data["configs"] == ["same", "other"]
    titles = data["titles"]
    assert titles[:4] == ["completed", "tool_errors", "model_calls", "output_tokens"]
    assert titles[4] == "score:contains:answer"
    model_calls = data["paired"][titles.index("model_calls")]
    assert model_calls == [-1.0, -1.0]  # the recordings called a tool first, the forks do not
    answered = data["paired"][titles.index("score:contains:answer")]
    assert answered == [0.0, 0.0]
    assert len(data["spread"]["same"]) == len(data["spread"]["other"]) == 4
    assert max(data["spread"]["same"]) < min(data["spread"]["other"])


CHECKS: dict[str, Callable[[dict], None]] = {"insights": _queries, "insights_plots": _plots,
                                             "eval": _eval}


def execute(notebook: Path) -> tuple[list, dict]:
    """The notebook's code cells as a fresh kernel ran them, and the probe's JSON."""
    book = nbformat.read(notebook, as_version=4)
    book.cells.append(nbformat.v4.new_code_cell(PROBES[notebook.stem]))
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}}).execute()
    *cells, probe = [cell for cell in book.cells if cell.cell_type == "code"]
    [printed] = [o for o in probe.outputs if o.output_type == "stream" and o.name == "stdout"]
    return cells, json.loads(printed.text)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_notebook_runs_in_a_fresh_kernel_and_finds_the_sessions(notebook, sessions,
                                                                      evaluation, monkeypatch):
    monkeypatch.setenv("MIBYAN_SESSIONS", str(sessions))  # the kernel inherits the environment
    monkeypatch.setenv("MIBYAN_EVAL", str(evaluation))
    cells, data = execute(notebook)  # a cell that raises fails here, naming it
    CHECKS[notebook.stem](data)
    for cell in cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
        assert not [o for o in cell.outputs if o.get("name") == "stderr"], cell.source
    # Every cell that draws shows its figure inline, once.
    drawing = [cell for cell in cells if "plt.subplots(" in cell.source]
    for cell in drawing:
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) == 1, cell.source
    assert len(drawing) == {"insights_plots": 4, "eval": 2}.get(notebook.stem, 0)


def test_every_notebook_is_checked():
    assert NOTEBOOKS and {p.stem for p in NOTEBOOKS} == set(CHECKS) == set(PROBES)

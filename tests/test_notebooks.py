"""Every notebook runs, cell by cell, against a real event log made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.agent import Agent
from tests.fake_openai import FakeOpenAIServer, Reply

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("notebook-home")
    with FakeOpenAIServer() as server:
        server.script(Reply.error(503, "overloaded", type="server_error"),
                      Reply.tool_calls([("add", '{"a": 1, "b": 2}')]), Reply.text("3"),
                      Reply.text("bye"))
        with Agent(model="m", base_url=server.base_url, api_key="k", tools=[add], home=home,
                   retry_base_delay=0.01, durability="flush") as agent:
            agent.run_conversation("add 1 and 2")
            agent.run_conversation("thanks")
    return home / "sessions"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_cells_run_and_find_the_session(notebook, sessions, monkeypatch):
    monkeypatch.setenv("MIBYAN_SESSIONS", str(sessions))
    namespace: dict = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{notebook.name}", "exec"), namespace)
    rows = {name: namespace[name].fetchall() for name in
            ("sessions", "kinds", "usage", "tools", "recoveries")}
    assert len(rows["sessions"]) == 1 and rows["sessions"][0][3] == 2  # two turns
    assert rows["tools"] == [("add", 1, 1, pytest.approx(rows["tools"][0][3]))]
    assert rows["recoveries"] == [("overloaded", "retry", 1)]  # 503
    assert rows["usage"][0][1] == 3  # three answered calls


def test_there_is_a_notebook():
    assert NOTEBOOKS

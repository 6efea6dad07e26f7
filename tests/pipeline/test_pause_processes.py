"""A turn paused for approvals in one process is resumed with decisions in another (the
``subprocess`` lane): it completes, the denied call reaches the model with its reason, and
the session replays identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipeline.shell.replay import replay
from tests.fake_openai import FakeOpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]

# Each process builds the same agent over the session's home and does one thing.
PROCESS = """
import json, sys
from pathlib import Path
from pipeline.agent import Agent
from pipeline.shell.decisions import approve, deny
from pipeline.toolsets import builtin_tools

base_url, home, work, step = sys.argv[1:5]
agent = Agent(model="fake-model", base_url=base_url, api_key="sk-test", home=home,
              stream=False, max_retries=0, approvals="pause",
              session_id=None if step == "run" else json.loads(sys.argv[5])["session"],
              tools=builtin_tools(Path(work), toolsets=("terminal",)))
with agent:
    if step == "run":
        result = agent.run("clean up the build and the cache")
    else:
        pending = {p.command: p.call_id for p in agent.pending_approvals}
        result = agent.resume({pending["rm -rf build"]: deny("the build is still needed"),
                               pending["rm -rf cache"]: approve()})
print(json.dumps({"session": agent.session_id, "paused": result.paused,
                  "pending": [p.command for p in result.pending_approvals],
                  "completed": result.completed, "answer": result.final_response}))
"""


def _process(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROCESS, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_paused_turn_is_resumed_in_another_process(tmp_path) -> None:
    work = tmp_path / "work"
    for name in ("build", "cache"):
        (work / name).mkdir(parents=True)
    home = tmp_path / "home"
    with FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf build"}'),
                                        ("terminal", '{"command": "rm -rf cache"}')]),
                      Reply.text("Removed the cache; kept the build."))
        first = _process(server.base_url, str(home), str(work), "run")
        assert first["paused"] and first["pending"] == ["rm -rf build", "rm -rf cache"]
        assert len(server.requests) == 1
        second = _process(server.base_url, str(home), str(work), "resume", json.dumps(first))
        server.assert_done()
    assert second == {"session": first["session"], "paused": False, "pending": [],
                      "completed": True, "answer": "Removed the cache; kept the build."}
    assert (work / "build").exists() and not (work / "cache").exists()
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "the user's reason: the build is still needed" in results[0]["content"]
    assert "denied" not in results[1]["content"]
    assert replay(home / "sessions", first["session"]).identical

"""Checkpoints and rollback of the working tree, end to end: an Agent with the built-in tools
over real HTTP against the fake OpenAI server, real files, real git (the shadow repository)
and the user's own repository in the tree, which nothing may touch."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.tools.checkpoints import CheckpointStore
from pipeline.agent import Agent, fork_session
from pipeline.shell.replay import replay
from pipeline.toolsets import builtin_tools
from stages.log import events as ev
from tests.fake_openai import Reply

KEY = "sk-proj-ThisIsASecretKey0123456789"
BINARY = bytes(range(256)) * 4


def manifest(root: Path, *, under_git: bool = False) -> dict[str, str]:
    """Every file under ``root`` with its content's hash; the user's ``.git`` on its own
    (``under_git``) or left out. Directories are not compared: like git, a checkpoint holds
    files, so an empty directory is not restored."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if (rel == ".git" or rel.startswith(".git/")) != under_git:
            continue
        if path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _git(tree: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", *args],
                          cwd=tree, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project under git, with a binary file and an ignored build directory."""
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "src" / "b.py").write_text("print('b')\n")
    (root / "img.bin").write_bytes(BINARY)
    (root / ".gitignore").write_text("build/\n")
    (root / "build" / "out.o").write_bytes(b"\x7fELF object")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "user's own commit")
    return root


def _call(name: str, **arguments: object) -> tuple[str, str]:
    return (name, json.dumps(arguments))


TURNS = (
    # 1: write a new file, patch one.
    [_call("write_file", path="new.txt", content="created in turn 1\n"),
     _call("patch", path="a.txt", old_string="beta", new_string="BETA")],
    # 2: delete a file, overwrite the binary one, read (no write) first.
    [_call("read_file", path="a.txt"),
     _call("terminal", command="rm src/b.py && printf '\\000\\001\\002' > img.bin")],
    # 3: new directories and files, a change under the ignored directory.
    [_call("write_file", path="src/c/d.py", content="x = 1\n"),
     _call("terminal", command="mkdir -p e/f && echo g > e/f/g.txt && echo new > build/x.o")],
)


def _events(home: Path, sid: str) -> list[ev.Event]:
    path = session_path(home / "sessions", sid)
    return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]


def _agent(server, home: Path, tree: Path) -> Agent:
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
                 tools=builtin_tools(tree, toolsets=("files", "terminal")))


def _three_turns(server, agent: Agent, tree: Path) -> list[dict[str, str]]:
    """The three turns; the tree's manifest before each, then at the end."""
    seen = []
    for calls in TURNS:
        seen.append(manifest(tree))
        server.script(Reply.tool_calls(calls), Reply.text("done"))
        result = agent.run("change the tree")
        assert result.completed, result.error
        assert all(m.role != "tool" or '"error"' not in (m.content or "")
                   for m in result.messages), result.messages
    seen.append(manifest(tree))
    return seen


def test_rollback_to_each_turn_restores_the_tree_exactly(server, home, tree):
    user_git = manifest(tree, under_git=True)
    with _agent(server, home, tree) as agent:
        before = _three_turns(server, agent, tree)
        assert len({json.dumps(m) for m in before}) == 4  # every turn changed something
        for turn in (3, 1, 2):  # back, further back, then forward again
            done = agent.rollback(turn)
            assert done.error is None and done.turn == turn
            expected = dict(before[turn - 1])
            # Ignored files are never snapshotted: what turn 3 made there stays.
            expected["build/x.o"] = before[3]["build/x.o"]
            assert manifest(tree) == expected, turn
        sid = agent.session_id
    assert manifest(tree, under_git=True) == user_git  # the user's repository untouched
    assert _git(tree, "log", "--format=%s") == "user's own commit\n"
    assert (tree / "img.bin").read_bytes() == BINARY
    log = _events(home, sid)
    marks = [e for e in log if isinstance(e, ev.Checkpointed)]
    assert [(m.turn, m.error, m.tree) for m in marks] == [(t, None, str(tree)) for t in (1, 2, 3)]
    assert marks[0].files == 4  # a.txt, src/b.py, img.bin, .gitignore; nothing ignored
    restored = [e for e in log if isinstance(e, ev.TreeRestored)]
    assert [r.turn for r in restored] == [3, 1, 2] and all(r.saved for r in restored)
    # Replay serves checkpoints and rollbacks from the log: the tree is not touched again.
    now = manifest(tree)
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()
    assert manifest(tree) == now


def test_a_rollback_can_be_undone_from_the_commit_it_saved(server, home, tree):
    with _agent(server, home, tree) as agent:
        before = _three_turns(server, agent, tree)
        done = agent.rollback(1)
        assert done.saved is not None
        CheckpointStore(home / "checkpoints").restore(tree, done.saved)
    assert manifest(tree) == before[3]


def test_no_checkpoint_in_a_turn_that_only_reads_and_none_to_roll_back_to(server, home, tree):
    before = manifest(tree)
    with _agent(server, home, tree) as agent:
        server.script(Reply.tool_calls([_call("read_file", path="a.txt")]), Reply.text("ok"))
        agent.run("read")
        done = agent.rollback()
        sid = agent.session_id
    assert done.error == "no checkpoint to go back to" and done.saved is None
    assert not any(isinstance(e, ev.Checkpointed) for e in _events(home, sid))
    assert manifest(tree) == before
    assert not (home / "checkpoints").exists()


def test_a_failed_checkpoint_is_logged_and_the_turn_goes_on(server, home, tree):
    (home / "checkpoints").mkdir(parents=True)
    # The shadow repository's place is taken by a file: git cannot make it.
    CheckpointStore(home / "checkpoints").shadow(tree).write_text("in the way")
    with _agent(server, home, tree) as agent:
        server.script(Reply.tool_calls(TURNS[0]), Reply.text("done"))
        result = agent.run("change it")
        sid = agent.session_id
    assert result.completed and (tree / "new.txt").exists()
    (mark,) = [e for e in _events(home, sid) if isinstance(e, ev.Checkpointed)]
    assert mark.commit is None and mark.error and "git" in mark.error
    assert replay(home / "sessions", sid).identical


def test_large_files_are_skipped_with_a_note(server, home, tree):
    (tree / "huge.dat").write_bytes(b"\0" * 2048)
    store = CheckpointStore(home / "checkpoints", max_file_bytes=1024)
    snap = store.take(tree, "t")
    assert snap.skipped == ("huge.dat",) and snap.files == 4
    (tree / "huge.dat").write_bytes(b"\1" * 4096)
    (tree / "a.txt").write_text("changed")
    store.restore(tree, snap.commit)
    # Never snapshotted, so never removed or restored; the rest is.
    assert (tree / "huge.dat").read_bytes() == b"\1" * 4096
    assert (tree / "a.txt").read_text() == "alpha\nbeta\n"


def test_a_fork_can_restore_the_tree_as_it_was_at_the_fork_point(server, home, tree):
    with _agent(server, home, tree) as agent:
        before = _three_turns(server, agent, tree)
        sid = agent.session_id
    log = _events(home, sid)
    at = next(i for i, e in enumerate(log) if isinstance(e, ev.TurnStarted)
              and sum(isinstance(x, ev.TurnStarted) for x in log[:i]) == 1)  # before turn 2
    with _agent(server, home, tree) as agent:
        fork = fork_session(agent, sid, at=at, restore_tree=True)
        fork.agent.close()
    assert fork.restored is not None and fork.restored.turn == 2
    expected = dict(before[1], **{"build/x.o": before[3]["build/x.o"]})
    assert manifest(tree) == expected
    assert any(isinstance(e, ev.TreeRestored) for e in _events(home, fork.session_id))
    assert replay(home / "sessions", fork.session_id).identical

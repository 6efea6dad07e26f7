"""Which llama.cpp server child ``LocalServer.get`` hands out, with a fake child (no model)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from effects.local.llama_server import LocalServer

_pids = itertools.count(1000)


class FakeChild:
    """What ``LocalServer`` uses of a ``subprocess.Popen``."""

    def __init__(self) -> None:
        self.pid = next(_pids)
        self.code: int | None = None
        self.stdin = None

    def poll(self) -> int | None:
        return self.code

    def terminate(self) -> None:
        self.code = -15

    def kill(self) -> None:
        self.code = -9

    def wait(self, timeout: float | None = None) -> int | None:
        return self.code


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[LocalServer]:
    """Every server started, in order; the registry starts empty and is emptied after."""
    starts: list[LocalServer] = []

    def fake_start(self: LocalServer) -> None:
        self._proc = FakeChild()  # type: ignore[assignment]
        self.port = 40000 + len(starts)
        starts.append(self)

    monkeypatch.setattr(LocalServer, "_start", fake_start)
    monkeypatch.setattr(LocalServer, "_servers", {})
    monkeypatch.setattr(LocalServer, "_home_wants", {})
    yield starts
    LocalServer.stop_all()


def config(home: Path, table: str = "") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"[local]\n{table}\n", encoding="utf-8")
    return home


def test_two_homes_with_different_settings_each_keep_their_own_server(tmp_path: Path, started):
    a = config(tmp_path / "a", "n_ctx = 2048")
    b = config(tmp_path / "b", "n_ctx = 4096")
    first_a, first_b = LocalServer.get(a), LocalServer.get(b)
    for _ in range(5):  # calls of two agents, interleaved: each asks for its address
        assert LocalServer.get(a) is first_a and LocalServer.get(b) is first_b
    assert len(started) == 2 and first_a.alive() and first_b.alive()
    assert first_a.pid != first_b.pid and first_a.settings.n_ctx == 2048


def test_two_homes_with_the_same_settings_share_one_server(tmp_path: Path, started):
    a = config(tmp_path / "a", "n_ctx = 2048")
    b = config(tmp_path / "b", "n_ctx = 2048")
    c = tmp_path / "c"  # no config.toml: the defaults, like a fourth home with none
    d = tmp_path / "d"
    server = LocalServer.get(a)
    for _ in range(3):
        assert LocalServer.get(b) is server and LocalServer.get(a) is server
    assert LocalServer.get(c) is LocalServer.get(d) is not server
    assert len(started) == 2


def test_a_dead_server_is_replaced_and_the_others_are_left_alone(tmp_path: Path, started):
    a = config(tmp_path / "a", "n_ctx = 2048")
    b = config(tmp_path / "b", "n_ctx = 4096")
    first_a, first_b = LocalServer.get(a), LocalServer.get(b)
    first_a._proc.kill()  # type: ignore[union-attr]
    second_a = LocalServer.get(a)
    assert second_a is not first_a and second_a.alive()
    assert LocalServer.get(b) is first_b and first_b.alive() and len(started) == 3


def test_a_server_no_home_wants_any_more_is_stopped(tmp_path: Path, started):
    a = config(tmp_path / "a", "n_ctx = 2048")
    b = config(tmp_path / "b", "n_ctx = 2048")
    shared = LocalServer.get(a)
    assert LocalServer.get(b) is shared
    config(a, "n_ctx = 4096")  # a's settings change: b still uses the old server
    moved = LocalServer.get(a)
    assert moved is not shared and shared.alive() and moved.alive()
    config(b, "n_ctx = 4096")  # now nobody wants it: one child per configuration in use
    assert LocalServer.get(b) is moved
    assert not shared.alive() and len(started) == 2


def test_stop_all_stops_every_server(tmp_path: Path, started):
    servers = [LocalServer.get(config(tmp_path / str(n), f"n_ctx = {1024 * n}"))
               for n in (1, 2, 3)]
    assert all(s.alive() for s in servers)
    LocalServer.stop_all()
    assert not any(s.alive() for s in servers)
    assert LocalServer.get(tmp_path / "1") is not servers[0] and len(started) == 4

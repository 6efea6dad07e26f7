"""The terminal's OS sandbox, tried with real destructive commands against throwaway victims.

Every victim lives outside the working tree, in a directory made for the test (outside /tmp, so
that the sandbox's private /tmp does not hide it and the read-only root is what protects it).
Each test first checks that the terminal is confined, so that no destructive command can ever
run unconfined here.
"""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from effects.tools.sandbox import Sandbox, SandboxPolicy, probe
from effects.tools.terminal import Terminal
from effects.tools.workspace import Workspace

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def place() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mibyan-sandbox-", dir="/var/tmp"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def layout(place: Path) -> dict[str, Path]:
    tree, victim, home, user = (place / n for n in ("tree", "victim", "home", "user"))
    for folder in (tree, victim / "deep", home / "sessions", user):
        folder.mkdir(parents=True)
    (victim / "file.txt").write_text("precious\n")
    (victim / "deep" / "more.txt").write_text("also precious\n")
    (home / "config.toml").write_text(f'[model]\napi_key = "{SECRET}"\n')
    (home / "approvals.json").write_text('{"always": []}')
    (user / ".bashrc").write_text("# the user's own\n")
    return {"tree": tree, "victim": victim, "home": home, "user": user}


def _terminal(layout: dict[str, Path], **policy: object) -> Terminal:
    terminal = Terminal(Workspace(root=layout["tree"]))
    terminal.confine(SandboxPolicy(home=layout["home"], **policy))  # type: ignore[arg-type]
    # Never run a destructive command unconfined: the test fails instead.
    assert terminal.sandbox.confined, probe()
    return terminal


def _snapshot(*roots: Path) -> dict[str, tuple[bytes | None, int, int]]:
    seen: dict[str, tuple[bytes | None, int, int]] = {}
    for root in roots:
        for path in (root, *sorted(root.rglob("*"))):
            info = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            seen[str(path)] = (content, info.st_mode, info.st_mtime_ns)
    return seen


def _corpus(v: Path, h: Path) -> list[str]:
    """Destructive spellings aimed at the victim ``v``, mibyan's home ``h`` and ``~``."""
    encoded = base64.b64encode(f"rm -rf {v}".encode()).decode()
    return [
        "rm -rf ~", "rm -rf ~/", "rm -rf $HOME/.bashrc", f"rm -rf {v}", f"r\\m -rf {v}",
        f"x=rm; $x -rf {v}", f"$(echo rm) -rf {v}", f"R=-rf; rm $R {v}", f"rm -$(echo rf) {v}",
        f"echo {encoded} | base64 -d | sh", f"find {v} -delete", f"find {v} -exec rm -f {{}} +",
        f"python3 -c \"import shutil; shutil.rmtree('{v}')\"",
        f"perl -e 'use File::Path; rmtree(\"{v}\")'",
        f"echo pwned > {v}/file.txt", f"echo pwned >> {v}/file.txt", f"echo new > {v}/new.txt",
        f"truncate -s 0 {v}/file.txt", f"cp /dev/null {v}/file.txt", f"touch {v}/file.txt",
        f"chmod 000 {v}/file.txt", f"mv {v}/file.txt ./stolen.txt", f"ln -s /etc {v}/etc",
        f"mkdir {v}/new", f"sh -c 'rm -rf {v}'", f"bash -c 'cd {v} && rm -rf *'",
        f"rm -rf {h}", f"echo '{{\"always\": [\"unconfined_command\"]}}' > {h}/approvals.json",
        f"rm -rf {h}/sessions", f"cd {v.parent.parent} && rm -rf * 2>/dev/null; true",
    ]


def test_destructive_commands_change_nothing_outside_the_tree(layout, monkeypatch) -> None:
    # ``~`` is the throwaway user directory: were the sandbox to fail, nothing real is lost.
    monkeypatch.setenv("HOME", str(layout["user"]))
    terminal = _terminal(layout)
    outside = (layout["victim"], layout["home"], layout["user"])
    before = _snapshot(*outside)
    for command in _corpus(layout["victim"], layout["home"]):
        terminal.terminal(command, timeout=60)
        assert _snapshot(*outside) == before, command


def test_the_tree_is_writable_and_tmp_is_private(layout) -> None:
    terminal = _terminal(layout)
    marker = f"mibyan-sandbox-{os.getpid()}"
    result = terminal.terminal(f"echo kept > inside.txt && echo gone > /tmp/{marker} && "
                               f"cat /tmp/{marker}")
    assert result == {"exit_code": 0, "output": "gone\n"}
    assert (layout["tree"] / "inside.txt").read_text() == "kept\n"
    assert not (Path("/tmp") / marker).exists()


def test_mibyan_s_home_is_unreadable_from_inside(layout) -> None:
    terminal = _terminal(layout)
    home = layout["home"]
    assert terminal.terminal(f"ls -A {home}") == {"exit_code": 0, "output": ""}
    result = terminal.terminal(f"cat {home}/config.toml; grep -r sk- {home}")
    assert SECRET not in result["output"] and result["exit_code"] != 0


def test_read_only_mode_keeps_the_tree_as_it_is(layout) -> None:
    (layout["tree"] / "code.py").write_text("print(1)\n")
    terminal = _terminal(layout, mode="read-only")
    before = _snapshot(layout["tree"])
    result = terminal.terminal("cat code.py; echo x > code.py; rm -f code.py; touch new")
    assert result["output"].startswith("print(1)\n") and result["exit_code"] != 0
    assert _snapshot(layout["tree"]) == before


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", hits
    httpd.shutdown()
    httpd.server_close()


def test_the_network_is_off_unless_the_policy_allows_it(layout, server) -> None:
    url, hits = server
    command = f"curl -sS --max-time 5 {url}x"
    off = _terminal(layout).terminal(command)
    assert off["exit_code"] != 0 and "reached" not in off["output"] and hits == []
    python = _terminal(layout).terminal(
        f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}y', timeout=5)\"")
    assert python["exit_code"] != 0 and hits == []
    on = _terminal(layout, network=True).terminal(command)
    assert on == {"exit_code": 0, "output": "reached\n"} and hits == ["/x"]


def test_a_tree_inside_the_home_stays_visible_and_a_home_inside_the_tree_hidden(
        place: Path) -> None:
    home = place / "home"
    tree = home / "work"
    tree.mkdir(parents=True)
    (home / "config.toml").write_text(SECRET)
    sandbox = Sandbox(SandboxPolicy(home=home))
    assert sandbox.confined
    terminal = Terminal(Workspace(root=tree), sandbox=sandbox)
    result = terminal.terminal(f"echo ok > here.txt; cat {home}/config.toml")
    assert (tree / "here.txt").read_text() == "ok\n" and SECRET not in result["output"]
    inner_home = place / "tree" / ".mibyan"
    inner_home.mkdir(parents=True)
    (inner_home / "config.toml").write_text(SECRET)
    terminal = Terminal(Workspace(root=place / "tree"),
                        sandbox=Sandbox(SandboxPolicy(home=inner_home)))
    result = terminal.terminal("echo ok > here.txt; cat .mibyan/config.toml")
    assert (place / "tree" / "here.txt").exists() and SECRET not in result["output"]


def test_full_access_runs_unconfined(layout) -> None:
    terminal = Terminal(Workspace(root=layout["tree"]))
    assert terminal.confine(SandboxPolicy(mode="full-access")).started is False
    assert not terminal.sandbox.confined
    # Harmless, and it shows the difference: the real /tmp is visible.
    marker = Path(tempfile.mkdtemp(prefix="mibyan-full-"))
    try:
        assert terminal.terminal(f"ls -d {marker}")["exit_code"] == 0
    finally:
        marker.rmdir()

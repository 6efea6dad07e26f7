"""Ray as users run it: a cluster started with ``ray start`` and Ray's token auth
(``RAY_AUTH_MODE=token``), joined by ``mibyan eval --backend ray --ray-address``; a driver
without the token is refused with the address named, not a traceback. The forks come back to
the evaluation's home and replay there."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.shell.replay import replay
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.eval_sessions import record_sessions

ROOT = Path(__file__).resolve().parent.parent.parent
RAY = Path(sys.executable).parent / "ray"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return {**env, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "OPENAI_API_KEY": "sk-ray-eval", **extra}


def _start_head(port: int, token: str, temp: Path) -> subprocess.Popen:
    """``ray start --head --block``: in the foreground, so that stopping this one process
    stops the cluster it started (no ``ray stop``: that stops every Ray on the machine). On a
    loaded machine the head can fail to come up; its output says when it is up."""
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
        env=_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token), cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    assert head.stdout is not None
    said: list[str] = []
    for line in head.stdout:  # ends when the process does
        if "Ray runtime started" in line:
            return head
        said.append(line)
    head.wait()
    raise RuntimeError(f"ray start exited with {head.returncode}: {''.join(said[-5:])}")


def _stop(head: subprocess.Popen) -> None:
    os.killpg(head.pid, signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, str]]:
    token = secrets.token_hex(32)
    for attempt in range(5):
        port = _free_port()
        try:
            # Ray's socket paths must fit AF_UNIX's 107 bytes: a short folder, not pytest's.
            head = _start_head(port, token, Path(tempfile.mkdtemp(prefix="ray", dir="/tmp")))
            break
        except RuntimeError:
            if attempt == 4:
                raise
    # The rest of --block's output is not read: drained, so that the head never blocks on it.
    drain = threading.Thread(target=lambda: head.stdout and head.stdout.read(), daemon=True)
    drain.start()
    try:
        yield f"127.0.0.1:{port}", token
    finally:
        _stop(head)


def _eval(home: Path, out: Path, address: str, configs: Path,
          **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", "--home", str(home), "eval", "--out",
         str(out), "--configs", str(configs), "--backend", "ray", "--ray-address", address,
         "--workers", "2", "--point", "turns", "--scorer", "contains:answer", "--quiet"],
        cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=900, check=False)


def test_eval_joins_a_secured_cluster_with_its_token(cluster, tmp_path):
    address, token = cluster
    home = tmp_path / "home"
    record_sessions(home, 4)
    with FakeOpenAIServer(default=Reply.text("answer 1")) as same, \
            FakeOpenAIServer(default=Reply.text("other")) as other:
        configs = tmp_path / "configs.toml"
        configs.write_text(f'[[config]]\nname = "same"\nbase_url = "{same.base_url}"\n'
                           f'toolsets = []\n[[config]]\nname = "other"\n'
                           f'base_url = "{other.base_url}"\ntoolsets = []\n')
        refused = _eval(home, tmp_path / "refused", address, configs)
        joined = _eval(home, tmp_path / "out", address, configs, RAY_AUTH_MODE="token",
                       RAY_AUTH_TOKEN=token)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"cannot join the Ray cluster at {address}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert joined.returncode == 0, joined.stderr[-3000:]
    assert "same: 4 forks, 0 failed" in joined.stdout
    assert "other: 4 forks, 0 failed" in joined.stdout
    root = tmp_path / "out" / "sessions"
    forks = [p.stem for p in root.glob("*.jsonl") if not p.stem.startswith("rec")]
    assert len(forks) == 8 and all(replay(root, fork).identical for fork in forks)

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.ray_cluster import join_ray
from tests.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv
        srv.assert_done()


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


@pytest.fixture(scope="session")
def local_ray() -> Iterator[str]:
    """A local Ray of 2 CPUs, started the way a command without ``--ray-address`` starts one,
    shared by the Ray tests (a start costs tens of seconds on a loaded machine): joined in
    process by the whole-home tests, by its address from the command lines. Its address.
    Under xdist each worker has its own session, so tests/conftest.py puts the Ray lane in
    one ``xdist_group`` and .ci/run runs the slow lanes with ``--dist loadgroup``."""
    with pytest.MonkeyPatch.context() as patch:
        # The workers the local Ray starts inherit this environment: they import mibyan from
        # here.
        patch.setenv("PYTHONPATH", str(ROOT))
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray = join_ray(None, 2)
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()

from __future__ import annotations

import pytest

from tests.fake_openai import FakeOpenAIServer


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv
        srv.assert_done()


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"

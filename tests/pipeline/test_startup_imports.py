"""A session's first answer does not wait for libraries it does not use: the tool-schema
builders (pydantic, docstring_parser) load when a tool is made, structlog when a line is
logged, and the providers' SDKs and DuckDB not at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAZY = ("anthropic", "docstring_parser", "duckdb", "openai", "pydantic", "structlog")

FIRST_ANSWER = """
import sys
from tests.fake_openai import FakeOpenAIServer, Reply
from pipeline import Agent
with FakeOpenAIServer(default=Reply.text("hi")) as srv, Agent(
        model="m", base_url=srv.base_url, api_key="sk-x", home=sys.argv[1],
        durability="flush") as agent:
    assert agent.run_conversation("hello")["final_response"] == "hi"
print(sorted(m for m in {lazy!r} if m in sys.modules))
"""


def _loaded(code: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]


def test_a_first_answer_without_tools_loads_none_of_the_lazy_libraries(tmp_path: Path) -> None:
    assert _loaded(FIRST_ANSWER.format(lazy=LAZY), str(tmp_path)) == "[]"


def test_making_a_tool_loads_its_schema_builders() -> None:
    code = ("import sys\nfrom pipeline import tool\n"
            "@tool\ndef f(x: int) -> str:\n    '''Echo.'''\n    return str(x)\n"
            "print(sorted(m for m in ('docstring_parser', 'pydantic') if m in sys.modules))")
    assert _loaded(code) == "['docstring_parser', 'pydantic']"


def test_a_logged_line_loads_structlog() -> None:
    code = ("import sys\nfrom effects.logs import get_logger\nlog = get_logger('t')\n"
            "assert 'structlog' not in sys.modules\nlog.warning('x', a=1)\n"
            "print('structlog' in sys.modules)")
    assert _loaded(code) == "True"


def test_the_batch_preload_warms_the_http_shell_not_the_sdks() -> None:
    """The fork server's preload pays what a worker's sessions use (the shell over httpx2); the
    SDKs are only in the dev group, and mibyan never calls them."""
    code = ("import sys, pipeline.batch.warm\n"
            "print(sorted(m for m in ('anthropic', 'httpcore2', 'httpx2', 'openai',"
            " 'effects.providers.openai_chat') if m in sys.modules))")
    assert _loaded(code) == "['effects.providers.openai_chat', 'httpcore2', 'httpx2']"

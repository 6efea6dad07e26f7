"""Structured output's cost: a turn with ``output_type`` against one without, both against the
fake OpenAI server on loopback (stream off, one model call each), and the answer check alone
(pydantic's ``TypeAdapter`` for a model, ``jsonschema`` for a schema dict). Not part of the
test suite; it asserts nothing about speed.

    uv run python bench/structured.py            # 200 turns of each kind
    uv run python bench/structured.py --turns 50

Reported: the median milliseconds of a turn (free text, a pydantic model, a schema dict), the
first turn with an output type (which imports pydantic and jsonschema), and microseconds per
check of an answer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

ANSWER = '{"name": "Paris", "population": 2100000, "landmarks": ["Louvre", "Eiffel Tower"]}'
SCHEMA = {"type": "object", "required": ["name", "population", "landmarks"], "properties": {
    "name": {"type": "string"}, "population": {"type": "integer", "minimum": 0},
    "landmarks": {"type": "array", "items": {"type": "string"}}}}


def _turns(agent, output_type, turns: int) -> list[float]:
    times = []
    for _ in range(turns):
        started = time.perf_counter()
        result = agent.run("Largest city of France?", output_type=output_type)
        times.append(time.perf_counter() - started)
        assert result.completed, result.error
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    from pipeline import Agent
    with FakeOpenAIServer(default=Reply.text(ANSWER)) as server, \
            tempfile.TemporaryDirectory() as home:
        agent = Agent(model="m", base_url=server.base_url, api_key="sk-bench",
                      home=Path(home), durability="flush", stream=False, tools=[],
                      context_length=10**6)
        _turns(agent, None, 5)  # warm-up: imports, connection
        first = time.perf_counter()

        import pydantic

        class City(pydantic.BaseModel):
            name: str
            population: int
            landmarks: list[str]
        _turns(agent, City, 1)
        first_ms = (time.perf_counter() - first) * 1000
        # Interleaved, so that the session's growth weighs on each kind alike.
        free, typed, schema = [], [], []
        for _ in range(args.turns // 10):
            free += _turns(agent, None, 10)
            typed += _turns(agent, City, 10)
            schema += _turns(agent, SCHEMA, 10)
        agent.close()
    from pipeline.output_types import output_type
    checks = {"pydantic model": output_type(City), "schema dict": output_type(SCHEMA)}
    print(f"turn, free text        {statistics.median(free) * 1000:7.2f} ms (median)")
    print(f"turn, pydantic model   {statistics.median(typed) * 1000:7.2f} ms")
    print(f"turn, schema dict      {statistics.median(schema) * 1000:7.2f} ms")
    print(f"first typed turn       {first_ms:7.2f} ms (imports pydantic, jsonschema)")
    for name, wanted in checks.items():
        check = wanted.check
        assert check(ANSWER).valid
        runs = 2000
        started = time.perf_counter()
        for _ in range(runs):
            check(ANSWER)
        print(f"check, {name:15} {(time.perf_counter() - started) / runs * 1e6:7.1f} us")


if __name__ == "__main__":
    main()

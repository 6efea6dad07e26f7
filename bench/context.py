"""Context management costs: the token estimate per call at 200 and 20,000 messages of
history, and one compression of a 500-message conversation (planning, the summariser's input,
the new history; no auxiliary call). Prints a report; asserts nothing about speed.

    python bench/context.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stages import fold
from stages.context.compression import decide_compressed, decide_compression  # noqa: E402
from stages.context.preflight import decide_preflight  # noqa: E402
from stages.log import events as ev
from stages.log.context_tokens import context_tokens  # noqa: E402
from stages.log.messages import Message, ToolCall  # noqa: E402
from stages.log.state import State  # noqa: E402

SETTINGS = ev.SessionSettings(model="bench-model", provider="p", context_length=64_000)


def conversation(messages: int) -> list[Message]:
    """User and assistant turns of about 400 chars, every fourth turn a tool round."""
    out: list[Message] = []
    n = 0
    while len(out) < messages:
        out.append(Message(role="user", content=f"question {n} " + "q" * 390))
        if n % 4 == 3:
            call = ToolCall(id=f"c{n}", name="read", arguments='{"path":"a.py"}')
            out += [Message(role="assistant", content=None, tool_calls=(call,)),
                    Message(role="tool", content="x" * 1200, tool_call_id=call.id, name="read")]
        out.append(Message(role="assistant", content=f"answer {n} " + "a" * 390))
        n += 1
    return out[:messages] if out[messages - 1].role != "tool" else out[:messages + 1]


def session(messages: int) -> State:
    history = conversation(messages)
    if history[-1].role == "user":
        history.append(Message(role="assistant", content="ok"))
    return fold([ev.SessionStarted(session_id="b", started_at="t", settings=SETTINGS),
                 ev.HistoryLoaded(messages=tuple(history)),
                 ev.TurnStarted(turn_id="t", task_id="t", started_at="t",
                                user_message="next question")])


def timed(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def estimate_report() -> None:
    for size in (200, 20_000):
        state = session(size)
        per_estimate = timed(lambda s=state: context_tokens(s), 2000)
        per_preflight = timed(lambda s=state: decide_preflight(s, config=SETTINGS), 2000)
        print(f"estimate at {size:>6} messages: {per_estimate * 1e6:7.2f} us/call "
              f"(preflight stage {per_preflight * 1e6:7.2f} us/call)")


def compression_report() -> None:
    state = session(500)
    state = fold([ev.ContextPressure(estimated_tokens=0, threshold_tokens=0),
                  ev.ClockRead(epoch=0.0)], state)

    def once() -> State:
        decision = decide_compression(state, config=SETTINGS)
        after = fold(decision.events, state)
        # Without the auxiliary call: as when the summary failed (the middle is dropped).
        after = fold([ev.SummaryFailed(error_type="bench", message="no aux call")], after)
        return fold(decide_compressed(after, config=SETTINGS).events, after)

    seconds = timed(once, 20)
    done = once()
    print(f"compression of 500 messages (plan, summariser input, new history; no aux call): "
          f"{seconds * 1e3:.2f} ms -> {len(done.messages)} messages, "
          f"{state.history_chars} -> {done.history_chars} chars")


if __name__ == "__main__":
    estimate_report()
    compression_report()

"""The message alternation rules of the seeds, as a checker returning every violation.

* after the system message: user, assistant, user, assistant, ...
* an assistant with tool calls is followed by exactly one result per call (tool messages),
  and nothing else comes between a call and its result;
* never two user or two assistant messages in a row; only tool messages repeat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from stages.log.messages import Message


def violations(messages: Sequence[Message], *, open_tail_ok: bool = False) -> list[str]:
    """Every rule broken by ``messages``; ``open_tail_ok`` allows the last assistant's calls to
    still await results (the state between a model reply and its tool runs)."""
    problems: list[str] = []
    open_calls: Counter[str] = Counter()
    previous: Message | None = None
    for index, message in enumerate(messages):
        where = f"message {index} ({message.role})"
        if message.role == "system":
            if index != 0:
                problems.append(f"{where}: a system message may only come first")
        elif message.role == "tool":
            if open_calls[message.tool_call_id or ""] <= 0:
                problems.append(f"{where}: result for a call that is not open")
            else:
                open_calls[message.tool_call_id or ""] -= 1
        else:
            if +open_calls:
                problems.append(f"{where}: calls {sorted(+open_calls)} have no result yet")
                open_calls.clear()
            if previous is None or previous.role == "system":
                if message.role != "user":
                    problems.append(f"{where}: the conversation must open with a user message")
            elif previous.role == message.role:
                problems.append(f"{where}: two {message.role} messages in a row")
            if message.role == "assistant":
                open_calls = Counter(call.id for call in message.tool_calls)
        previous = message
    if +open_calls and not open_tail_ok:
        problems.append(f"end: calls {sorted(+open_calls)} have no result")
    return problems

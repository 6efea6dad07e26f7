"""The handoff summary: the prompt asking for it (fresh or as an update of the previous one),
the middle of the conversation serialised for it, and how its text enters the history.

An update never loses a finished item: every line of the previous summary's ``## Done``
section is kept in the new one (``merge_done``), whatever the summariser wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stages.context.compression_plan import DROPPED_TAG, SUMMARY_PREFIX, prune_line
from stages.log.content_parts import described
from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.log.messages import Message

SUMMARY_END = "[End of summary]"
MESSAGE_CHARS, MESSAGE_HEAD, MESSAGE_TAIL = 6_000, 4_000, 1_500
SECTIONS = ("## Goal", "## Done", "## In Progress", "## Facts", "## Open Questions")

_INSTRUCTIONS = (
    "You write the handoff summary of a conversation between a user and an AI assistant, so "
    "that the assistant can continue the work without the original messages. Write in the "
    "user's language. Never include secrets (keys, passwords, tokens). Use exactly these "
    "sections: " + ", ".join(SECTIONS) + ". Under Done list finished actions with their "
    "outcome (files, commands, results); under In Progress what is under way; under Facts the "
    "names, paths, numbers, decisions and preferences a later turn needs; under Open Questions "
    "what is still unanswered.")
_UPDATE = (
    "Update the PREVIOUS SUMMARY with the NEW TURNS: keep every Done item, move items that "
    "were finished from In Progress to Done, add new facts, keep open questions that are still "
    "open and drop those now answered.")


def summary_text(summary: str) -> str:
    """The summary as it stands in the history."""
    return f"{SUMMARY_PREFIX}\n{summary}\n{SUMMARY_END}"


def dropped_marker(count: int, previous: str | None) -> str:
    """What replaces the middle when no summary could be written."""
    marker = f"[{count} {DROPPED_TAG}; no summary of them could be written.]"
    return marker if previous is None else f"{marker}\n{summary_text(previous)}"


_MARKER = re.compile(r"\[\d+ " + re.escape(DROPPED_TAG) + r"; no summary of them could be "
                     r"written\.\]\n?")


def without_compaction(text: str) -> str:
    """``text`` without the summary or the dropped-middle marker a compression joined to it
    (and without the blank line that joined them)."""
    start = text.find(SUMMARY_PREFIX)
    if start >= 0:
        end = text.find(SUMMARY_END, start)
        text = text[:start] + (text[end + len(SUMMARY_END):] if end >= 0 else "")
    text = _MARKER.sub("", text)
    if text.startswith("\n\n"):
        return text[2:]
    return text[:-2] if text.endswith("\n\n") else text


def _strip_summary(text: str) -> str:
    start = text.find(SUMMARY_PREFIX)
    if start < 0:
        return text
    end = text.find(SUMMARY_END, start)
    return text[:start] + (text[end + len(SUMMARY_END):] if end >= 0 else "")


def _cut(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    return f"{text[:MESSAGE_HEAD]}\n...[truncated]...\n{text[-MESSAGE_TAIL:]}"


def serialise(messages: Sequence[Message], pruned: frozenset[int] = frozenset()) -> list[str]:
    """One entry per message, each cut at 6,000 chars; tool results in ``pruned`` (indices)
    as one line; a previous summary's text left out (it is passed on its own)."""
    lines = []
    for index, m in enumerate(messages):
        if m.role == "tool":
            body = prune_line(m) if index in pruned else m.text
            lines.append(f"[TOOL RESULT {m.name or ''}]: {_cut(body)}")
            continue
        # An image is named in the text the summary is written from: never dropped unsaid.
        body = _strip_summary(described(m.content)).strip()
        if DROPPED_TAG in body:
            continue
        if m.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments[:1_500]})" for c in m.tool_calls)
            body = f"{body}\n[Tool calls: {calls}]".strip()
        if body:
            lines.append(f"[{m.role.upper()}]: {_cut(body)}")
    return lines


def fit(lines: list[str], max_chars: int) -> list[str]:
    """The newest lines that fit ``max_chars`` (the summariser's own window), with a note of
    how many older ones were left out: the summary call can never overflow."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    kept.reverse()
    left = len(lines) - len(kept)
    return kept if left == 0 else [f"[{left} older messages left out]", *kept]


def prompt(lines: Sequence[str], previous: str | None, budget_tokens: int) -> str:
    turns = "\n\n".join(lines)
    target = f"Target about {budget_tokens} tokens."
    if previous is None:
        return f"{_INSTRUCTIONS} {target}\n\nCONVERSATION:\n{turns}"
    return (f"{_INSTRUCTIONS} {_UPDATE} {target}\n\nPREVIOUS SUMMARY:\n{previous}\n\n"
            f"NEW TURNS TO INCORPORATE:\n{turns}")


def prompt_overhead_chars(previous: str | None) -> int:
    return len(_INSTRUCTIONS) + len(_UPDATE) + len(previous or "") + 200


def _section(text: str, title: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("## "):
            inside = line.strip().lower() == title.lower()
            continue
        if inside and line.strip():
            lines.append(line.strip())
    return lines


def _item(line: str) -> str:
    return line.lstrip("-*0123456789. ").strip().lower()


def merge_done(previous: str | None, new: str) -> str:
    """``new`` with every Done item of ``previous`` it lost put back under its Done section."""
    if previous is None:
        return new.strip()
    kept = {_item(line) for line in _section(new, "## Done")}
    lost = [line for line in _section(previous, "## Done") if _item(line) not in kept]
    if not lost:
        return new.strip()
    lines = new.strip().splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip().lower() == "## done"), None)
    if at is None:
        return "\n".join([*lines, "## Done", *lost])
    return "\n".join([*lines[:at + 1], *lost, *lines[at + 1:]])


_FOLDED = re.compile(r"^- \((\d+) earlier finished items folded")


def bounded(summary: str, max_chars: int) -> str:
    """Rules 7: ``summary`` within ``max_chars`` when its Done section can make it so.

    ``merge_done`` puts back every Done item a summariser lost, so in a turn compressed a
    hundred times the summary would outgrow a small window; past the bound the oldest Done
    items fold into one counting line (the newest stay whole)."""
    if len(summary) <= max_chars:
        return summary
    lines = summary.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip().lower() == "## done"), None)
    if at is None:
        return summary
    end = next((i for i in range(at + 1, len(lines)) if lines[i].strip().startswith("## ")),
               len(lines))
    items = [line for line in lines[at + 1:end] if line.strip()]
    folded = 0
    if items and (match := _FOLDED.match(items[0].strip())):
        folded, items = int(match.group(1)), items[1:]
    rest = sum(len(line) + 1 for line in (*lines[:at + 1], *lines[end:]))
    size = rest + sum(len(item) + 1 for item in items)
    while len(items) > 1 and size + len(_fold_line(folded)) + 1 > max_chars:
        size -= len(items[0]) + 1
        items, folded = items[1:], folded + 1
    return "\n".join([*lines[:at + 1], _fold_line(folded), *items, *lines[end:]])


def _fold_line(count: int) -> str:
    return f"- ({count} earlier finished items folded to keep the summary short)"


def text_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN

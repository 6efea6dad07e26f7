"""Recall over the user's own past sessions: full-text search of the event logs under
``<home>/sessions``, as a memory provider (it recalls for every turn) and as the
``session_search`` tool.

    agent = Agent(..., memory_provider=SessionSearch(home))

Each exchange (a user message and the answer that finished its turn) is a document; a query's
words are matched case-insensitively, documents ranked by how many distinct query words they
hold (rarer words weigh more), then by recency. The current session is left out of the
recall: it is already in the conversation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from pipeline.memory_providers import MemoryProvider
from pipeline.tools import Tool

__all__ = ["SessionSearch"]

MAX_SESSIONS = 300
MAX_HITS = 3
SNIPPET_CHARS = 300
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP = frozenset(("the", "and", "for", "with", "that", "this", "you", "are", "was", "have",
                   "what", "from", "your", "can", "how", "not", "but", "about", "please", "into",
                   "when", "then", "there", "their"))


@attrs.frozen
class Exchange:
    session_id: str
    started_at: str
    user: str
    answer: str

    @property
    def words(self) -> frozenset[str]:
        return frozenset(w.lower() for w in _WORD.findall(f"{self.user} {self.answer}"))


def _terms(text: str) -> list[str]:
    return [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(text)) if w not in _STOP]


def _exchanges(path: Path) -> Iterator[Exchange]:
    """The finished exchanges of one log, read as plain JSON lines (a torn tail is skipped)."""
    user, started = None, ""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            kind, payload = record.get("kind"), record.get("payload") or {}
            if kind == "turn_started":
                user, started = payload.get("user_message"), payload.get("started_at", "")
            elif kind == "turn_finished" and user and payload.get("final_response"):
                yield Exchange(session_id=record.get("session_id", path.stem),
                               started_at=started, user=user, answer=payload["final_response"])
                user = None


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[:SNIPPET_CHARS - 1] + "…"


class SessionSearch(MemoryProvider):
    name = "session_search"

    def __init__(self, home: str | Path, *, exclude_current: bool = True) -> None:
        self.root = Path(home).expanduser() / "sessions"
        self.exclude_current = exclude_current

    def search(self, query: str, *, session_id: str | None = None,
               limit: int = MAX_HITS) -> list[Exchange]:
        terms = _terms(query)
        if not terms or not self.root.is_dir():
            return []
        logs = sorted(self.root.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)[-MAX_SESSIONS:]
        docs = [x for path in logs if not (self.exclude_current and path.stem == session_id)
                for x in _exchanges(path)]
        frequency = {t: sum(t in d.words for d in docs) for t in terms}
        scored = []
        for order, doc in enumerate(docs):
            score = sum(math.log(1 + len(docs) / frequency[t]) for t in terms if t in doc.words)
            if score > 0:
                scored.append((score, order, doc))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [doc for _, _, doc in scored[:limit]]

    def render(self, hits: list[Exchange]) -> str:
        return "\n".join(f"- [{h.started_at[:10]} session {h.session_id}] asked: "
                         f"{_snippet(h.user)} / answered: {_snippet(h.answer)}" for h in hits)

    def prefetch(self, query: str, *, session_id: str) -> str:
        hits = self.search(query, session_id=session_id)
        return ("From earlier sessions:\n" + self.render(hits)) if hits else ""

    def tools(self) -> tuple[Tool, ...]:
        def session_search(query: str, limit: int = 5) -> str:
            """Search the user's earlier sessions for exchanges about a topic.

            Args:
                query: Words to look for.
                limit: The most exchanges to return.
            """
            hits = self.search(query, limit=max(1, min(limit, 20)))
            return self.render(hits) or "no earlier session mentions that"

        return (Tool.from_function(session_search, read_only=True),)

"""``<think>`` / ``<thinking>`` blocks in the content of local and open models, split from the
visible text, whole or as a stream arrives.

Open models (DeepSeek-R1, Qwen3, QwQ and their llama.cpp, vLLM or Ollama servers when these do
not parse it themselves) write their reasoning into the content between tags. The text inside
is reasoning, never the answer; a block left open (the output limit cut it) is reasoning to the
end. Whitespace right after a block is dropped, so the answer starts with its first character.
(A template that opens the block in the prompt is the server's to parse: llama.cpp's
``reasoning_format`` sends that reasoning as ``reasoning_content``.) The stream splitter and
the whole-text split agree exactly: the visible deltas of a stream join to the content.
"""

from __future__ import annotations

__all__ = ["ThinkSplitter", "split_think"]

OPENERS = ("<think>", "<thinking>")
CLOSERS = ("</think>", "</thinking>")


# Every tag starts with "<": text without one holds no tag and no start of one (the common
# case, checked once per streamed piece instead of trying every tail against every tag).
_OPEN = "<"


def _find(buffer: str, tags: tuple[str, ...]) -> tuple[int, str] | None:
    if _OPEN not in buffer:
        return None
    hits = [(buffer.find(tag), tag) for tag in tags if tag in buffer]
    return min(hits) if hits else None


def _held_back(buffer: str, tags: tuple[str, ...]) -> int:
    """How many characters at the end of ``buffer`` could start one of ``tags`` (the longest
    such tail: only a tail that begins with "<" can)."""
    start = max(len(buffer) - (max(map(len, tags)) - 1), 0)
    at = buffer.find(_OPEN, start)
    while at != -1:
        tail = buffer[at:]
        if any(tag.startswith(tail) for tag in tags):
            return len(tail)
        at = buffer.find(_OPEN, at + 1)
    return 0


class ThinkSplitter:
    """Feeds content pieces; returns ``(kind, text)`` pieces, ``kind`` ``text`` or
    ``reasoning``. ``finish`` flushes what was held back (a possible partial tag)."""

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self._trim = False  # drop whitespace until the first visible character

    def feed(self, piece: str) -> list[tuple[str, str]]:
        self._buffer += piece
        out: list[tuple[str, str]] = []
        if _OPEN not in self._buffer:  # no tag and no start of one: all of it goes out now
            ready, self._buffer = self._buffer, ""
            self._emit(out, "reasoning" if self._inside else "text", ready)
            return out
        while self._buffer:
            tags = CLOSERS if self._inside else OPENERS
            hit = _find(self._buffer, tags)
            if hit is None:
                cut = len(self._buffer) - _held_back(self._buffer, tags)
                ready, self._buffer = self._buffer[:cut], self._buffer[cut:]
                self._emit(out, "reasoning" if self._inside else "text", ready)
                break
            self._emit(out, "reasoning" if self._inside else "text", self._buffer[:hit[0]])
            self._buffer = self._buffer[hit[0] + len(hit[1]):]
            self._inside = not self._inside
            self._trim = not self._inside
        return out

    def finish(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._emit(out, "reasoning" if self._inside else "text", self._buffer)
        self._buffer = ""
        return out

    def _emit(self, out: list[tuple[str, str]], kind: str, text: str) -> None:
        if kind == "text" and self._trim:
            text = text.lstrip()
            self._trim = not text
        if text:
            out.append((kind, text))


def split_think(content: str) -> tuple[str, str | None]:
    """``content`` as (visible text, reasoning or None)."""
    splitter = ThinkSplitter()
    pieces = splitter.feed(content) + splitter.finish()
    text = "".join(t for kind, t in pieces if kind == "text")
    thought = "".join(t for kind, t in pieces if kind == "reasoning").strip()
    return text, thought or None

"""Streamed markdown cut into blocks that are complete: a paragraph (ended by a blank line), a
fenced code block (ended by its closing fence), a heading line. The chat renders each complete
block as markdown (code highlighted) while the rest is still arriving."""

from __future__ import annotations

__all__ = ["BlockSplitter"]

FENCES = ("```", "~~~")


class BlockSplitter:
    """Feed text as it streams; get back the blocks completed by it."""

    def __init__(self) -> None:
        self._done_lines: list[str] = []  # complete lines of the block being built
        self._partial = ""  # the line still arriving
        self._fence: str | None = None  # the open fence, inside a code block

    @property
    def pending(self) -> str:
        """What has arrived of the block not complete yet."""
        return "".join(self._done_lines) + self._partial

    def feed(self, text: str) -> list[str]:
        blocks: list[str] = []
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            block = self._line(line + "\n")
            if block is not None:
                blocks.append(block)
        return blocks

    def flush(self) -> str:
        """The rest, complete or not (the reply ended); the splitter starts afresh."""
        rest = self.pending
        self._done_lines, self._partial, self._fence = [], "", None
        return rest

    def _line(self, line: str) -> str | None:
        stripped = line.strip()
        if self._fence is not None:
            self._done_lines.append(line)
            # CommonMark: the same character, at least as many, nothing else on the line (a
            # shorter run is code: a markdown example showing a fence).
            char = self._fence[0]
            if stripped.startswith(self._fence) and not stripped.strip(char):
                self._fence = None
                return self._take()
            return None
        fence = next((f for f in FENCES if stripped.startswith(f)), None)
        if fence is not None:
            # Text before a code block is a block of its own.
            before = self._take() if "".join(self._done_lines).strip() else None
            run = len(stripped) - len(stripped.lstrip(fence[0]))
            self._done_lines, self._fence = [line], fence[0] * run
            return before
        if not stripped:
            return self._take()
        self._done_lines.append(line)
        return self._take() if stripped.startswith("#") else None

    def _take(self) -> str | None:
        block = "".join(self._done_lines).strip("\n")
        self._done_lines = []
        return block or None

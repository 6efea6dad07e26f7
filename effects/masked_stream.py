"""A streamed reply shown once, already masked.

The model's text arrives in pieces; the log keeps the whole reply redacted. Showing the pieces
as they come would show a secret before redaction could see it whole, and the masked reply
after it. So the stream holds back what could still be part of a secret: the last word (a
token is one word; its end is not yet known) and an unfinished private key block. What it
shows is the redaction of everything received up to that point, less what it showed already;
at the reply's end it shows the rest. Redaction runs on the whole reply so far, as it will on
the logged reply, so what is shown is what the log keeps.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from effects.protocols import DeltaSink
from stages.log.redact import redact

_KEY_START = "-----BEGIN"
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*-----")


class MaskedStream:
    """A :data:`DeltaSink` in front of ``sink``: ``known`` secrets (which may grow) and the
    shapes of secrets are masked before any text reaches it. Call :meth:`flush` at the end
    of each reply."""

    def __init__(self, sink: DeltaSink, known: Iterable[str] = ()) -> None:
        self._sink = sink
        self._known = known
        self._lock = threading.Lock()
        self._raw = ""
        self._shown = ""

    def __call__(self, delta: str) -> None:
        with self._lock:
            self._raw += delta
            cut = _safe_end(self._raw)
            if cut > 0 and not self._raw[:cut].isspace():
                self._show(redact(self._raw[:cut], self._known))

    def flush(self) -> None:
        """The reply ended: show the rest of it, and start afresh for the next one."""
        with self._lock:
            if self._raw:
                masked = redact(self._raw, self._known)
                if masked.startswith(self._shown):
                    self._show(masked)
                else:  # text that came later changed what was shown: the rest on its own line
                    self._sink("\n" + masked)
            self._raw = self._shown = ""

    def _show(self, masked: str) -> None:
        # Redaction of a longer text only masks what came later: what was shown stays a prefix
        # (else it waits for flush, which shows the whole reply).
        if masked.startswith(self._shown) and len(masked) > len(self._shown):
            self._sink(masked[len(self._shown):])
            self._shown = masked


def _safe_end(raw: str) -> int:
    """Where the text that can no longer change ends: before the last word (it may go on),
    and before a private key block that has not ended."""
    end = max(raw.rfind(" "), raw.rfind("\n"), raw.rfind("\t")) + 1
    key = raw.rfind(_KEY_START, 0, end)
    if key < 0:
        return end
    whole = _KEY_END.search(raw, key)
    # A key block is shown whole (as its mark) or not at all: never cut inside its end line.
    return key if whole is None else max(end, whole.end())

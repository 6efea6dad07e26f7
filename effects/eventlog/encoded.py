"""Payloads encoded as the log encodes them, and payloads that carry that text already.

A long payload made of many parts that recur record after record (a caller's history, passed
again each turn) need not be encoded whole each time: each part's text is made once and the
record's is their join. The line written is the same bytes either way.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

__all__ = ["EncodedPayload", "payload_json"]

# The C encoder JSONEncoder builds for a one-shot encode (None in a Python built without it).
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_PAYLOAD_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


def payload_json(value: Any) -> str:
    """A payload (or a part of one) as the log's lines hold it: compact, keys sorted,
    non-ASCII kept. Raises ``TypeError`` or ``ValueError`` for what JSON cannot hold."""
    # What _PAYLOAD_ENCODER.encode(value) does, without its two frames of Python: the C
    # encoder it makes, made per call as it makes it (the dict that catches a cycle is the
    # call's own, so threads encoding one shared payload never see each other's marks).
    if _MAKE_ENCODER is None:
        return _PAYLOAD_ENCODER.encode(value)
    return "".join(_MAKE_ENCODER({}, _PAYLOAD_ENCODER.default, encode_basestring, None, ":",
                                 ",", True, False, False)(value, 0))


class EncodedPayload(dict):
    """A payload with its :func:`payload_json` text made beforehand by its builder (which
    vouches that ``text == payload_json(self)``); the writer uses the text as it is."""

    __slots__ = ("text",)

    def __init__(self, value: dict[str, Any], text: str) -> None:
        super().__init__(value)
        self.text = text

"""A sealed line whose seal holds is decoded in one pass (msgspec, typed): it must read every
line exactly as the general path does, and leave to it every line it does not take."""

from __future__ import annotations

import hashlib
import json

from hypothesis import example, given
from hypothesis import strategies as st

from effects.eventlog.envelope import Decoded, _decode_any, _decode_sealed, encode_line
from tests.effects.test_envelope_parse import _same, json_values

_KEYS = ("session_id", "seq", "kind", "schema_version", "recorded_at", "prev_hash", "payload")


_HEAD = (b'{"session_id":"s","seq":1,"kind":"k","schema_version":1,"recorded_at":"t",'
         b'"prev_hash":"p","payload":{}')


def seal(head: bytes) -> bytes:
    """``head`` (an object without its closing brace) sealed as encode_line seals a line."""
    own = hashlib.sha256(head + b"}").hexdigest().encode()
    return head + b',"hash":"' + own + b'"}'


def _general(line: bytes) -> tuple[str, object]:
    try:
        return "ok", _decode_any(line)
    except ValueError as exc:
        return "error", str(exc)


fields = st.fixed_dictionaries({
    "session_id": st.text(max_size=6), "seq": st.integers(-5, 2**70),
    "kind": st.text(max_size=6), "schema_version": st.integers(0, 3),
    "recorded_at": st.text(max_size=6), "prev_hash": st.text(max_size=6),
    "payload": st.dictionaries(st.text(max_size=4), json_values, max_size=3)})


def _odd(value: object) -> st.SearchStrategy[object]:
    """A value of another JSON type than ``value``'s."""
    return json_values.filter(lambda v: type(v) is not type(value))


@st.composite
def sealed_heads(draw: st.DrawFn) -> bytes:
    """Sealed lines that are envelopes, or nearly: keys dropped, added, repeated, reordered,
    values of the wrong type, other spacing."""
    obj = draw(fields)
    items = list(obj.items())
    for _ in range(draw(st.integers(0, 2))):
        move = draw(st.sampled_from(["drop", "add", "repeat", "swap", "retype"]))
        i = draw(st.integers(0, len(items) - 1)) if items else 0
        if move == "drop" and items:
            del items[i]
        elif move == "add":
            items.insert(i, (draw(st.sampled_from(["hash", "extra", *_KEYS])),
                             draw(json_values)))
        elif move == "repeat" and items:
            items.append((items[i][0], draw(json_values)))
        elif move == "swap" and len(items) > 1:
            items[0], items[i] = items[i], items[0]
        elif move == "retype" and items:
            items[i] = (items[i][0], draw(_odd(items[i][1])))
    comma, colon = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    ascii_only = draw(st.booleans())
    return ("{" + comma.join(json.dumps(k) + colon + json.dumps(v, ensure_ascii=ascii_only)
                             for k, v in items)).encode()


@given(sealed_heads())
@example(b"{")
@example(_HEAD + b',"extra":1')
@example(_HEAD + b',"hash":"0"')
@example(b'{"seq":1,' + _HEAD[1:].replace(b'"seq":1,', b""))  # the keys in another order
@example(b'{"session_id":"s","seq":true,"kind":"k","schema_version":1,"recorded_at":"t",'
         b'"prev_hash":"p","payload":{}')
@example(b'{"session_id":"s","seq":1,"kind":"k","schema_version":1,"recorded_at":"t",'
         b'"prev_hash":"p","payload":{"a":"\\ud800"}')
def test_a_sealed_line_reads_as_the_general_path_reads_it(head: bytes) -> None:
    line = seal(head)
    fast, general = _decode_sealed(line), _general(line)
    if fast is not None:  # it may refuse any line: the general path then decides
        assert general[0] == "ok", (line, general)
        decoded = general[1]
        assert isinstance(decoded, Decoded)
        assert decoded.sealed and fast.digest == decoded.digest == hashlib.sha256(line).hexdigest()
        assert fast.envelope == decoded.envelope
        assert _same(fast.envelope.payload, decoded.envelope.payload)


@given(fields.filter(lambda o: o["kind"] != ""), st.text("0123456789abcdef", max_size=64),
       st.binary(max_size=3), st.integers(0, 10**4))
def test_a_line_changed_after_its_seal_is_left_to_the_general_path(
        obj: dict, prev_hash: str, junk: bytes, at: int) -> None:
    """Every line the writer writes takes the fast path; any change to it leaves it."""
    line = encode_line(**{**obj, "prev_hash": prev_hash})
    assert _decode_sealed(line) is not None
    i = at % len(line)
    changed = line[:i] + junk + line[i + 1:]
    if changed != line:
        assert _decode_sealed(changed) is None

"""Masks do no harm to JSON: tool-call arguments and results are JSON text, and a call whose
arguments stop being JSON is refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log.redact import redact
from tests.stages.redaction_corpus import ORDINARY, SECRETS
from tests.stages.secret_cases import cases

_TUNING_TPS = [text for _, text in cases(held_out=False)[0][::40]]
_TEXTS = st.one_of(st.sampled_from([t for t, _ in SECRETS] + ORDINARY + _TUNING_TPS),
                   st.text(max_size=30))
_STRINGS = st.lists(_TEXTS, min_size=1, max_size=3).map(lambda parts: "\n".join(parts))
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _STRINGS),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(_STRINGS | st.sampled_from(
                                   ["password", "api_key", "token", "cmd", "content"]),
                                   children, max_size=4)),
    max_leaves=8)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=200, deadline=None)
@given(_JSON, st.sampled_from([None, 2]), st.booleans())
def test_json_with_secrets_in_its_strings_stays_json_and_masks_are_idempotent(
        document: object, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    once = redact(text)
    parsed = json.loads(once)  # still JSON
    assert redact(once) == once  # a mask is never masked again
    shown = "\n".join(_strings(parsed))
    held = "\n".join(_strings(document))
    for source, secret in SECRETS:
        if source in held:
            assert secret not in shown


@pytest.mark.parametrize("command", [
    'curl -H "PRIVATE-TOKEN: glpat-xYz12AbC34dEf56GhI78" https://gitlab.com/api/v4/user',
    'curl -H "Authorization: Bearer Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ" -d "{\\"a\\": 1}"',
    'export OPENAI_API_KEY="s3cr3t-v4lue-for-tests" && run',
])
def test_a_mask_inside_a_json_string_keeps_the_escaped_quote(command: str) -> None:
    arguments = json.dumps({"cmd": command, "timeout": 30})
    out = redact(arguments)
    assert json.loads(out)["timeout"] == 30
    assert json.loads(out)["cmd"].count('"') == command.count('"')

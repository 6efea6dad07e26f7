"""Named examples for secret redaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log import events as ev
from stages.log.messages import Message
from stages.log.redact import mask, redact, redact_event
from tests.stages.helpers import call, ran, reply

OPENAI_KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0"


def test_mask_keeps_a_little_of_long_tokens_only() -> None:
    assert mask("short-secret") == "***"
    assert mask(OPENAI_KEY) == "sk-pro...0123"


@pytest.mark.parametrize("text, secret", [
    (f"key is {OPENAI_KEY} ok", OPENAI_KEY),
    (f"token {GITHUB_TOKEN}", GITHUB_TOKEN),
    ("aws AKIAABCDEFGHIJKLMNOP here", "AKIAABCDEFGHIJKLMNOP"),
    ("hf_abcdefghijklmnopqrstuvwxyz", "hf_abcdefghijklmnopqrstuvwxyz"),
    ("stripe sk_live_abcdefghijklmnop1234", "sk_live_abcdefghijklmnop1234"),
    ("Authorization: Bearer abc.def-ghi_jkl~mnopqrstuv", "abc.def-ghi_jkl~mnopqrstuv"),
    ("OPENAI_API_KEY=supersecretvalue123", "supersecretvalue123"),
    ("export DB_PASSWORD='hunter2hunter2'", "hunter2hunter2"),
    ('{"api_key": "abcd1234efgh5678"}', "abcd1234efgh5678"),
    ('{"client_secret":"zzzzyyyyxxxx"}', "zzzzyyyyxxxx"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz"),
])
def test_common_key_shapes_are_masked(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert out != text


def test_private_keys_are_removed_whole() -> None:
    pem = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n"
           "-----END RSA PRIVATE KEY-----")
    assert redact(f"before\n{pem}\nafter") == "before\n[REDACTED PRIVATE KEY]\nafter"


def test_known_secrets_are_replaced_wherever_they_appear() -> None:
    secret = "correct-horse-battery-staple"
    out = redact(f"a{secret}b and again:{secret}", known=(secret,))
    assert secret not in out
    assert out.count(mask(secret)) == 2


def test_a_known_secret_is_hidden_however_short_but_not_inside_a_word() -> None:
    """A configured key of three characters is still the key: it was shown in the log and on
    stderr when only keys of eight or more were hidden. Where it is a part of a longer word it
    is no key, and the word stays; an empty one hides nothing."""
    assert redact("the word abc stays", known=("", "abc")) == "the word *** stays"
    assert redact("abcdef and xabc stay", known=("abc",)) == "abcdef and xabc stay"
    assert redact('{"key": "k3y"}', known=("k3y",)) == '{"key": "***"}'


@pytest.mark.parametrize("text", [
    "", "hello world", "The token budget is 500 tokens.", "sk-short", "password: ",
    '{"name": "Oslo", "temp": 3}', "naïve café 日本語 🙂", "Bearer",
    "api key rotation policy",
])
def test_plain_text_is_untouched(text: str) -> None:
    assert redact(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(whitelist_categories=("Ll", "Zs", "Nd", "P")), max_size=60))
def test_lowercase_prose_is_untouched(text: str) -> None:
    """No key shape starts with only lowercase letters, spaces, digits and punctuation —
    unless it spells a vendor prefix, which is excluded here."""
    from hypothesis import assume
    lowered = text.lower()
    assume(not any(p in lowered for p in ("sk-", "sk_", "gh", "xox", "hf_", "gsk_", "xai-",
                                          "r8_", "npm_", "pypi-", "bearer", "github_pat_")))
    assume(not any(w in lowered for w in ("key", "token", "secret", "passw", "credential")))
    assert redact(text) == text


@pytest.mark.parametrize("secret", ['pa"ss-word-2024!x', "back\\slash-secret-0042\\",
                                    'both"\\and-1234567890ab"'])
def test_a_known_secret_is_hidden_inside_json_text_too(secret: str) -> None:
    """Tool-call arguments are JSON text: a quote or backslash of the secret is escaped
    there, and the masked text must stay valid JSON."""
    arguments = json.dumps({"password": secret, "user": "me"})
    event = reply("logging in", call("c1", "login", arguments))
    out = redact_event(event, known=(secret,))
    sent = out.message.tool_calls[0].arguments
    assert secret not in sent and json.dumps(secret)[1:-1] not in sent
    assert json.loads(sent)["user"] == "me"  # still JSON
    assert secret not in json.loads(sent)["password"]


def test_redact_event_on_tool_ran() -> None:
    event = ran(call("c1", "env"), content=f"OPENAI_API_KEY={OPENAI_KEY}", ok=False)
    out = redact_event(event)
    assert OPENAI_KEY not in out.outcome.content and OPENAI_KEY not in out.outcome.error
    assert out.outcome.call_id == "c1" and out.outcome.ok is False


def test_redact_event_on_model_replied() -> None:
    event = reply(f"use {OPENAI_KEY}", call("c1", "login", f'{{"token": "{OPENAI_KEY}"}}'))
    event = ev.ModelReplied(
        message=Message(role="assistant", content=event.message.content,
                        tool_calls=event.message.tool_calls, reasoning=f"I saw {GITHUB_TOKEN}"),
        finish_reason="tool_calls", usage=event.usage, model="m", latency_ms=1.0)
    out = redact_event(event)
    assert OPENAI_KEY not in out.message.content
    assert GITHUB_TOKEN not in out.message.reasoning
    assert OPENAI_KEY not in out.message.tool_calls[0].arguments
    assert out.message.tool_calls[0].id == "c1"
    assert out.usage == event.usage and out.finish_reason == "tool_calls"
    assert "wire" not in repr(out) and OPENAI_KEY not in out.message.wire


def test_redact_event_on_turn_started() -> None:
    event = ev.TurnStarted(turn_id="t", task_id="k", started_at="now",
                           user_message=f"my key is {OPENAI_KEY}",
                           system_message="secret=abcdefgh12345")
    out = redact_event(event, known=("abcdefgh12345",))
    assert OPENAI_KEY not in out.user_message
    assert "abcdefgh12345" not in out.system_message
    assert out.turn_id == "t"
    assert redact_event(ev.TurnStarted(turn_id="t", task_id="k", started_at="now",
                                       user_message="hi")).system_message is None


def test_redact_event_leaves_clean_and_decision_events_alone() -> None:
    clean = ran(call("c1", "x"), content="plain")
    assert redact_event(clean) == clean
    decision = ev.SystemPromptSet(text=OPENAI_KEY)
    assert redact_event(decision) is decision


def test_redact_event_on_history_loaded() -> None:
    event = ev.HistoryLoaded(messages=(Message(role="user", content=f"key {OPENAI_KEY}"),))
    assert OPENAI_KEY not in redact_event(event).messages[0].content


# --- the corpus -----------------------------------------------------------------------------

from tests.stages.redaction_corpus import ORDINARY, SECRETS  # noqa: E402


def test_the_corpus_is_large_enough() -> None:
    assert len(SECRETS) >= 100 and len({s for _, s in SECRETS}) >= 95


@pytest.mark.parametrize(("text", "secret"), SECRETS, ids=[s[:24] for _, s in SECRETS])
def test_every_secret_of_the_corpus_is_hidden(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_of_the_corpus_passes_unchanged(text: str) -> None:
    assert redact(text) == text


_PIECES = st.sampled_from([t for t, _ in SECRETS] + ORDINARY)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=6).map(" ".join))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=100, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=5))
def test_secrets_are_hidden_in_any_company(pieces: list[str]) -> None:
    out = redact("\n".join(pieces))
    for text, secret in SECRETS:
        if text in pieces:
            assert secret not in out


def test_a_header_name_on_the_next_line_is_not_taken_for_a_bearer_token() -> None:
    """Hypothesis found it: ``Bearer`` at the end of a line ate the next line's header name."""
    text = "Bearer\nPRIVATE-TOKEN: Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ"
    assert redact(text) == "Bearer\nPRIVATE-TOKEN: Xk9mP2...G0hJ"


@pytest.mark.parametrize("after", [' secret_key: "a9f8e7d6c5b4"', '\npassword: "a9f8e7d6c5b4"',
                                   ' {"token": "a9f8e7d6c5b4"}'])
def test_a_cut_off_private_key_does_not_swallow_the_name_of_the_secret_after_it(
        after: str) -> None:
    """Found by hypothesis: the cut-off key ran to the quote, taking the secret's name with
    it, and the value that quote opened was left for no pattern to find."""
    text = "cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAtruncated0" + after
    out = redact(text)
    assert "a9f8e7d6c5b4" not in out and "MIIEowIBAAKCAQEA" not in out
    assert out.startswith("cat id_rsa\n[REDACTED PRIVATE KEY]")


_KEY_LINES = "MIIEowIBAAKCAQEAabc\nMIIEowIBAAKCAQEAdef"


@pytest.mark.parametrize("text", [
    f"-----BEGIN RSA PRIVATE KEY-----\n{_KEY_LINES}",  # cut off at the end
    f"-----BEGIN RSA PRIVATE KEY-----\r\n{_KEY_LINES.replace(chr(10), chr(13) + chr(10))}",
    "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,ABCDEF01\n"
    f"\n{_KEY_LINES}",
    repr([f"-----BEGIN RSA PRIVATE KEY-----\n{_KEY_LINES}", "x"]),  # escaped breaks, a repr
    json.dumps({"key": f"-----BEGIN RSA PRIVATE KEY-----\n{_KEY_LINES}", "n": 1}),
    f"password: -----BEGIN RSA PRIVATE KEY-----\n{_KEY_LINES}\n-----END RSA PRIVATE KEY-----",
])
def test_a_private_key_is_hidden_whole_however_it_is_cut_or_quoted(text: str) -> None:
    out = redact(text)
    assert "MIIEowIBAAKCAQEA" not in out and "ABCDEF01" not in out, out


@pytest.mark.parametrize(("text", "secret"), [
    ("password: password: hunter2hunter2", "hunter2hunter2"),  # a value is no other name
    ('Bearer GITHUB_TOKEN="tok-1234567890abcdef"', "1234567890"),  # the name is hidden first
    ("['password: hunter2hunter2']", "hunter2hunter2"),  # a name after a single quote
    ('password: "pass:word1"', "pass:word1"),  # a quoted value may end in anything
])
def test_a_secret_after_a_name_is_hidden_whatever_comes_around_it(text: str,
                                                                   secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("4|password: hunter2", "4|password: ***"),  # read_file's line numbers
    ("app.yaml:4:password: hunter2", "app.yaml:4:password: ***"),  # grep -n
    ("  12|    db_password: s3cret!", "  12|    db_password: ***"),
    ("4|token: abcdef123456", "4|token: ***"),
    (">password: hunter2", ">password: ***"),  # a prompt, a quoted mail
    ("foo(password: hunter2)", "foo(password: ***)"),  # the bracket stays
    ("[password: hunter2]", "[password: ***]"),
])
def test_a_named_secret_is_hidden_after_any_prefix_a_tool_prints(text: str,
                                                                 expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("value", ["ab...cdef", "a...bcde", "hunter2...2023"])
def test_a_value_with_dots_is_hidden_unless_it_is_a_mask_as_mask_writes_it(value: str) -> None:
    """A named value was kept whenever it looked like any head, dots and four characters."""
    for text in (f"password: {value}", f'api_key: "{value}"', f"TOKEN={value}"):
        assert value not in redact(text), text
    assert redact("password: sk-pro...0123") == "password: sk-pro...0123"


@pytest.mark.parametrize("text", ["Bearer password: hunter2hunter2",
                                  "Bearer OPENAI_API_KEY=s3cr3t-v4lue-for-tests"])
def test_a_bearer_never_swallows_the_name_of_the_next_secret(text: str) -> None:
    assert "hunter2hunter2" not in redact(text) and "s3cr3t-v4lue" not in redact(text)


# Tool-call arguments are JSON text: a secret inside one of its strings stands behind escapes
# (an escaped line break before it, escaped quotes of JSON inside JSON).
_IN_JSON = ["", "line ", "line\n", "line\t", "line\r\n", 'x\n{"a": 1}\n']


@pytest.mark.parametrize("before", _IN_JSON)
@pytest.mark.parametrize(("text", "secret"), SECRETS, ids=[s[:24] for _, s in SECRETS])
def test_a_secret_inside_a_json_string_is_hidden(text: str, secret: str, before: str) -> None:
    out = redact(json.dumps({"content": before + text}))
    assert secret not in out and json.dumps(secret)[1:-1] not in out
    assert json.loads(out)["content"].startswith(before)  # still JSON, the rest kept


@pytest.mark.parametrize("before", _IN_JSON)
@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_inside_a_json_string_passes_unchanged(text: str, before: str) -> None:
    arguments = json.dumps({"content": before + text})
    assert redact(arguments) == arguments

"""Whether a value after a secret's name (``auth=auth``, ``password: hunter2``) is code or
a literal. Redaction hides a literal after a secret's name however short or plain it is (a
person's password is), so it must know the code that merely names a secret from the text that
holds one: a variable passed along, a type annotation, an attribute, a call, a reference to an
environment variable or a template's placeholder."""

from __future__ import annotations

import re

# A reference or a placeholder: ``$VAR``, ``${VAR}``, ``{name}``, ``<token>``, ``%VAR%``, a
# command's output in backticks.
_REFERENCE = re.compile(r"[$`<{%]")
# An attribute or a call: ``AutoTokenizer.from_pretrained(name)``, ``X25519.secret_length``,
# ``getToken()``, ``os.environ["KEY"]``; a dotted head followed by more (``abc.def-123``) is no
# attribute.
_ACCESS = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*(?:[(\[].*)?|[A-Za-z_]\w*[(\[].*")
# An identifier as code spells it: snake_case with an underscore, CamelCase with two capitals.
_IDENTIFIER = re.compile(r"[A-Za-z]*_[A-Za-z_]*|[A-Z][a-z]+(?:[A-Z][a-z]*)+")
# A name in quotes: of an environment variable, a setting, an enum's value (``"OPENAI_API_KEY"``,
# ``"round_robin"``).
_QUOTED_NAME = re.compile(r"[A-Za-z]+(?:_[A-Za-z]+)+")
# A number (a setting: ``max_tokens=4096``, ``AUTH_COOLDOWN = 300.0``, ``TAIL_TOKENS = 20_000``)
# or punctuation only (``auth=...`` in a sentence).
_NO_VALUE = re.compile(r"[-+]?[\d_.]+|[\W_]+")
# ``name = value``, spaced as code spaces it, and not as a shell or an .env file can.
_SPACED = re.compile(r"\s=\s*$")
# Brackets and operators in an unquoted value: an expression, a subscript, a signature.
_EXPRESSION = re.compile(r"[()\[\]|*]")
_WORDS = frozenset({
    "await", "new", "self", "this", "function", "lambda", "async", "yield", "typeof", "nil",
    "str", "int", "bytes", "bool", "float", "dict", "list", "tuple", "set", "object", "any",
    "string", "number", "boolean", "optional", "none", "null", "undefined", "auto", "default",
})


# Names that hold a secret's word and name no secret: a tokenizer, an author, a count.
_PLAIN_NAME = re.compile(
    r"(?i)tokeni[sz]|author(?!i[sz]ation)|tokens(?![a-z])|token_?(?:count|type|usage|limit)")
# A format string: ``"__attr_factory_%s"``, ``"{name}_token"``.
_TEMPLATE = re.compile(r"%[sdrif]|\{\w*\}")


def is_code(value: str, *, quoted: bool, name: str, after: str = "") -> bool:
    """Whether ``value`` (quoted or not), after the secret's ``name`` (with its ``=`` or
    ``:``) and before ``after``, is code or a setting, not a secret."""
    if _REFERENCE.match(value) or _ACCESS.fullmatch(value) or _NO_VALUE.fullmatch(value):
        return True
    lowered = value.lower()
    if (lowered in name.lower() or "`" in value or _PLAIN_NAME.search(name)
            or _TEMPLATE.search(value)):
        return True
    if quoted:
        return bool(_QUOTED_NAME.fullmatch(value))
    return (lowered in _WORDS or bool(_EXPRESSION.search(value))
            or bool(_IDENTIFIER.fullmatch(value))
            # a sentence: ``invalid_api_key: Incorrect API key provided``
            or (value.isalpha() and value.istitle() and after == " ")
            # a variable or a constant: ``password = value``, ``f(api_key=KEYLESS)``
            or (value.isalpha() and (value.islower() or value.isupper()) and (
                bool(_SPACED.search(name)) or after[:1] in (",", ")"))))

"""Extract gitleaks' own test cases (the true and false positives each rule is validated with,
in ``cmd/generate/config/rules/*.go``) into ``tests/corpus/secrets/gitleaks_cases.json``.

    python tests/corpus/secrets/gitleaks_cases.py /path/to/gitleaks/checkout

Cases are evaluated from the Go source: string literals, their concatenations, the samples
``utils.GenerateSampleSecret(s)`` builds, and secrets ``secrets.NewSecret`` draws from a
pattern (drawn here with a random generator seeded by the rule's id, so a refresh of an
unchanged rule writes the same cases). Cases built by other Go code are left out, and so are
the cases of rules validated with file paths (``ValidateWithPaths``: whether they are secrets
depends on the file).
"""

from __future__ import annotations

import ast
import itertools
import json
import random
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
RULES = "cmd/generate/config/rules"

# utils.GenerateSampleSecrets' templates, in the order of its source ({i} the identifier, {I}
# it in upper case, {s} the secret).
_TEMPLATES = (
    '{i}Token="{s}"', '{i}Token = "{s}"', "{i}Token={s}", "{i}Token = {s}",
    '{\n    "{i}_token": "{s}"\n}', '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "<{i}Token>\n    {s}\n</{i}Token>", "{i}_token: {s}", "{i}_token: '{s}'",
    '{i}_token: "{s}"', 'string {i}Token = "{s}";', 'var {i}Token string = "{s}"',
    '{i}Token := "{s}"', "{i}Token := `{s}`", 'String {i}Token = "{s}";',
    'var {i}Token = "{s}"', '${i}Token .= "{s}"', "{i}Token = '{s}'", '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")', '  "{i}Token" => "{s}"', '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"', '{i}_TOKEN ::= "{s}"', '{i}_TOKEN :::= "{s}"', '{i}_TOKEN ?= "{s}"',
)

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<rune>'(?:[^'\\]|\\.)*')
  | (?P<name>[A-Za-z_][\w.]*)
  | (?P<num>\d[\w.]*)
  | (?P<punct>\.\.\.|:=|[^\s\w])
""", re.S | re.X)


def tokens(source: str) -> list[tuple[str, str]]:
    found = []
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup or ""
        if kind != "space":
            found.append((kind, match.group()))
    return found


class Unknown(Exception):
    """An expression this script does not evaluate (random, or computed by other code)."""


def _string(kind: str, text: str) -> str:
    return text[1:-1] if kind == "raw" else ast.literal_eval(text)


def _split_args(toks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The comma-separated parts of a bracketed list's inside."""
    parts: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for tok in toks:
        if tok[1] in "([{":
            depth += 1
        elif tok[1] in ")]}":
            depth -= 1
        if tok[1] == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return [p for p in parts if p]


def _closing(toks: list[tuple[str, str]], start: int) -> int:
    depth = 0
    for index in range(start, len(toks)):
        if toks[index][1] in "([{":
            depth += 1
        elif toks[index][1] in ")]}":
            depth -= 1
            if depth == 0:
                return index
    raise Unknown("unbalanced")


# The function's string variables (``validToken := "..."``), as the function assigns them.
VARIABLES: dict[str, str] = {}


def evaluate(toks: list[tuple[str, str]]) -> list[str] | str:
    """A Go expression's value: a string, or a list of strings for a slice."""
    if not toks:
        raise Unknown("empty")
    if len(toks) == 1 and toks[0][1] in VARIABLES:
        return VARIABLES[toks[0][1]]
    if toks[-1][1] == "...":
        return evaluate(toks[:-1])
    kind, text = toks[0]
    if text == "[" and toks[1][1] == "]" and toks[2][1] == "string" and toks[3][1] == "{":
        items = []
        for part in _split_args(toks[4:_closing(toks, 3)]):
            try:
                items.append(evaluate(part))
            except Unknown:
                continue
        return [i for i in items if isinstance(i, str)]
    if kind == "name" and len(toks) > 1 and toks[1][1] == "(":
        end = _closing(toks, 1)
        args = _split_args(toks[2:end])
        if end != len(toks) - 1:
            return _concat(toks)
        if text == "utils.GenerateSampleSecrets":
            ident, secret = (evaluate(a) for a in args)
            return [t.replace("{i}", str(ident)).replace("{I}", str(ident).upper())
                    .replace("{s}", str(secret)) for t in _TEMPLATES]
        if text == "utils.GenerateSampleSecret":
            ident, secret = (evaluate(a) for a in args)
            return f'{ident}_api_token = "{secret}"'
        if text == "secrets.NewSecret":
            return draw(str(evaluate(args[0])))
        if text in _CLASSES:
            return _CLASSES[text].format(*(evaluate(a) for a in args))
        if text == "append":
            values: list[str] = []
            for arg in args[1:]:
                value = evaluate(arg)
                values += value if isinstance(value, list) else [value]
            return values
        raise Unknown(text)
    return _concat(toks)


# utils' pattern helpers (patterns.go).
_CLASSES = {
    "utils.Numeric": "[0-9]{{{}}}", "utils.Hex": "[a-f0-9]{{{}}}",
    "utils.AlphaNumeric": "[a-z0-9]{{{}}}", "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{{{}}}",
    "utils.AlphaNumericExtended": "[a-z0-9=_\\-]{{{}}}",
    "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{{{}}}",
    "utils.Hex8_4_4_4_12": "[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}",
}
RANDOM = random.Random()


def draw(pattern: str) -> str:
    """A random text the regular expression ``pattern`` matches."""
    from re import _parser  # type: ignore[attr-defined]

    return _draw(_parser.parse(pattern))


def _draw(parsed: object) -> str:
    from re import _constants as c  # type: ignore[attr-defined]

    out = []
    for op, arg in parsed:  # type: ignore[attr-defined]
        if op is c.LITERAL:
            out.append(chr(arg))
        elif op is c.IN:
            out.append(RANDOM.choice(_members(arg)))
        elif op is c.ANY:
            out.append(RANDOM.choice("abcdefghijklmnopqrstuvwxyz0123456789"))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, sub = arg
            count = RANDOM.randint(low, min(high, low + 20) if high != c.MAXREPEAT else low + 20)
            out += [_draw(sub) for _ in range(count)]
        elif op is c.SUBPATTERN:
            out.append(_draw(arg[-1]))
        elif op is c.BRANCH:
            out.append(_draw(RANDOM.choice(arg[1])))
        elif op is c.CATEGORY:
            out.append(RANDOM.choice(_category(arg)))
        elif op is not c.AT:
            raise Unknown(str(op))
    return "".join(out)


def _members(items: list[tuple[object, object]]) -> str:
    from re import _constants as c  # type: ignore[attr-defined]

    chars = []
    for op, arg in items:
        if op is c.LITERAL:
            chars.append(chr(arg))  # type: ignore[arg-type]
        elif op is c.RANGE:
            low, high = arg  # type: ignore[misc]
            chars += [chr(i) for i in range(low, high + 1)]
        elif op is c.CATEGORY:
            chars += _category(arg)
        else:
            raise Unknown(str(op))
    return "".join(chars)


def _category(category: object) -> str:
    name = str(category)
    if "DIGIT" in name:
        return "0123456789"
    if "WORD" in name:
        return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
    if "SPACE" in name:
        return " "
    raise Unknown(name)


def _concat(toks: list[tuple[str, str]]) -> str:
    """``a + b + ...``: string literals and calls giving strings."""
    operands: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for tok in toks:
        if tok[1] in "([{":
            depth += 1
        elif tok[1] in ")]}":
            depth -= 1
        if tok[1] == "+" and depth == 0:
            operands.append([])
        else:
            operands[-1].append(tok)
    pieces = []
    for operand in operands:
        if len(operand) == 1 and operand[0][0] in ("str", "raw"):
            pieces.append(_string(*operand[0]))
        elif len(operand) == 1 and operand[0][1] in VARIABLES:
            pieces.append(VARIABLES[operand[0][1]])
        elif len(operands) > 1 and operand and operand[0][0] == "name":
            value = evaluate(operand)
            if not isinstance(value, str):
                raise Unknown("a list in a sum")
            pieces.append(value)
        else:
            raise Unknown(str(operand[:1]))
    return "".join(pieces)


_FUNC = re.compile(r"^func (\w+)\(\) \*config\.Rule \{$", re.M)


def cases(source: str) -> list[dict[str, object]]:
    """The rules a Go file defines, each with its fixed true and false positives."""
    found = []
    starts = [m.start() for m in _FUNC.finditer(source)] + [len(source)]
    for start, end in itertools.pairwise(starts):
        body = source[start:end]
        rule_id = re.search(r'RuleID:\s*"([^"]+)"', body)
        if rule_id is None or "ValidateWithPaths" in body:
            continue
        RANDOM.seed(rule_id.group(1))
        VARIABLES.clear()
        lists = _lists(tokens(body))
        found.append({"id": rule_id.group(1), "tps": lists["tps"], "fps": lists["fps"]})
    return found


def _lists(toks: list[tuple[str, str]]) -> dict[str, list[str]]:
    """``tps`` and ``fps`` as the function's assignments leave them (its string variables
    kept on the way, for the cases that use them)."""
    lists: dict[str, list[str]] = {"tps": [], "fps": []}
    for index, (kind, text) in enumerate(toks):
        if kind != "name" or "." in text or index + 2 >= len(toks) \
                or toks[index + 1][1] not in (":=", "="):
            continue
        try:
            value = evaluate(toks[index + 2:_statement_end(toks, index + 2)])
        except (Unknown, IndexError, ValueError, SyntaxError):
            continue
        if text not in lists:
            if isinstance(value, str):
                VARIABLES[text] = value
            continue
        values = value if isinstance(value, list) else [value]
        if toks[index + 2][1] != "append":
            lists[text] = []
        lists[text] += [v for v in values if v not in lists[text]]
    return lists


def _statement_end(toks: list[tuple[str, str]], start: int) -> int:
    """Where the expression starting at ``start`` ends: at the next assignment or statement
    keyword at bracket depth 0."""
    depth = 0
    for index in range(start, len(toks)):
        text = toks[index][1]
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
            if depth < 0:
                return index
        elif depth == 0 and index > start and (
                text in ("return", "tps", "fps", "r", "//") or (
                    toks[index][0] == "name"
                    and toks[index - 1][1] not in ("+", "(", ",", "{", "]"))):
            return index
    return len(toks)


def main(checkout: str) -> None:
    root = Path(checkout)
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    families = []
    for path in sorted((root / RULES).glob("*.go")):
        rules = cases(path.read_text(encoding="utf-8"))
        if any(r["tps"] or r["fps"] for r in rules):
            families.append({"family": path.stem, "rules": rules})
    OUT.mkdir(parents=True, exist_ok=True)
    document = {
        "source": "https://github.com/gitleaks/gitleaks/tree/" + commit + "/" + RULES,
        "licence": "MIT, Copyright (c) 2019 Zachary Rice; see LICENSE-gitleaks beside this file",
        "families": families,
    }
    (OUT / "gitleaks_cases.json").write_text(
        json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    count = sum(len(r["tps"]) + len(r["fps"]) for f in families for r in f["rules"])
    print(f"{len(families)} families, {count} cases")


if __name__ == "__main__":
    main(sys.argv[1])

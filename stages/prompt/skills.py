"""Skills: folders holding a ``SKILL.md`` whose YAML frontmatter says what the skill is for.

The prompt carries only an index (name and description by category); the model loads a skill's
body with the ``skill_view`` tool when one applies. This module parses the frontmatter (the
small YAML subset skills use: ``key: value`` scalars, quoted strings, ``[a, b]`` and ``- item``
lists, one level of nested mapping, whose keys are lifted) and builds the index.
"""

from __future__ import annotations

from stages.log.events import SkillCard
from stages.prompt.injection import scan
from stages.prompt.injection_wide import scan_wide

SKILLS_INDEX_MAX_CHARS = 6_000
_MORE = "    ... (more skills: skills_list shows them all)"
_LIST_KEYS = ("platforms", "requires_tools", "requires_toolsets", "fallback_for_tools",
              "fallback_for_toolsets")


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text.split(" #", 1)[0].strip()


def _value(text: str) -> str | list[str]:
    text = text.strip()
    if text[:1] not in ("'", '"'):
        text = text.split(" #", 1)[0].strip()
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part) for part in text[1:-1].split(",") if part.strip()]
    return _scalar(text)


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """(frontmatter, body) of a document that opens with ``---``; None when it does not."""
    text = text.removeprefix("\ufeff")
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    after = text.find("\n", end + 4)
    return text[3:end].strip("\n"), "" if after < 0 else text[after + 1:]


def parse_frontmatter(block: str) -> dict[str, str | list[str]]:
    """The keys of a frontmatter block; nested mappings' keys are lifted to the top (the
    top-level key wins), lists gathered from ``- item`` lines."""
    out: dict[str, str | list[str]] = {}
    nested: dict[str, str | list[str]] = {}
    last: tuple[dict[str, str | list[str]], str] | None = None
    for line in block.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and last is not None:
            target, key = last
            current = target.get(key)
            items = current if isinstance(current, list) else []
            target[key] = [*items, _scalar(stripped[2:])]
            continue
        key, sep, rest = stripped.partition(":")
        if not sep:
            continue
        target = out if line[:1] not in (" ", "\t") else nested
        target[key.strip()] = _value(rest) if rest.strip() else []
        last = (target, key.strip())
    return {**{k: v for k, v in nested.items() if v != []}, **{k: v for k, v in out.items()
                                                              if v != [] or k not in nested}}


def _tuple(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else tuple(
        v.strip() for v in value.split(",") if v.strip())


def skill_card(text: str, *, folder: str, category: str, path: str) -> SkillCard | None:
    """The card of a ``SKILL.md``; None when it has no frontmatter with a description."""
    parts = split_frontmatter(text)
    if parts is None:
        return None
    meta = parse_frontmatter(parts[0])
    description = meta.get("description")
    if not isinstance(description, str) or not description:
        return None
    name = meta.get("name")
    declared = meta.get("category")
    return SkillCard(
        name=name if isinstance(name, str) and name else folder, description=description,
        category=declared if isinstance(declared, str) and declared else category,
        platforms=_tuple(meta.get("platforms")),
        requires_tools=_tuple(meta.get("requires_tools")) + _tuple(meta.get("requires_toolsets")),
        fallback_for_tools=(_tuple(meta.get("fallback_for_tools"))
                            + _tuple(meta.get("fallback_for_toolsets"))),
        path=path)


def available(card: SkillCard, *, platform: str, tools: frozenset[str]) -> bool:
    """A skill shows when it runs on the platform, the tools it needs are declared, and it is
    not the fallback for a tool that is declared."""
    if card.platforms and platform not in card.platforms:
        return False
    if any(t not in tools for t in card.requires_tools):
        return False
    return not any(t in tools for t in card.fallback_for_tools)


def skills_index(cards: tuple[SkillCard, ...], *, platform: str, tools: frozenset[str],
                 cap: int = SKILLS_INDEX_MAX_CHARS, wide: bool = False
                 ) -> tuple[str | None, tuple[str, ...]]:
    """The ``## Skills`` section, sorted by category then name, within ``cap`` characters;
    and the names of skills left out because their card looks like an injection."""
    check = scan_wide if wide else scan
    blocked = tuple(c.name for c in cards if check(f"{c.name}\n{c.description}", "strict"))
    shown = sorted((c for c in cards if c.name not in blocked
                    and available(c, platform=platform, tools=tools)),
                   key=lambda c: (c.category, c.name))
    if not shown:
        return None, blocked
    head = ("## Skills\nBefore answering, check whether one of these skills matches the task; "
            "if one does, load it with skill_view(name) and follow it.\n<available_skills>")
    lines: list[str] = []
    used = len(head) + len("\n</available_skills>") + 1
    category = None
    for card in shown:
        add = ([f"  {card.category}:"] if card.category != category else [])
        add.append(f"    - {card.name}: {' '.join(card.description.split())}")
        cost = sum(len(a) + 1 for a in add)
        if used + cost + len(_MORE) + 1 > cap:
            lines.append(_MORE)
            break
        lines.extend(add)
        used += cost
        category = card.category
    return "\n".join([head, *lines, "</available_skills>"]), blocked

"""Skills on disk: ``<home>/skills`` and the project's ``.mibyan/skills``, each skill a folder
holding a ``SKILL.md``. The category is the frontmatter's, else the folder the skill sits in
(``skills/<category>/<skill>/SKILL.md``), else ``general``. On a name clash the home's skill
wins: a repository cannot shadow a skill the user installed.
"""

from __future__ import annotations

from pathlib import Path

from stages.log.events import SkillCard
from stages.prompt.skills import skill_card

MAX_SKILLS = 500
MAX_SKILL_CHARS = 100_000


def skill_roots(home: Path, cwd: Path) -> tuple[Path, ...]:
    return (home / "skills", cwd / ".mibyan" / "skills")


def _card(path: Path, root: Path) -> SkillCard | None:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")[:MAX_SKILL_CHARS]
    except OSError:
        return None
    parts = path.parent.relative_to(root).parts
    category = parts[0] if len(parts) >= 2 else "general"
    return skill_card(text, folder=path.parent.name, category=category, path=path.as_posix())


def scan_skills(roots: tuple[Path, ...]) -> tuple[SkillCard, ...]:
    """The cards of every skill under ``roots``, the first root winning a name clash."""
    cards: dict[str, SkillCard] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("SKILL.md"))[:MAX_SKILLS]:
            card = _card(path, root)
            if card is not None and card.name not in cards:
                cards[card.name] = card
    return tuple(sorted(cards.values(), key=lambda c: (c.category, c.name)))


def read_skill(card: SkillCard) -> tuple[str, tuple[str, ...]]:
    """A skill's ``SKILL.md`` text and the other files of its folder (relative names), which
    the skill may link to."""
    path = Path(card.path)
    text = path.read_text(encoding="utf-8-sig", errors="replace")[:MAX_SKILL_CHARS]
    linked = tuple(sorted(p.relative_to(path.parent).as_posix() for p in path.parent.rglob("*")
                          if p.is_file() and p != path))[:50]
    return text, linked

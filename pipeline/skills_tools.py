"""The ``skills_list`` and ``skill_view`` tools: the prompt's skills index names the skills;
the model loads one (and the files it links to) when it applies.

    agent = Agent(..., tools=[*my_tools, *skill_tools(home, cwd)])

Skills come from ``<home>/skills`` and the project's ``.mibyan/skills`` (the home's win on a
name clash). A skill whose text looks like a prompt injection is not shown; the model reads
why instead.
"""

from __future__ import annotations

from pathlib import Path

from effects.skill_files import read_skill, scan_skills, skill_roots
from pipeline.tools import Tool
from stages.prompt.injection import screened

__all__ = ["skill_tools"]

MAX_LINKED_CHARS = 50_000


def skill_tools(home: str | Path, cwd: str | Path | None = None) -> tuple[Tool, Tool]:
    roots = skill_roots(Path(home).expanduser(), Path(cwd or Path.cwd()).expanduser())

    def skills_list() -> list[dict[str, str]]:
        """List the available skills: name, category and what each is for."""
        return [{"name": c.name, "category": c.category, "description": c.description}
                for c in scan_skills(roots)]

    def skill_view(name: str, file: str = "") -> dict[str, object]:
        """Load a skill's instructions (or one of the files it links to) before using it.

        Args:
            name: The skill's name, as in the skills index.
            file: A file of the skill's folder to read instead of SKILL.md (relative name).
        """
        card = next((c for c in scan_skills(roots) if c.name == name), None)
        if card is None:
            return {"error": f"no skill named {name!r}; skills_list shows the available ones"}
        text, linked = read_skill(card)
        if file:
            folder = Path(card.path).parent.resolve()
            target = (folder / file).resolve()
            if folder not in target.parents or not target.is_file():
                return {"error": f"{file!r} is not a file of skill {name!r}",
                        "files": list(linked)}
            text = target.read_text(encoding="utf-8", errors="replace")[:MAX_LINKED_CHARS]
        safe, findings = screened(f"skill {name}" + (f" file {file}" if file else ""),
                                  text, "strict")
        return {"name": name, "category": card.category, "content": safe,
                "files": list(linked), **({"blocked": list(findings)} if findings else {})}

    return (Tool.from_function(skills_list, read_only=True),
            Tool.from_function(skill_view, read_only=True))

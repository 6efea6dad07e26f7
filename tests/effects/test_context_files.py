"""The context reader: which files apply from the repository root down to the working
directory, in what priority, and what a hint read reports."""

from __future__ import annotations

from pathlib import Path

from effects.memory_store import MemoryStore
from effects.prompt_files import ContextReader, context_files, repository_root


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_files_from_the_root_down_one_kind_per_directory(tmp_path) -> None:
    repo = tmp_path / "repo"
    _tree(repo, {".git/HEAD": "ref", "AGENTS.md": "root agents", "CLAUDE.md": "root claude",
                 "app/CLAUDE.md": "app claude", "app/.cursorrules": "app cursor",
                 "app/web/.cursorrules": "web cursor", "app/web/.cursor/rules/b.mdc": "b",
                 "app/web/.cursor/rules/a.mdc": "a", "app/web/.cursor/rules/x.txt": "no"})
    (tmp_path / "AGENTS.md").write_text("outside the repository")
    assert repository_root(repo / "app" / "web") == repo
    assert context_files(repo / "app" / "web") == (
        ("AGENTS.md", "root agents"), ("app/CLAUDE.md", "app claude"),
        ("app/web/.cursorrules", "web cursor"), ("app/web/.cursor/rules/a.mdc", "a"),
        ("app/web/.cursor/rules/b.mdc", "b"))


def test_outside_a_repository_only_the_working_directory_counts(tmp_path) -> None:
    _tree(tmp_path, {"AGENTS.md": "parent", "work/MIBYAN.md": "\ufeffmine",
                     "work/AGENTS.md": "second"})
    assert context_files(tmp_path / "work") == (("MIBYAN.md", "mine"),)


def test_inputs_and_hints(tmp_path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    _tree(home, {"SOUL.md": "I am Ada.", "skills/ops/deploy/SKILL.md":
                 "---\ndescription: Ship.\n---\nbody"})
    _tree(repo, {".git/HEAD": "ref", "AGENTS.md": "rules", "pkg/agents.md": "pkg rules",
                 "pkg/CLAUDE.md": "second choice", "lib/empty.md": ""})
    MemoryStore(home).add("user", "Likes tea.")
    reader = ContextReader(home=home, cwd=repo)
    inputs = reader.read_inputs()
    assert inputs.cwd == repo.resolve().as_posix() and inputs.identity == "I am Ada."
    assert inputs.context_files == (("AGENTS.md", "rules"),)
    assert inputs.memory == (("user", "Likes tea."),)
    assert [(c.name, c.category) for c in inputs.skills] == [("deploy", "ops")]
    cwd = repo.resolve().as_posix()
    hints = reader.read_hints((f"{cwd}/pkg/a.py", f"{cwd}/pkg", f"{cwd}/lib"), cwd)
    found = {name.lower(): text for name, text in hints.files}
    assert found == {"pkg/agents.md": "pkg rules"}
    assert hints.dirs == (f"{cwd}/pkg/a.py", f"{cwd}/pkg", f"{cwd}/lib")
    off = ContextReader(home=home, cwd=repo, load_memory=False, load_skills=False).read_inputs()
    assert off.memory == () and off.skills == ()

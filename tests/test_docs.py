"""The documentation cannot rot: every example in README.md and docs/*.md runs or is checked here.

- Every ```python block runs, the blocks of one page in order in one namespace (as a reader
  would paste them), in an empty working directory and home, against the loopback fakes of
  tests/fake_openai.py and tests/fake_anthropic.py named by the providers' own variables; a
  ``test_*`` function a block defines is called as pytest would. A block may be left out only
  by an ``<!-- not run: reason -->`` line above it, with its reason.
- Every ``mibyan ...`` line of a ```console or ```sh block is parsed by the CLI's own parser
  (so a command or a flag that does not exist fails), and the ``--help`` ones run.
- Every ```toml block loads through the loaders that read config.toml.
- Every rules flag is named in docs/architecture.md; the README's test command is what CI
  runs; no page links to ../shared/ (a clone has no such folder).

The site itself is built with ``mkdocs build --strict`` in .ci/run (links, anchors, the nav)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import attrs
import pytest

from effects.local.model_file import local_settings
from pipeline import config as cfg
from pipeline.cli.main import _parser
from pipeline.insights.prices import price_table
from pipeline.serve.gateway_config import serve_config
from pipeline.settings import configure
from stages.log.rules import RuleSet
from tests import fake_anthropic, fake_openai

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

# A fenced block, with the optional "not run" note on the line above it.
FENCE = re.compile(r"^(?:<!-- not run: (?P<reason>[^\n]*?) -->\n)?```(?P<lang>[\w-]*)\n"
                   r"(?P<body>.*?)^```\s*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(*langs: str) -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match["lang"] in langs:
                line = text.count("\n", 0, match.start("body"))
                found.append(Block(page, line, match["lang"], match["body"], match["reason"]))
    return found


def test_every_page_has_examples_and_each_not_run_block_says_why():
    python = blocks("python")
    assert len(python) >= 7 and {b.page.name for b in python} >= {
        "README.md", "library.md", "tools.md", "testing.md", "configuration.md"}
    for block in python:
        assert block.not_run is None or len(block.not_run.split()) >= 4, block.where
    # Sparingly: most examples run.
    assert sum(b.not_run is not None for b in python) <= 2


# ---- the python examples ---------------------------------------------------------------------

PYTHON_PAGES = sorted({b.page for b in blocks("python")}, key=lambda p: p.name)


@pytest.fixture
def providers(tmp_path, monkeypatch) -> Iterator[tuple[Path, Path]]:
    """An empty home and working directory, and the fakes behind every provider variable."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for name in ("MIBYAN_MODEL", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with fake_openai.FakeOpenAIServer(fake_openai.Reply.text("Sunny.")) as openai_server, \
            fake_anthropic.FakeAnthropicServer(fake_anthropic.Reply.text("Sunny.")) as anthropic:
        monkeypatch.setenv("MIBYAN_HOME", str(home))
        monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-key-0000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-example-key-0000")
        monkeypatch.setenv("MIBYAN_TOKEN_ALICE", "docs-example-token")
        monkeypatch.chdir(work)
        yield home, tmp_path


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[p.name for p in PYTHON_PAGES])
def test_the_python_examples_of_the_page_run(page, providers):
    _, tmp_path = providers
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for block in (b for b in blocks("python") if b.page == page and b.not_run is None):
        exec(compile(block.body, block.where, "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    for number, test in enumerate(tests):
        path = tmp_path / f"{test.__name__}-{number}"
        path.mkdir()
        test(tmp_path=path)


# ---- the command lines -----------------------------------------------------------------------

def _joined(lines: list[str]) -> list[tuple[int, str]]:
    """``(offset of its first line, text)`` of each command, continuation lines joined."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(lines):
        start, text = pending if pending is not None else (offset, "")
        text += line
        pending = (start, text[:-1] + " ") if line.endswith("\\") else None
        if pending is None:
            joined.append((start, text))
    if pending is not None:
        joined.append(pending)
    return joined


def command_lines() -> list[tuple[str, list[str]]]:
    """``(where, arguments after mibyan)`` of every ``mibyan`` command in a shell block."""
    found = []
    for block in blocks("console", "sh", "bash"):
        # A command continued with a backslash is one line to the shell.
        for offset, raw in _joined(block.body.splitlines()):
            line = raw.removeprefix("$ ")
            for part in re.split(r"&&|\|", line):
                words = shlex.split(part, comments=True)
                if words[:2] == ["uv", "run"]:
                    words = words[2:]
                if words[:1] == ["mibyan"]:
                    found.append((f"{block.page.relative_to(ROOT)}:{block.line + offset + 1}",
                                  words[1:]))
    # The README's table of the commands people use most, in `code` spans.
    for span in re.findall(r"`(mibyan [^`]*)`", README.read_text()):
        if "..." not in span and "COMMAND" not in span:
            found.append((f"README.md: `{span}`", shlex.split(span)[1:]))
    return found


def test_every_documented_command_line_parses(tmp_path, monkeypatch):
    lines = [(where, args) for where, args in command_lines() if "--help" not in args]
    assert len(lines) >= 15
    monkeypatch.chdir(tmp_path)
    parser = _parser()
    numbers = {"SEQ": "3", "N": "2"}  # placeholders of arguments that must be numbers
    for where, args in lines:
        try:
            parser.parse_args([numbers.get(arg, arg) for arg in args])
        except SystemExit:
            pytest.fail(f"{where}: `mibyan {shlex.join(args)}` is not a valid command line")


HELP_LINES = [(where, args) for where, args in command_lines() if "--help" in args]


@pytest.mark.parametrize("args", [a for _, a in HELP_LINES], ids=[w for w, _ in HELP_LINES])
def test_the_documented_help_commands_run(args):
    done = subprocess.run([sys.executable, "-m", "pipeline.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: mibyan")


# ---- config.toml -----------------------------------------------------------------------------

TOML = blocks("toml")


def variables(value: object) -> Iterator[str]:
    """The environment variables a config example names (keys, key pools, gateway tokens)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from variables(item)
    elif isinstance(value, list):
        for item in value:
            yield from variables(item)
    elif isinstance(value, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*_(KEY|KEY_\d+|TOKEN_\w+)", value):
        yield value


@pytest.mark.parametrize("block", TOML, ids=[b.where for b in TOML])
def test_every_config_example_loads(block, tmp_path, monkeypatch):
    file = tomllib.loads(block.body)
    (tmp_path / "config.toml").write_text(block.body)
    assert cfg.load_file(tmp_path) == file
    for number, variable in enumerate(variables(file)):
        monkeypatch.setenv(variable, f"docs-example-secret-{number:04}")
    monkeypatch.setenv("MIBYAN_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))  # where a `~/...` model_path points
    # Each section through the code that reads it; a bad key or value is a UsageError.
    if "model" in file or "context" in file or "fallback_providers" in file:
        monkeypatch.setenv("OPENAI_API_KEY", "docs-example-secret-openai")
        configure(home=tmp_path, **({} if "model" in file else {"model": "gpt-4o-mini"}))
    if "serve" in file:
        serve_config(file, workdir=str(tmp_path))
    if "prices" in file:
        price_table(file)
    if "mcp" in file:
        from pipeline.mcp_tools import servers_from_config
        assert servers_from_config(file)
    if "local" in file:
        settings = local_settings(tmp_path)
        assert {key for key in file["local"] if getattr(settings, key, None) is None} == set()


def test_the_configuration_page_shows_every_section_and_model_key():
    [whole] = [b for b in TOML if b.page.name == "configuration.md"]
    file = tomllib.loads(whole.body)
    # Every table mibyan reads: [mcp.servers.NAME] has a page of its own, named here.
    assert set(file) == cfg.SECTIONS - {"mcp"}
    assert "[mcp.servers.NAME]" in whole.page.read_text()
    assert set(file["model"]) == set(cfg._MODEL_KEYS)


# ---- the rest --------------------------------------------------------------------------------

def test_every_rules_flag_is_named_in_the_architecture_page():
    page = (ROOT / "docs" / "architecture.md").read_text()
    flags = [f.name for f in attrs.fields(RuleSet) if f.name != "version"]
    assert [flag for flag in flags if f"`{flag}`" not in page] == []


def test_the_readme_test_command_is_what_ci_runs():
    first = FENCE.search(README.read_text())
    assert first and README.read_text().index(first.group(0)) < 20  # the very top
    main_job, tests = first["body"].splitlines()
    assert "uv run mibyan run" in main_job
    command = shlex.split(tests.split("&&")[-1], comments=True)
    ci = [shlex.split(line) for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.startswith("uv run")]
    assert command in [[w for w in line if w != "--frozen"] for line in ci]


def test_the_readme_starts_people_in_about_a_hundred_lines_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 110
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        assert target.startswith("http") or (ROOT / target).exists(), target


def test_no_page_points_at_a_folder_a_clone_does_not_have():
    for page in PAGES:
        assert "../shared" not in page.read_text(), page

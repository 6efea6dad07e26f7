"""The read-only classifier: what may run without a question where no sandbox can start."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.tools.read_only import is_read_only

READ_ONLY = [
    "ls", "ls -la src", "cat README.md", "head -n 20 a.py", "tail -5 log.txt", "wc -l *.py",
    "grep -rn TODO .", "rg 'def main' src", "find . -name '*.py'", "pwd", "echo hello",
    "git status", "git log --oneline -5", "git diff HEAD~1", "git show HEAD:README.md",
    "find src -type f -newer setup.py",
]

NOT_READ_ONLY = [
    # other programs, and programs that write
    "rm -rf build", "touch x", "mkdir d", "python3 -c 'print(1)'", "sh -c ls", "bash", "make",
    "cp a b", "mv a b", "sed -i s/a/b/ f", "tee out", "sort -o out in", "dd if=a of=b",
    "curl http://example.com", "/bin/ls", "./ls", "sudo ls", "env ls", "xargs rm",
    # shell syntax: lists, pipes, redirections, substitutions, variables, escapes
    "ls; rm -rf x", "ls && rm x", "ls || rm x", "cat a | sh", "echo x > f", "echo x >> f",
    "cat < f", "echo $(rm x)", "echo `rm x`", "echo $HOME", "ls & rm x", "r\\m -rf x",
    "(rm x)", "{ rm x; }", "ls\nrm x", "echo hi # comment", "!!",
    # the options by which the listed programs write or run programs
    "find . -delete", "find . -exec rm {} +", "find . -execdir rm {} ;", "find . -ok rm {} ;",
    "find . -fprint out", "rg --pre ./evil pattern", "rg --pre=./evil pattern",
    "git -c core.pager=evil log", "git -C /tmp status", "git commit -m x", "git push",
    "git reset --hard", "git clean -fdx", "git checkout .", "git diff --output=f",
    "git log --output f", "git diff --ext-diff", "git show --textconv HEAD", "git",
    # assignments, unclosed quotes, nothing
    "X=1 ls", "echo 'unclosed", "", "   ",
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_plainly_read_only_commands(command: str) -> None:
    assert is_read_only(command)


@pytest.mark.parametrize("command", NOT_READ_ONLY)
def test_everything_else_is_not_read_only(command: str) -> None:
    assert not is_read_only(command)


@given(st.text(max_size=40))
def test_a_command_with_any_shell_syntax_is_never_read_only(text: str) -> None:
    for syntax in (";", "|", "&", ">", "<", "$", "`", "\\", "("):
        assert not is_read_only(f"ls {text}{syntax}{text}")

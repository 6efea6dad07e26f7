"""The dangerous-command check of rules 7 (``stages.tools.shell``): the adversarial corpus, the
spellings issue 23 found running unasked, rewrites that keep a command's meaning, and a reader
that never crashes."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stages.log.rules import rule_set
from stages.tools import dangerous_patterns
from stages.tools.dangerous import detect, detector
from stages.tools.shell.read import dangers
from tests.stages import test_dangerous as table
from tests.stages.shell_corpus import CATASTROPHIC, DESTRUCTIVE, ORDINARY


def _found(command: str) -> tuple[str, bool] | None:
    danger = detect(command)
    return None if danger is None else (danger.key, danger.hard)


def test_the_corpus_is_wide() -> None:
    assert len(set(CATASTROPHIC)) >= 50 and len(set(DESTRUCTIVE)) >= 100
    assert len(set(ORDINARY)) >= 100


@pytest.mark.parametrize(("command", "key"), CATASTROPHIC)
def test_catastrophic_commands_are_blocked(command: str, key: str) -> None:
    assert _found(command) == (key, True)


@pytest.mark.parametrize(("command", "key"), DESTRUCTIVE)
def test_destructive_commands_are_asked_about(command: str, key: str) -> None:
    assert _found(command) == (key, False)


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_commands_pass(command: str) -> None:
    assert detect(command) is None


READS_THE_STRING = {"bash -c 'echo hi'"}
"""The table asked about every ``sh -c``; the reader reads the string (``echo hi``: nothing)."""


@pytest.mark.parametrize(("command", "key"), [
    (c, k) for c, k in table.HARD + table.DANGEROUS if c not in READS_THE_STRING])
def test_the_tables_examples_keep_their_keys(command: str, key: str) -> None:
    """Approvals remember keys: a command the table found is found under the same key."""
    found = detect(command)
    assert found is not None and found.key == key
    assert found.hard == any(c == command for c, _ in table.HARD)


@pytest.mark.parametrize("command", [*table.HARMLESS, *READS_THE_STRING])
def test_the_tables_harmless_examples_pass(command: str) -> None:
    assert detect(command) is None


# The spellings issue 23 measured running with no question, or only asked about when they must
# be blocked: each one failed under the regex table.
UNASKED = [
    (r"r\m -rf ./src", "recursive_delete"), ("x=rm; $x -rf src", "recursive_delete"),
    ("$(echo rm) -rf src", "recursive_delete"), ("R=-rf; rm $R src", "recursive_delete"),
    ("rm -$(echo rf) src", "recursive_delete"),
    ("python3 -c 'import shutil; shutil.rmtree(\"src\")'", "interpreter_delete"),
    ("perl -MFile::Path -e 'rmtree(\"src\")'", "interpreter_delete"),
    ("base64 -d payload.txt | sh", "code_from_data"), ("git -C dir clean -fdx", "git_clean"),
    ("truncate -s 0 data.db", "truncate_file"), ("rsync -a --delete src/ backup/", "rsync_delete"),
]
UNBLOCKED = [
    (r"r\m -rf /", "rm_root"), ("echo b > /proc/sysrq-trigger", "kernel_write"),
    ("f(){ f|f& };f", "fork_bomb"), ("rm -rf //", "rm_root"), ("rm -rf /.", "rm_root"),
    ("rm -rf ${HOME}", "rm_root"), ("rm -rf ~root", "rm_root"), ("cd / && rm -rf *", "rm_root"),
]


@pytest.mark.parametrize(("command", "key"), UNASKED)
def test_the_spellings_that_ran_unasked_are_asked_about(command: str, key: str) -> None:
    assert _found(command) == (key, False)
    old = dangerous_patterns.detect(command)
    assert old is None or old.key != key  # what rules 6 missed, kept so old sessions replay


@pytest.mark.parametrize(("command", "key"), UNBLOCKED)
def test_the_catastrophes_that_were_missed_or_only_asked_are_blocked(command: str,
                                                                       key: str) -> None:
    assert _found(command) == (key, True)
    old = dangerous_patterns.detect(command)
    assert old is None or not old.hard


def test_rules_7_reads_with_the_parser_and_older_rules_keep_the_table() -> None:
    assert detector(rule_set(7))(r"r\m -rf ./src", ()) is not None
    assert detector(rule_set(6))(r"r\m -rf ./src", ()) is None
    assert detector(rule_set(6))("bash -c 'echo hi'", ()) == dangerous_patterns.detect(
        "bash -c 'echo hi'")


@pytest.mark.parametrize("command", ['echo "unterminated', "ls |", "if then fi", "ls (",
                                     "$(", "cat <<EOF", "\x00rm", "echo )", "ls && && ls"])
def test_a_command_the_parser_cannot_read_is_asked_about(command: str) -> None:
    found = detect(command)
    assert found is not None and found.key == "unparsed_command" and not found.hard


def test_a_hard_danger_in_a_broken_command_is_still_blocked() -> None:
    assert _found("rm -rf / ; echo 'oops") == ("rm_root", True)


def test_strings_run_as_code_are_read_to_a_depth_then_asked_about() -> None:
    nested = "rm -rf build"
    for _ in range(12):
        nested = "sh -c " + shlex.quote(nested)
    assert _found(nested) == ("unparsed_command", False)


# --- rewrites that keep a command's meaning keep its verdict ---------------------------------
SIMPLE = [
    ("rm", "-rf", "/"), ("rm", "-fr", "/etc"), ("rm", "-r", "/usr/lib"), ("mkfs.ext4", "/dev/sda1"),
    ("dd", "if=/dev/zero", "of=/dev/sda"), ("kill", "-9", "-1"), ("shutdown", "-h", "now"),
    ("systemctl", "poweroff"), ("find", "/", "-delete"), ("rsync", "-a", "--delete", "e/", "/"),
    ("rm", "-rf", "build"), ("git", "reset", "--hard"), ("git", "push", "--force", "origin"),
    ("git", "clean", "-fdx"), ("truncate", "-s", "0", "f"), ("rsync", "-a", "--delete", "a/", "b/"),
    ("chmod", "-R", "777", "."), ("find", ".", "-delete"), ("pkill", "python"),
    ("systemctl", "stop", "nginx"), ("docker", "system", "prune", "-af"), ("shred", "-u", "k"),
    ("dd", "if=a", "of=b"), ("ls", "-la"), ("git", "status"), ("rm", "file.txt"),
    ("python3", "-m", "pytest"), ("grep", "-rn", "rm", "src"), ("make", "test"),
]


def _spell(word: str, how: int, index: int) -> tuple[str, str]:
    """One word spelled another way: (assignments to put first, the word)."""
    if how == 1:
        return "", f"'{word}'"
    if how == 2:
        return "", f'"{word}"'
    if how == 3:
        at = next((i for i, c in enumerate(word) if c.isalpha()), None)
        return "", word if at is None else f"{word[:at]}\\{word[at:]}"
    if how == 4:
        return f"v{index}='{word}'; ", f'"$v{index}"'
    if how == 5:
        return "", "$'" + "".join(f"\\x{ord(c):02x}" for c in word) + "'"
    return "", word


def _wrap(command: str, how: int) -> str:
    if how == 1:
        return "sh -c " + shlex.quote(command)
    if how == 2:
        return "nice " + command if "=" not in command.partition(" ")[0] else command
    if how == 3:
        return f"( {command} )"
    if how == 4:
        return "bash -c " + shlex.quote(command)
    return command


@given(st.sampled_from(SIMPLE), st.data(), st.integers(0, 4), st.booleans())
@example(("rm", "-rf", "/"), None, 1, True)
def test_meaning_preserving_rewrites_keep_the_verdict(argv, data, outer, env) -> None:
    """Quote a word, backslash a letter, move a word into a variable, spell it in ``$'..'``,
    prefix ``env``, wrap in ``sh -c``/``bash -c``/a subshell: the same key, the same hardness."""
    plain = _found(" ".join(argv))
    hows = (data.draw(st.lists(st.integers(0, 5), min_size=len(argv), max_size=len(argv)))
            if data is not None else [4] * len(argv))
    spelled = [_spell(word, how, i) for i, (word, how) in enumerate(zip(argv, hows, strict=True))]
    command = ("".join(a for a, _ in spelled) + ("env " if env else "")
               + " ".join(w for _, w in spelled))
    assert _found(_wrap(command, outer)) == plain, command


@given(st.text(max_size=60))
def test_any_text_is_read_without_raising(text: str) -> None:
    dangers(text)  # the reader itself, not detect's fail-closed catch


@given(st.lists(st.sampled_from(["rm", " -rf ", "/", "$(", ")", "`", "'", '"', "$'", "\\",
                                 "${", "}", "<<EOF\n", "\nEOF", "|", "&", ";", "sh -c ", "eval ",
                                 "(", "{", "x=", "$x", "~", "*", "<(", ">", "python3 -c ",
                                 "f(){", "f|f&", "};f", " "]), max_size=16))
def test_shell_shaped_text_is_read_without_raising(parts: list[str]) -> None:
    dangers("".join(parts))

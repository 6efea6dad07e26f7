"""The file tools against real files in a temporary working tree."""

from __future__ import annotations

import pytest

from effects.tools.files import FileTools
from effects.tools.workspace import ToolError, Workspace, cap_middle


@pytest.fixture
def files(tmp_path) -> FileTools:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("a = 1\nb = 2\nc = 3\n")
    return FileTools(Workspace(root=tmp_path))


def test_read_file_shows_numbered_lines_of_a_range(files) -> None:
    assert files.read_file("src/app.py", offset=2, limit=1) == (
        "2|b = 2\n[lines 2-2 of 3; read on with offset=3]")
    assert files.read_file("src/app.py") == "1|a = 1\n2|b = 2\n3|c = 3"


def test_read_file_errors_say_what_is_wrong(files, tmp_path) -> None:
    with pytest.raises(ToolError, match=r"file not found: nope\.txt"):
        files.read_file("nope.txt")
    with pytest.raises(ToolError, match="is a directory"):
        files.read_file("src")
    with pytest.raises(ToolError, match="past its end"):
        files.read_file("src/app.py", offset=10)
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    with pytest.raises(ToolError, match="binary file"):
        files.read_file("blob.bin")


def test_paths_outside_the_working_tree_are_refused(files, tmp_path) -> None:
    for path in ("../outside.txt", "/etc/passwd", "~/.bashrc"):
        with pytest.raises(ToolError, match="outside the working directory"):
            files.read_file(path)
    with pytest.raises(ToolError, match="outside"):
        files.write_file("../evil.txt", "x")
    assert not (tmp_path.parent / "evil.txt").exists()


def test_a_symlink_out_of_the_tree_is_refused(files, tmp_path) -> None:
    (tmp_path / "link").symlink_to("/etc")
    with pytest.raises(ToolError, match="outside"):
        files.read_file("link/hostname")


def test_allow_outside_and_allowed_roots(tmp_path) -> None:
    outside = tmp_path / "other"
    outside.mkdir()
    (outside / "f.txt").write_text("hi")
    inner = tmp_path / "tree"
    inner.mkdir()
    assert FileTools(Workspace(root=inner, allowed=(outside,))).read_file(
        str(outside / "f.txt")) == "1|hi"
    assert FileTools(Workspace(root=inner, allow_outside=True)).read_file(
        str(outside / "f.txt")) == "1|hi"


def test_write_file_creates_directories_and_reports(files, tmp_path) -> None:
    result = files.write_file("new/dir/x.txt", "héllo")
    assert result == {"path": "new/dir/x.txt", "bytes_written": 6, "created": True}
    assert (tmp_path / "new/dir/x.txt").read_text() == "héllo"
    assert files.write_file("new/dir/x.txt", "again")["created"] is False


def test_patch_replaces_exactly_one_match(files, tmp_path) -> None:
    assert files.patch("src/app.py", "b = 2", "b = 20") == {"path": "src/app.py",
                                                            "replacements": 1}
    assert (tmp_path / "src/app.py").read_text() == "a = 1\nb = 20\nc = 3\n"


def test_patch_refuses_zero_or_several_matches_and_leaves_the_file(files, tmp_path) -> None:
    before = (tmp_path / "src/app.py").read_text()
    with pytest.raises(ToolError, match="was not found"):
        files.patch("src/app.py", "d = 4", "x")
    with pytest.raises(ToolError, match="occurs 3 times"):
        files.patch("src/app.py", " = ", " := ")
    assert (tmp_path / "src/app.py").read_text() == before
    assert files.patch("src/app.py", " = ", "=", replace_all=True)["replacements"] == 3
    assert (tmp_path / "src/app.py").read_text() == "a=1\nb=2\nc=3\n"


def test_search_files_by_name_and_content(files, tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("b = 2")
    (tmp_path / "notes.md").write_text("b = 2 in prose\n")
    assert files.search_files("*.py", target="files") == {"files": ["src/app.py"], "total": 1}
    found = files.search_files(r"b = \d")
    assert found["matches"] == [{"path": "notes.md", "line": 1, "text": "b = 2 in prose"},
                                {"path": "src/app.py", "line": 2, "text": "b = 2"}]
    assert files.search_files(r"b = \d", file_glob="*.py")["matches"][0]["path"] == "src/app.py"
    assert files.search_files("=", limit=2)["truncated"] is True


def test_search_files_skips_what_cannot_be_read(files, tmp_path) -> None:
    (tmp_path / "src" / "gone.py").symlink_to(tmp_path / "nowhere.py")
    assert files.search_files(r"b = \d")["matches"] == [
        {"path": "src/app.py", "line": 2, "text": "b = 2"}]
    assert files.search_files(r"b = \d", path="src")["truncated"] is False


def test_search_files_errors(files) -> None:
    with pytest.raises(ToolError, match="not a valid regular expression"):
        files.search_files("(")
    with pytest.raises(ToolError, match="target must be"):
        files.search_files("x", target="everything")
    with pytest.raises(ToolError, match="not a directory"):
        files.search_files("x", path="src/app.py")


def test_cap_middle_keeps_head_and_tail() -> None:
    text = "h" * 50 + "m" * 1000 + "t" * 50
    cut = cap_middle(text, 100)
    assert cut.startswith("h" * 40) and cut.endswith("t" * 50)
    assert "[... 1000 characters left out ...]" in cut
    assert cap_middle("short", 100) == "short"

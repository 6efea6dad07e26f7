"""Images named in a chat line: ``@path`` mentions (a missing one is an error, the turn does
not start) and pasted paths of images that exist; prose mentioning a file name is left alone.
Then a real chat session sends the image to the fake server."""

from __future__ import annotations

from pathlib import Path

from pipeline.chat.attachments import image_paths
from pipeline.shell.replay import replay
from tests.fake_openai import Reply
from tests.images import png
from tests.pipeline.test_chat_session import Chat, _options, no_provider_environment

__all__ = ["no_provider_environment"]  # the fixture


def test_mentions_and_pasted_paths(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(png())
    spaced = tmp_path / "my shot.jpg"
    spaced.write_bytes(b"")
    assert image_paths("what is in @a.png?", tmp_path) == (tmp_path / "a.png",)
    assert image_paths(f"look: '{spaced}'", tmp_path) == (spaced,)
    escaped = str(spaced).replace(" ", "\\ ")
    assert image_paths(f"{escaped} and @a.png, @a.png", tmp_path) == (spaced, tmp_path / "a.png")
    assert image_paths("@missing.webp please", tmp_path) == (tmp_path / "missing.webp",)
    assert image_paths("I like cat.png files and it's fine", tmp_path) == ()
    assert image_paths("see @notes.txt", tmp_path) == ()


def test_a_chat_line_sends_its_image_and_a_missing_one_is_an_error(server, tmp_path) -> None:
    (tmp_path / "shot.png").write_bytes(png(3, 3))
    server.script(Reply.text("A grey square."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        # The line that could not be sent makes the piped run fail, as any failed turn does.
        assert chat.lines("what is in @shot.png?", "and @gone.png?") == 1
        sid = chat.session.session_id
    assert chat.out.getvalue().splitlines()[0] == "A grey square."
    assert "cannot read the image" in chat.err.getvalue() and "gone.png" in chat.err.getvalue()
    (sent,) = server.requests  # the line naming a missing image started no turn
    content = next(m["content"] for m in sent["messages"] if m["role"] == "user")
    assert content[0] == {"type": "text", "text": "what is in @shot.png?"}
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert replay(tmp_path / "home" / "sessions", sid).identical

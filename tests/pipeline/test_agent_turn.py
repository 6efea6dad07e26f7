"""What a turn takes in (``pipeline.agent_turn.take_in``): a caller's history's ``data:`` URL
images are stored on every turn that hands them in, and a text-only history is not walked for
them; a turn with no sinks leaves the runner as it found it."""

from __future__ import annotations

import base64

from effects.images import BlobStore
from pipeline import agent_turn
from pipeline.agent import Agent
from pipeline.agent_turn import take_in
from pipeline.intake import HistoryIntake
from pipeline.testing import CountingIds, FakeClock, ScriptedModel
from tests.images import png

IMAGE = png(4, 3, shade=9)
DATA_URL = f"data:image/png;base64,{base64.b64encode(IMAGE).decode()}"


def _take(history, store, intake):
    return take_in("next", history, decisions=None, images=(), output_type=None,
                   reasoning_effort=None, reasoning_budget=None, store=store, intake=intake)


def test_a_history_s_data_url_image_is_stored_each_turn_it_is_handed_in(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": [{"type": "text", "text": "this"},
                                            {"type": "image_url",
                                             "image_url": {"url": DATA_URL}}]},
               {"role": "assistant", "content": "a grey square"}]
    intake = HistoryIntake()
    taken = _take(history, store, intake).history
    assert taken is not None
    image = taken[2].images[0]
    assert image.sha256 is not None and image.url is None and store.get(image.sha256) == IMAGE
    assert taken[:2] == intake.messages(history)[:2] and taken[3] is intake.messages(history)[3]
    store.path(image.sha256).unlink()  # gone between turns: the next turn stores it again
    again = _take(history, store, intake).history
    assert again == taken and store.get(image.sha256) == IMAGE


def test_a_text_history_is_not_walked_for_images(tmp_path, monkeypatch) -> None:
    stored = []
    monkeypatch.setattr(agent_turn, "stored_message",
                        lambda message, store: stored.append(message) or message)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
               for i in range(50)]
    taken = _take(history, BlobStore.in_home(tmp_path), HistoryIntake()).history
    assert taken is not None and len(taken) == 50 and not stored


def test_a_turn_without_sinks_leaves_the_runner_as_it_is(tmp_path) -> None:
    events = []
    model = ScriptedModel("one", "two", "three")
    with Agent(client=model, home=tmp_path / "home", clock=FakeClock(), ids=CountingIds(),
               tools=[]) as agent:
        agent.run("first")
        runner = agent._runner
        listener, performers = runner.listener, runner.performers
        agent.run("second", on_event=events.append, stream_callback=lambda text: None)
        assert runner.listener is listener and performers.on_delta is None
        seen = len(events)
        agent.run("third")
        assert runner.listener is listener and performers.on_delta is None
        assert performers.on_reasoning is None and performers.output_check is None
    assert len(events) == seen > 0  # the third turn's events went to nobody's sink

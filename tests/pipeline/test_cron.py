"""``mibyan cron``: the schedule (with a fake clock), the jobs file, and a run: the cron
platform's hints, dangerous commands denied even when allow-listed, a log that replays."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.cli.cmd_cron import job_runner
from pipeline.cron import CronStore, is_due, next_run, tick
from pipeline.shell.replay import replay
from pipeline.testing import FakeClock
from stages.errors import UsageError
from stages.log.events import ApprovalAnswered, ToolRan
from tests.fake_openai import Reply
from tests.pipeline.test_cli import mibyan

HOUR = 3600.0


def at(clock: FakeClock) -> dt.datetime:
    return dt.datetime.fromtimestamp(clock.epoch(), tz=dt.UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()  # 2026-01-01T00:00:00Z


class Recorder:
    def __init__(self, fail: str | None = None) -> None:
        self.runs: list[tuple[str, dt.datetime]] = []
        self.fail = fail

    def __call__(self, job, now):
        self.runs.append((job.prompt, now))
        if job.prompt == self.fail:
            raise RuntimeError("the provider is down")
        return f"session-{len(self.runs)}", "ok"


def test_a_job_runs_when_its_time_has_come_and_once_per_fire_time(tmp_path, clock):
    store = CronStore(tmp_path)
    clock.advance(8 * HOUR)
    store.add("0 9 * * *", "morning report", at(clock))
    run = Recorder()
    clock.advance(HOUR - 1)  # 08:59:59
    assert tick(store, at(clock), run) == [] and run.runs == []
    clock.advance(1)  # 09:00:00
    done = tick(store, at(clock), run)
    assert [(j.last_status, j.last_session) for j in done] == [("ok", "session-1")]
    assert tick(store, at(clock), run) == []
    clock.advance(12 * HOUR)
    assert tick(store, at(clock), run) == []
    assert [p for p, _ in run.runs] == ["morning report"]
    job = store.jobs()[0]
    assert next_run(job, at(clock)) == dt.datetime(2026, 1, 2, 9, tzinfo=dt.UTC)


def test_fire_times_missed_while_nothing_ticked_run_once(tmp_path, clock):
    store = CronStore(tmp_path)
    store.add("*/15 * * * *", "poll", at(clock))
    clock.advance(3 * 24 * HOUR)
    run = Recorder()
    assert len(tick(store, at(clock), run)) == 1
    assert tick(store, at(clock), run) == []
    clock.advance(15 * 60)
    assert len(tick(store, at(clock), run)) == 1


def test_one_failing_job_does_not_stop_the_others(tmp_path, clock):
    store = CronStore(tmp_path)
    for prompt in ("first", "broken", "last"):
        store.add("* * * * *", prompt, at(clock))
    clock.advance(60)
    done = tick(store, at(clock), Recorder(fail="broken"))
    assert [j.last_status for j in done] == [
        "ok", "error: RuntimeError: the provider is down", "ok"]
    assert not any(is_due(j, at(clock)) for j in store.jobs())


def test_a_hand_edited_job_that_cannot_be_read_does_not_stop_the_others(tmp_path, clock):
    store = CronStore(tmp_path)
    for prompt in ("first", "edited", "last"):
        store.add("* * * * *", prompt, at(clock))
    data = json.loads(store.path.read_text())
    data["jobs"][1]["schedule"] = "every minute please"
    store.path.write_text(json.dumps(data))
    clock.advance(60)
    run = Recorder()
    done = tick(store, at(clock), run)
    assert [j.prompt for j in done] == ["first", "last"] and len(run.runs) == 2
    edited = next(j for j in store.jobs() if j.prompt == "edited")
    assert edited.last_status is not None and edited.last_status.startswith(
        "error: cannot read this job: CronSimError")
    assert edited.last_run is None
    home = tmp_path  # the store's home: mibyan cron list shows the job, not a traceback
    listed = mibyan(home, "cron", "list")
    assert listed.returncode == 0, listed.stderr
    assert "next (unreadable)" in listed.stdout and "error: cannot read this job" in listed.stdout


def test_a_job_is_marked_run_before_it_runs(tmp_path, clock):
    """A tick that dies mid-run does not run the job again at the next tick."""
    store = CronStore(tmp_path)
    store.add("* * * * *", "crashy", at(clock))
    clock.advance(60)

    def dies(job, now):
        assert store.jobs()[0].last_status == "running"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tick(store, at(clock), dies)
    assert tick(store, at(clock), Recorder()) == []


# Six fields are cronsim's seconds-first form: "*/5 * * * * *" would fire every 5 seconds.
@pytest.mark.parametrize("schedule", ["bad", "0 9 * *", "61 * * * *", "* * * * * * *",
                                      "*/5 * * * * *"])
def test_a_bad_schedule_is_a_usage_error(tmp_path, clock, schedule):
    with pytest.raises(UsageError, match="not a cron schedule"):
        CronStore(tmp_path).add(schedule, "x", at(clock))
    assert CronStore(tmp_path).jobs() == []


def test_a_job_run_now_that_fails_says_so_in_its_status(tmp_path, clock, monkeypatch):
    import argparse

    from pipeline.cli import cmd_cron
    store = CronStore(tmp_path)
    job = store.add("0 9 * * *", "broken", at(clock))
    monkeypatch.setattr(cmd_cron, "job_runner", lambda *a, **k: Recorder(fail="broken"))
    monkeypatch.setattr(cmd_cron, "_now", lambda: at(clock))
    args = argparse.Namespace(job=job.id, workdir=None, toolsets=None, model=None,
                              base_url=None, provider=None)
    assert cmd_cron._run(store, args, tmp_path) == cmd_cron.EXIT_FAILED
    [after] = store.jobs()
    assert after.last_status == "error: RuntimeError: the provider is down"
    assert after.last_run == at(clock).isoformat() and after.last_session is None


def test_remove_and_its_errors(tmp_path, clock):
    store = CronStore(tmp_path)
    job = store.add("0 9 * * *", "x", at(clock))
    with pytest.raises(UsageError, match="needs a prompt"):
        store.add("0 9 * * *", "  ", at(clock))
    with pytest.raises(UsageError, match="no cron job"):
        store.remove("nope")
    assert store.remove(job.id) == job and store.jobs() == []


def _events(home, session_id):
    path = session_path(home / "sessions", session_id)
    return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]


def test_a_cron_run_has_the_cron_hints_and_denies_dangerous_commands(server, home, tmp_path,
                                                                      clock):
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True)
    # Even a pattern allowed "always" in interactive sessions is denied: nobody is watching.
    home.mkdir(parents=True)
    (home / "approvals.json").write_text(json.dumps({"always": ["recursive_delete"]}))
    server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf build"}')],
                                   ids=["call_rm"]),
                  Reply.text("Could not clean up: denied."))
    store = CronStore(home)
    store.add("0 * * * *", "clean the build directory", at(clock))
    clock.advance(HOUR)
    runner = job_runner(home, workdir=work, toolsets=("terminal",), model="fake",
                        base_url=server.base_url, api_key="sk-cron-test-0123456789",
                        clock=clock, durability="flush")
    [job] = tick(store, at(clock), runner)
    assert job.last_status == "ok" and (work / "build").is_dir()
    events = _events(home, job.last_session)
    assert "scheduled job with nobody watching" in server.requests[0]["messages"][0]["content"]
    assert [(a.pattern, a.choice, a.source) for a in events
            if isinstance(a, ApprovalAnswered)] == [("recursive_delete", "deny", "default")]
    assert not any(isinstance(e, ToolRan) and e.outcome.ok for e in events)
    output = home / "cron" / "output" / job.id / "20260101T010000.md"
    assert output.read_text() == "Could not clean up: denied."
    assert output.stat().st_mode & 0o777 == 0o600  # issue 25: it was 0644
    assert replay(home / "sessions", job.last_session).identical


def test_the_cron_command_adds_lists_and_removes(home):
    added = mibyan(home, "cron", "add", "30 7 * * 1-5", "weekday digest")
    assert added.returncode == 0, added.stderr
    job_id = added.stdout.split()[1].rstrip(":")
    listed = mibyan(home, "cron", "list")
    assert job_id in listed.stdout and "30 7 * * 1-5" in listed.stdout
    assert "weekday digest" in listed.stdout and "(1 job)" in listed.stdout
    bad = mibyan(home, "cron", "add", "every morning", "x")
    assert bad.returncode == 2 and "not a cron schedule" in bad.stderr
    removed = mibyan(home, "cron", "remove", job_id)
    assert removed.returncode == 0 and mibyan(home, "cron", "list").stdout.strip() == "(0 jobs)"
    assert mibyan(home, "cron", "remove", job_id).returncode == 2


def test_a_job_added_with_a_model_runs_on_it_whatever_is_set_when_it_fires(server, home,
                                                                          tmp_path, clock):
    # Issue 25: cron add had no --model; a job failed unless MIBYAN_MODEL was set at its time.
    added = mibyan(home, "cron", "add", "0 * * * *", "say hi", "--model", "job-model",
                   "--base-url", server.base_url)
    assert added.returncode == 0, added.stderr
    [job] = CronStore(home).jobs()
    assert (job.model, job.base_url) == ("job-model", server.base_url)
    server.script(Reply.text("hi"))
    clock.advance(HOUR)
    runner = job_runner(home, workdir=tmp_path, api_key="sk-cron-test-0123456789",
                        clock=clock, durability="flush")
    # The command stamps the job with the real time; it is due within the hour after it.
    [ran] = tick(CronStore(home), dt.datetime.now().astimezone() + dt.timedelta(hours=1),
                 runner)
    assert ran.last_status == "ok", ran.last_status
    assert server.requests[0]["model"] == "job-model"

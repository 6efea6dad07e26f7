"""``delegate_task``: the model hands tasks to child agents (subagents).

    delegation = Delegation()
    agent = Agent(model=..., tools=[*builtin_tools("."), delegation.tool])
    delegation.attach(agent)

Each task runs in a child of the attached agent (``Agent.child``): its own session, linked to
the parent's (``parent_session_id``), a budget capped at ``delegation_max_iterations``, the
parent's tools without ``delegate_task``, ``clarify``, ``memory`` and ``todo`` (no further
delegation, no questions to the user, no memory writes, no changes to the parent's task list),
and approvals denied. Several tasks run in parallel,
at most ``max_concurrent`` (3) at a time. The parent reads each child's summary (its final
answer) as the tool's result, which the parent's log keeps, so the parent replays without its
children; each child's own session replays on its own. Interrupting the parent interrupts the
children it is waiting for. ``progress`` (optional) hears every event of every child, with the
child's goal, as it happens (the chat shows a subagent's progress under its parent's call).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from effects.tools.workspace import ToolError
from pipeline.tools import Tool

if TYPE_CHECKING:
    from pipeline.agent import Agent
    from pipeline.result import TurnResult
    from stages.log.events import Event

# Hears each child's events, with the child's goal (a chat shows them under the parent's call).
Progress = Callable[[str, "Event"], None]

__all__ = ["CHILD_EXCLUDED_TOOLS", "MAX_CONCURRENT_CHILDREN", "MAX_TASKS", "Delegation"]

MAX_CONCURRENT_CHILDREN = 3
MAX_TASKS = 10
# No further delegation, no questions to a user, no memory writes; and no todo, whose list
# belongs to the parent's session (a child's calls would write into it).
CHILD_EXCLUDED_TOOLS = frozenset({"delegate_task", "clarify", "memory", "todo"})
_WAIT_SLICE = 0.05
CHILD_SYSTEM = ("You are a subagent working on one task for another agent. Work on your own: "
                "nobody can answer questions. End with a short summary of what you did and "
                "found; that summary is all the other agent will read.")


class Delegation:
    def __init__(self, *, max_concurrent: int = MAX_CONCURRENT_CHILDREN,
                 child_max_turns: int | None = None, progress: Progress | None = None) -> None:
        self.max_concurrent = max_concurrent
        self.child_max_turns = child_max_turns
        self.progress = progress
        self._parent: Agent | None = None
        self._lock = threading.Lock()
        self.children: list[Agent] = []
        self.tool = Tool.from_function(self.delegate_task)

    def attach(self, parent: Agent) -> Delegation:
        self._parent = parent
        return self

    def delegate_task(self, goal: str | None = None, context: str | None = None,
                      tasks: list[dict[str, str]] | None = None) -> dict[str, object]:
        """Hand one task, or several to run in parallel, to subagents, and get their summaries.

        Args:
            goal: The task for one subagent, complete in itself.
            context: What the subagent needs to know (files, findings, constraints): it sees
                nothing of this conversation.
            tasks: Several tasks, each {"goal": ..., "context": ...}, run in parallel.
        """
        if self._parent is None:
            raise ToolError("delegation is not attached to an agent")
        jobs = [{"goal": goal, "context": context or ""}] if goal else list(tasks or ())
        if not jobs or any(not isinstance(j, dict) or not j.get("goal") for j in jobs):
            raise ToolError('give a goal, or tasks that each have a "goal"')
        if len(jobs) > MAX_TASKS:
            raise ToolError(f"at most {MAX_TASKS} tasks at once, got {len(jobs)}")
        return {"results": self._run_all(self._parent, jobs)}

    def _run_all(self, parent: Agent, jobs: list[dict[str, str]]) -> list[dict[str, object]]:
        with ThreadPoolExecutor(max_workers=self.max_concurrent,
                                thread_name_prefix="mibyan-child") as pool:
            futures = [pool.submit(self._run_one, parent, job) for job in jobs]
            self._wait(parent, futures)
            return [future.result() for future in futures]

    def _wait(self, parent: Agent, futures: list[Future[dict[str, object]]]) -> None:
        """Wait for the children; an interrupt of the parent is passed on to them."""
        pending: set[Future[dict[str, object]]] = set(futures)
        while pending:
            _, pending = wait(pending, timeout=_WAIT_SLICE)
            if pending and parent.interrupt_requested:
                with self._lock:
                    for child in self.children:
                        child.interrupt()

    def _run_one(self, parent: Agent, job: dict[str, str]) -> dict[str, object]:
        tools = [t for t in parent.registry if t.name not in CHILD_EXCLUDED_TOOLS]
        progress = self.progress
        listener = None if progress is None else lambda event: progress(job["goal"], event)
        child = parent.child(max_turns=self.child_max_turns, tools=tools,
                             event_listener=listener)
        with self._lock:
            self.children.append(child)
        message = job["goal"] if not job.get("context") else \
            f"{job['goal']}\n\nContext:\n{job['context']}"
        try:
            if parent.interrupt_requested:
                return _summary(job, child, None, "interrupted before it started")
            result = child.run(message, system_message=CHILD_SYSTEM)
        except Exception as exc:
            return _summary(job, child, None, f"{type(exc).__name__}: {exc}")
        finally:
            child.close()
        return _summary(job, child, result, None)


def _summary(job: dict[str, str], child: Agent, result: TurnResult | None,
             error: str | None) -> dict[str, object]:
    found: dict[str, Any] = {"goal": job["goal"], "session_id": child.session_id}
    if result is None:
        return {**found, "completed": False, "error": error}
    return {**found, "summary": result.final_response or "", "completed": result.completed,
            "interrupted": result.interrupted, "api_calls": result.api_calls,
            "error": result.error}

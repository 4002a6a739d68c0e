"""One look at a pending node, and its waits across polls, each with its own budget.

A node that needs a restart but is not ready is waited for, not restarted: since its last
progress while not ready (the operation timeout: `readiness`), its log recovery (its rate and
stalls, never restarted), and how long its agent has been unreadable (unknown, waited for within
the safety budget). Waiting for one node does not hold the poll: the loop may restart others
meanwhile when the safety rules allow (not while a node of the roll is in log recovery or on its
way back, STARTING or RECOVERY: `decide.held_by_recovery`), and this node's wait goes on at the
next poll. Nothing
here writes the roll journal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rollguard.roller.model import (
    AgentReport,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
)
from rollguard.roller.roll.after_restart import AfterRestart, NotBack, Progress
from rollguard.roller.roll.decide import (
    Action,
    AwaitRecovery,
    AwaitUnknown,
    Defer,
    Fail,
    Restart,
    decide,
)
from rollguard.roller.roll.progress import RecoveryTracker, format_duration
from rollguard.roller.roll.readiness import ReadyWait
from rollguard.roller.roll.settings import OnAgentUnreachable, RollFailed
from rollguard.roller.roll.waits import ProgressWait
from rollguard.shared.dataset import Event


@dataclass(slots=True)
class _NodeWait:
    ready: ReadyWait  # not ready since, and its last progress (the operation timeout's start)
    unknown: ProgressWait | None = None  # its agent unreadable since
    recovery: RecoveryTracker | None = None


class PendingWaits:
    def __init__(
        self,
        after: AfterRestart,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_progress: Progress | None = None,
    ) -> None:
        self.after = after  # its settings, its observer, and the one recovery judgement
        self._clock = clock
        self._on_progress = on_progress or (lambda node, text, tracker: None)
        self._waits: dict[str, _NodeWait] = {}

    def forget(self, node: Node) -> None:
        self._waits.pop(node.name, None)

    async def look(self, node: Node, view: PlatformView, cluster: ClusterView | None) -> Action:
        """The action for `node` now; RollFailed when a wait's budget is spent or the rules say
        the roll cannot go on (`Fail`)."""
        s = self.after.settings
        observer = self.after.observer
        answer = None
        wait = None
        if view.ready:
            self.forget(node)
        else:  # ask its agent at once and at every poll, not after a timeout
            answer = await observer.ask(node)
            wait = self._waits.get(node.name)
            if wait is None:
                found = self.after.ready_wait(node, view.instance, "it was found not ready")
                wait = self._waits[node.name] = _NodeWait(found)
            wait.ready = wait.ready.observe(self._clock(), view.instance, answer)
        action = decide(
            node,
            view,
            cluster,
            agent=answer,
            waited=wait.ready.waited(self._clock()) if wait else 0.0,
            timeout=s.operation_timeout,
            force_unknown=s.on_agent_unreachable is OnAgentUnreachable.FORCE,
            since=wait.ready.since if wait else "it was found not ready",
        )
        if wait is not None:
            if isinstance(answer, AgentReport) and not is_recovering(answer):
                wait.recovery = None  # out of recovery, by its own word
            if not isinstance(action, AwaitUnknown):
                wait.unknown = None
        if isinstance(action, Restart):
            self.forget(node)
        elif isinstance(action, Fail):
            raise RollFailed(action.reason)
        elif isinstance(action, Defer):
            observer.say(node.name, "defer", Event.DEFER, action.reason, kind=action.kind)
        elif isinstance(action, AwaitRecovery):
            assert wait is not None
            wait.recovery = wait.recovery or self.after.tracker(node)
            stop = self.after.recovery_step(node, wait.recovery, answer)
            if isinstance(stop, NotBack):
                raise RollFailed(stop.reason)
        else:  # AwaitReady, AwaitUnknown
            if isinstance(action, AwaitUnknown):
                assert wait is not None
                now = self._clock()
                wait.unknown = wait.unknown or ProgressWait(s.safety_wait, now)
                if wait.unknown.expired(now):
                    raise RollFailed(
                        f"{action.reason}; waited {format_duration(wait.unknown.waited(now))} "
                        "(--safety-wait). Restart it by hand once you know it is not "
                        "recovering, or use --on-agent-unreachable force"
                    )
            observer.say(node.name, "wait", Event.WAIT_READY, action.reason, kind=action.kind)
            self._on_progress(node, f"waiting for readiness: {describe_answer(answer)}", None)
        return action

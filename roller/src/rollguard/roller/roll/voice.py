"""What each look at a node means, said: the live view, the log, the events.

The roll loop (`roller.py`) observes, `rules.node_wait.step` judges, and the loop hands the
outcome here to be said; nothing here decides or writes the roll journal. A wait is said once
per change of its reason (`EventLog.say`); a recovery at every look, with its figures.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rollguard.roller.model import AgentAnswer, Node, describe_answer
from rollguard.roller.roll.rules.budgets import RecoveryTracker, Verdict
from rollguard.roller.roll.rules.decide import AwaitReady, AwaitRecovery, AwaitUnknown, Back, Defer
from rollguard.roller.roll.rules.node_wait import AwaitIsr, Done, NodeWait, Step
from rollguard.roller.roll.stores.events import EventLog
from rollguard.shared.dataset import Event

logger = logging.getLogger(__name__)

# The live view's line for a node: its text, and its recovery's figures when it recovers.
Progress = Callable[[Node, str, RecoveryTracker | None], None]


class Voice:
    def __init__(self, events: EventLog, on_progress: Progress | None = None) -> None:
        self.events = events
        self.progress: Progress = on_progress or (lambda node, text, tracker: None)

    def look(
        self, node: Node, before: NodeWait | None, done: Step, answer: AgentAnswer | None
    ) -> None:
        """One look at `node` (`before`: what the last look left), said."""
        action = done.action
        if isinstance(action, AwaitRecovery):
            assert done.wait is not None and done.wait.recovery is not None
            assert done.verdict is not None
            self.recovery(node, done.wait.recovery, done.verdict)
        if before is None or not before.restarted:
            self._pending(node, done, answer)
        else:
            self._back(node, before, done, answer)

    def _pending(self, node: Node, done: Step, answer: AgentAnswer | None) -> None:
        action = done.action
        if done.failure is not None:
            return
        if isinstance(action, Defer):
            self.events.say(node.name, "defer", Event.DEFER, action.reason, kind=action.kind)
        elif isinstance(action, AwaitReady | AwaitUnknown):
            self.events.say(node.name, "wait", Event.WAIT_READY, action.reason, kind=action.kind)
            self.progress(node, f"waiting for readiness: {describe_answer(answer)}", None)

    def _back(self, node: Node, before: NodeWait, done: Step, answer: AgentAnswer | None) -> None:
        action = done.action
        if isinstance(action, Back):
            if node.is_controller and not before.base.voter_caught_up:
                logger.info("%s: its voter was not caught up before its restart", node)
        elif isinstance(action, AwaitIsr | Done) and action.already:
            self.events.say(node.name, "out-of-sync", Event.OUT_OF_SYNC_BEFORE, action.already)
        if (
            done.failure is not None
            or done.at_once
            or isinstance(action, Back | Done | AwaitRecovery)
        ):
            return
        if isinstance(action, AwaitIsr):
            if action.lagging:
                self.events.say(
                    node.name, "catch-up", Event.CATCH_UP, action.reason, count=action.lagging
                )
                self.progress(node, action.reason, None)
            return
        text = action.reason
        if isinstance(action, AwaitUnknown):
            text = f"waiting for readiness: {describe_answer(answer)}"
        self.progress(node, text, None)

    def recovery(self, node: Node, tracker: RecoveryTracker, verdict: Verdict) -> None:
        """One look at a recovering broker, said: the live view, the log, a `wait-recovery`
        event with its figures."""
        text = tracker.describe()
        self.progress(node, "recovering: " + text, tracker)
        logger.info("%s is performing log recovery: %s", node, text)
        self.events.write(node.name, Event.WAIT_RECOVERY, verdict.value, **_figures(tracker))

    def defer(self, node: Node, defer: Defer) -> Defer:
        self.events.say(node.name, "defer", Event.DEFER, defer.reason, kind=defer.kind)
        return defer


def _figures(tracker: RecoveryTracker) -> dict[str, float | int | None]:
    if not tracker.points:
        return {}
    last = tracker.points[-1]
    return {
        "remainingLogsToRecover": last.logs,
        "remainingSegmentsToRecover": last.segments,
        "rate": tracker.rate(),
        "eta": tracker.eta(),
    }

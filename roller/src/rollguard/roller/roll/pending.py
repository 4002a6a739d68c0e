"""One look at a pending node, and its waits across polls (`node_wait`: the record and the one
step that judges every budget).

A node that needs a restart but is not ready is waited for, not restarted: since its last
progress while not ready (the operation timeout: `readiness`), its log recovery (its rate and
stalls, never restarted), and how long its agent has been unreadable (unknown, waited for within
the safety budget). Waiting for one node does not hold the poll: the loop may restart others
meanwhile when the safety rules allow (not while a node of the roll is in log recovery or on its
way back, STARTING or RECOVERY: `decide.held_by_recovery`), and this node's wait goes on at the
next poll. Nothing here writes the roll journal.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rollguard.roller.model import ClusterView, Node, PlatformView, describe_answer
from rollguard.roller.roll.after_restart import AfterRestart, Progress
from rollguard.roller.roll.rules.decide import (
    Action,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    Fail,
)
from rollguard.roller.roll.rules.node_wait import AwaitIsr, AwaitQuorum, Done, NodeWait, step
from rollguard.shared.dataset import Event


class PendingWaits:
    def __init__(
        self,
        after: AfterRestart,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_progress: Progress | None = None,
    ) -> None:
        self.after = after  # its settings, its observer, and how a recovery is said
        self._clock = clock
        self._on_progress = on_progress or (lambda node, text, tracker: None)
        self._waits: dict[str, NodeWait] = {}

    def forget(self, node: Node) -> None:
        self._waits.pop(node.name, None)

    async def look(self, node: Node, view: PlatformView, cluster: ClusterView | None) -> Action:
        """The action for `node` now; `Fail` when a wait's budget is spent or the rules say the
        roll cannot go on (the loop stops the roll: `Roller._poll`)."""
        observer = self.after.observer
        # A node that is not ready: its agent asked at once and at every poll, not after a timeout.
        answer = None if view.ready else await observer.ask(node)
        now = self._clock()
        done = step(
            self._waits.get(node.name), node, view, answer, cluster, now, self.after.settings
        )
        if done.wait is None:
            self.forget(node)
        else:
            self._waits[node.name] = done.wait
        action = done.action
        assert not isinstance(action, Back | AwaitQuorum | AwaitIsr | Done)  # restarted only
        if isinstance(action, AwaitRecovery):
            assert done.wait is not None and done.wait.recovery is not None
            assert done.verdict is not None
            self.after.say_recovery(node, done.wait.recovery, done.verdict)
        if done.failure is not None:
            return Fail(done.failure)
        if isinstance(action, Defer):
            observer.say(node.name, "defer", Event.DEFER, action.reason, kind=action.kind)
        elif isinstance(action, AwaitReady | AwaitUnknown):
            observer.say(node.name, "wait", Event.WAIT_READY, action.reason, kind=action.kind)
            self._on_progress(node, f"waiting for readiness: {describe_answer(answer)}", None)
        return action

"""Everything after a restart, until the node is back where it was before it.

    the new process (by identity) ready; its log recovery waited for, never restarted
    -> controllers: the voter caught up with the quorum leader (if it was before)
    -> brokers: back in the ISR of every partition it was in before (not those it was
       already out of: a restart cannot take away what was not there)

`AfterRestart.wait` observes, `node_wait.step` judges each look (its phases and every budget:
readiness, recovery, an unreadable agent, the cluster's progress), and this module says what
each look means. Each wait returns an outcome, `Rejoined` or `Fail` with the reason; it never
writes the roll journal and never raises for the roll: the loop (`roller.py`) records the
outcome and decides. A batch's preferred leaders are given back here too: leadership balance is
not safety, so that one only logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rollguard.roller.model import AgentAnswer, Node, describe_answer
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.rules.decide import AwaitRecovery, AwaitUnknown, Back, Fail
from rollguard.roller.roll.rules.node_wait import AwaitIsr, Done, NodeWait, Phase, Step, step
from rollguard.roller.roll.rules.progress import RecoveryTracker, Verdict
from rollguard.roller.roll.rules.safety import (
    Baseline,
    unbalanced,
)
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.roller.roll.rules.waits import ProgressWait
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import RollguardError

logger = logging.getLogger(__name__)

Progress = Callable[[Node, str, RecoveryTracker | None], None]
# A preferred leader election of these (topic, partition)s; RollguardError when it fails.
LeaderElection = Callable[[Sequence[tuple[str, int]]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Rejoined:
    node: Node
    note: str = ""  # what it was already out of before its restart, if anything


class AfterRestart:
    def __init__(
        self,
        observer: Observer,
        settings: RollSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_progress: Progress | None = None,
        elect_leaders: LeaderElection | None = None,
    ) -> None:
        self.observer = observer
        self.settings = settings
        self._clock = clock
        self._sleep = sleep
        self._on_progress = on_progress or (lambda node, text, tracker: None)
        self.elect_leaders = elect_leaders

    async def wait(self, node: Node, before: str | None, base: Baseline) -> Rejoined | Fail:
        """Until `node` is back where it was: `before` is its identity before the restart (None:
        unknown), `base` where it stood in the cluster. Each look observes what its phase
        needs (`node_wait`: the platform, Kafka and its agent while it comes back; only its
        agent while it recovers its logs; Kafka after) and `node_wait.step` judges it."""
        wait = NodeWait.after_restart(node, self.settings, self._clock(), before, base)
        view = answer = cluster = None
        while True:
            if not wait.watching_recovery:
                cluster = await self.observer.cluster()
            if wait.phase is Phase.READY and not wait.watching_recovery:
                view = await self.observer.view(node, cluster)
            answer = await self.observer.ask(node) if wait.asks_agent else None
            done = step(wait, node, view, answer, cluster, self._clock(), self.settings)
            self._say(node, wait, done, answer)
            if done.failure is not None:  # a rule's own Fail, or a budget spent
                return done.action if isinstance(done.action, Fail) else Fail(done.failure)
            if isinstance(done.action, Done):
                return Rejoined(node, done.action.note)
            assert done.wait is not None
            wait = done.wait
            if not done.at_once:
                await self._sleep(self.settings.poll_interval)

    def _say(self, node: Node, wait: NodeWait, done: Step, answer: AgentAnswer | None) -> None:
        """What one look after the restart means, said: the live view, the log, the events."""
        action, failed = done.action, done.failure is not None
        if isinstance(action, AwaitRecovery):
            assert done.wait is not None and done.wait.recovery is not None
            assert done.verdict is not None
            self.say_recovery(node, done.wait.recovery, done.verdict)
        elif isinstance(action, Back):
            if node.is_controller and not wait.base.voter_caught_up:
                logger.info("%s: its voter was not caught up before its restart", node)
        elif isinstance(action, AwaitIsr | Done) and action.already:
            self.observer.say(node.name, "out-of-sync", Event.OUT_OF_SYNC_BEFORE, action.already)
        if failed or done.at_once or isinstance(action, Back | Done | AwaitRecovery):
            return
        if isinstance(action, AwaitIsr):
            if action.lagging:
                self.observer.say(
                    node.name, "catch-up", Event.CATCH_UP, action.reason, count=action.lagging
                )
                self._on_progress(node, action.reason, None)
            return
        text = action.reason
        if isinstance(action, AwaitUnknown):
            text = f"waiting for readiness: {describe_answer(answer)}"
        self._on_progress(node, text, None)

    async def on_record(
        self, node: Node, before: str | None, base: Baseline
    ) -> Rejoined | Fail | None:
        """Resume: `node`'s restart is on record (its identity then, `before`) but not its
        outcome. Judged by identity: changed (or a new one on its way) means it restarted, so
        wait for it as `wait` does; unchanged means the restart never happened: None, and the
        node goes back to the pending ones (and the safety checks)."""
        s, platform = self.settings, self.observer.platform
        waiting = ProgressWait(s.safety_wait, self._clock())
        while await platform.restart_pending(node):
            # The earlier roller's restart command still runs: judge the node once it is done.
            self._on_progress(node, "an earlier restart command is still running", None)
            if waiting.expired(self._clock()):
                return Fail(
                    f"{node.name}: the restart command of the interrupted roll still runs after "
                    f"{format_duration(s.safety_wait)}; not acting on it"
                )
            await self._sleep(s.poll_interval)
        view = await self.observer.platform_view(node)
        if before is not None and view.instance == before:
            logger.warning("%s: the restart on record did not happen; it is pending again", node)
            self.observer.events.write(node.name, Event.RESTART_NOT_OBSERVED, "identity unchanged")
            return None
        logger.info("%s: restart on record; waiting for it, not restarting", node)
        return await self.wait(node, before, base)

    def say_recovery(self, node: Node, tracker: RecoveryTracker, verdict: Verdict) -> None:
        """One look at a recovering broker, said: the live view, the log, a `wait-recovery`
        event with its figures."""
        text = tracker.describe()
        self._on_progress(node, "recovering: " + text, tracker)
        logger.info("%s is performing log recovery: %s", node, text)
        self.observer.events.write(
            node.name, Event.WAIT_RECOVERY, verdict.value, **_figures(tracker)
        )

    async def elect_preferred(self, members: Sequence[Node], number: int) -> None:
        """Give the batch's members back the leadership they lost (ElectLeaders, preferred),
        and watch it come back for a moment. Leadership balance is not safety: a failed
        election or a slow one is logged, never fatal."""
        s = self.settings
        if not s.elect_preferred_leaders or self.elect_leaders is None:
            return
        ids = {m.node_id for m in members}
        cluster = await self.observer.cluster()
        wanted = unbalanced(cluster, ids) if cluster is not None else []
        if not wanted:
            return
        try:
            await self.elect_leaders(wanted)
        except RollguardError as exc:
            self.observer.say(
                None, "elect", Event.ELECT_FAILED, f"batch {number}: {exc}", logging.WARNING
            )
            return
        self.observer.events.write(
            None, Event.ELECT_LEADERS, f"batch {number}", partitions=len(wanted)
        )
        deadline = self._clock() + s.election_wait
        while True:
            cluster = await self.observer.cluster()
            left = unbalanced(cluster, ids) if cluster is not None else wanted
            if not left:
                return
            if self._clock() >= deadline:
                logger.warning(
                    "batch %d: %d partitions not yet led by their preferred leader after %s",
                    number,
                    len(left),
                    format_duration(s.election_wait),
                )
                return
            await self._sleep(s.poll_interval)


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

"""Everything after a restart, until the node is back where it was before it.

    the new process (by identity) ready; its log recovery waited for, never restarted
    -> controllers: the voter caught up with the quorum leader (if it was before)
    -> brokers: back in the ISR of every partition it was in before (not those it was
       already out of: a restart cannot take away what was not there)

Each wait returns an outcome, `Rejoined` or `Fail` with the reason; it never writes the
roll journal and never raises for the roll: the loop (`roller.py`) records the outcome and
decides. Waiting for the cluster is judged by progress (`ProgressWait`, `--safety-wait`);
waiting for a recovery by its rate and stalls (`RecoveryTracker`). A batch's preferred leaders
are given back here too: leadership balance is not safety, so that one only logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rollguard.roller.model import Node, describe_answer
from rollguard.roller.roll.decide import AwaitRecovery, AwaitUnknown, Back, Fail
from rollguard.roller.roll.node_wait import NodeWait, step
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.progress import RecoveryTracker, Verdict, format_duration
from rollguard.roller.roll.safety import (
    Baseline,
    describe_partitions,
    rejoining,
    unbalanced,
    voter_caught_up,
    voter_lag,
)
from rollguard.roller.roll.settings import RollSettings
from rollguard.roller.roll.waits import ProgressWait
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
        unknown), `base` where it stood in the cluster."""
        failed = await self._ready(node, before)
        if failed is None and node.is_controller:
            if base.voter_caught_up:
                failed = await self._quorum(node)
            else:
                logger.info("%s: its voter was not caught up before its restart", node)
        if failed is not None:
            return failed
        return await self._isr(node, base) if node.is_broker else Rejoined(node)

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

    async def _ready(self, node: Node, before: str | None) -> Fail | None:
        """Until the new process is ready (`node_wait.step` judges every budget on the way);
        while it recovers its logs, only its agent is asked."""
        wait = NodeWait.after_restart(node, self.settings, self._clock(), before)
        view = None
        while True:
            if not wait.watching_recovery:
                view = await self.observer.view(node, await self.observer.cluster())
            answer = await self.observer.ask(node)
            done = step(wait, node, view, answer, None, self._clock(), self.settings)
            assert done.wait is not None
            wait, action = done.wait, done.action
            if isinstance(action, AwaitRecovery):
                assert wait.recovery is not None and done.verdict is not None
                self.say_recovery(node, wait.recovery, done.verdict)
            if done.failure is not None:
                return Fail(done.failure)
            if isinstance(action, Back):
                return None
            if done.at_once:
                continue
            if not isinstance(action, AwaitRecovery):
                text = action.reason
                if isinstance(action, AwaitUnknown):
                    text = f"waiting for readiness: {describe_answer(answer)}"
                self._on_progress(node, text, None)
            await self._sleep(self.settings.poll_interval)

    def say_recovery(self, node: Node, tracker: RecoveryTracker, verdict: Verdict) -> None:
        """One look at a recovering broker, said: the live view, the log, a `wait-recovery`
        event with its figures."""
        text = tracker.describe()
        self._on_progress(node, "recovering: " + text, tracker)
        logger.info("%s is performing log recovery: %s", node, text)
        self.observer.events.write(
            node.name, Event.WAIT_RECOVERY, verdict.value, **_figures(tracker)
        )

    async def _quorum(self, node: Node) -> Fail | None:
        """Until the controller's new process has fetched from the leader: a caught-up time
        later than the leader's time when it came back (the leader's clock on both sides).
        Budgeted as every wait for the cluster, by progress (`--safety-wait` without any): a
        voter back from a long restart fetches the metadata log it missed for as long as its
        lag behind the leader keeps shrinking."""
        since: int | None = None
        waiting = ProgressWait(self.settings.safety_wait, self._clock())
        while True:
            cluster = await self.observer.cluster()
            quorum = cluster.quorum if cluster is not None else None
            lag = None
            if quorum is not None and node.node_id not in {v.node_id for v in quorum.voters}:
                return None  # not a voter (an observer or a broker-only id): nothing to wait for
            if quorum is not None and cluster is not None:
                leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
                if since is None and leader is not None:
                    since = leader.last_caught_up_ms
                if since is not None and voter_caught_up(
                    node.node_id, quorum, cluster.quorum_fetch_timeout_ms, since_ms=since
                ):
                    return None
                lag = voter_lag(node.node_id, quorum)
            now = self._clock()
            if lag is not None:
                waiting.observe(now, lag)
            if waiting.expired(now):
                return Fail(f"{node.name} has not caught up with the KRaft quorum leader "
                    f"{format_duration(waiting.waited(now))} after its restart"
                    + (f" ({lag} records behind, no progress for "
                       f"{format_duration(self.settings.safety_wait)})" if lag else ""),
                )  # fmt: skip
            behind = f": {lag} records behind the leader" if lag else ""
            self._on_progress(node, f"catching up with the quorum{behind}", None)
            await self._sleep(self.settings.poll_interval)

    async def _isr(self, node: Node, base: Baseline) -> Rejoined | Fail:
        """Until the restarted broker is back in the ISR of every partition it was in before:
        until then, restarting another replica of those could take them below min ISR."""
        waiting = ProgressWait(self.settings.safety_wait, self._clock())
        note = ""
        while True:
            cluster = await self.observer.cluster()
            lagging = None
            if cluster is not None:
                lagging, already = rejoining(node.node_id, cluster, base)
                if already:
                    note = f"already out of sync before its restart: {describe_partitions(already)}"
                    self.observer.say(node.name, "out-of-sync", Event.OUT_OF_SYNC_BEFORE, note)
                if not lagging:
                    return Rejoined(node, note)
            now = self._clock()
            if lagging is not None:
                waiting.observe(now, len(lagging))
            if waiting.expired(now):
                what = (
                    f"{len(lagging)} partitions ({describe_partitions(lagging)})"
                    if lagging
                    else "its partitions (the Admin API cannot be reached)"
                )
                return Fail(
                    f"{node.name} has not rejoined the ISR of {what}: no progress for "
                    f"{format_duration(self.settings.safety_wait)} (--safety-wait)",
                )
            if lagging:
                text = f"catching up: {len(lagging)} partitions not yet in sync"
                self.observer.say(node.name, "catch-up", Event.CATCH_UP, text, count=len(lagging))
                self._on_progress(node, text, None)
            await self._sleep(self.settings.poll_interval)

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

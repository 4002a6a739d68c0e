"""What the roll does to the cluster and writes in its journal: a restart (every intent and
baseline saved before the first restart command), a node back, a node failed, a node left out,
a restart on record found again on resume, a batch's preferred leaders given back.

The journal is the one record of intent and outcome, and only this module writes it (through
`Restarts.save`, which waits out an API server that does not answer, as every platform call
does). The roll loop (`roller.py`) decides when; nothing here waits for a node to come back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from rollguard.roller.model import ClusterView, Node, PlatformView
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.rules.batch import Batch
from rollguard.roller.roll.rules.budgets import ProgressWait
from rollguard.roller.roll.rules.safety import Baseline, baseline, unbalanced
from rollguard.roller.roll.rules.settings import RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import (
    JournalStore,
    NodeRecord,
    NodeStatus,
    RollRecord,
    RollState,
)
from rollguard.roller.roll.voice import Voice, Wall, now_text
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import RollguardError

logger = logging.getLogger(__name__)

# A preferred leader election of these (topic, partition)s; RollguardError when it fails.
LeaderElection = Callable[[Sequence[tuple[str, int]]], Awaitable[None]]


@dataclass
class RollResult:
    roll_id: str
    state: RollState
    reason: str = ""
    restarted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # --hold: for a later `roll --resume`
    configured: list[str] = field(default_factory=list)  # changed live, not restarted


@dataclass
class Started:
    """One restart (one node, or a batch's members together) on its way back; on resume, the
    restarts on record that did happen."""

    members: list[Node]  # restarted: on their way back
    before: dict[str, str | None]  # each member's identity before its restart
    bases: dict[str, Baseline]  # where each stood in the cluster
    number: int | None = None  # the batch's, when a batch
    names: str = ""
    failures: list[str] = field(default_factory=list)  # why members failed, in order
    tried: list[Node] = field(default_factory=list)  # every member, restarted or not
    resumed: bool = False
    live: bool = False  # its one member's configuration changed live: not restarted

    def add(self, node: Node, before: str | None, base: Baseline) -> None:
        self.members.append(node)
        self.tried.append(node)
        self.before[node.name], self.bases[node.name] = before, base

    def failed(self) -> RollFailed | None:
        if not self.failures:
            return None
        if self.number is None:
            return RollFailed(self.failures[0])
        return RollFailed(f"batch {self.number} ({self.names}): {'; '.join(self.failures)}")


class Restarts:
    def __init__(
        self,
        platform: Platform,
        observer: Observer,
        voice: Voice,
        journal: JournalStore,
        settings: RollSettings,
        *,
        clock: Callable[[], float],
        wall: Wall,
        sleep: Callable[[float], Awaitable[object]],
        elect_leaders: LeaderElection | None = None,
        configs: LiveConfigs | None = None,
    ) -> None:
        self.platform = platform
        self.configs = configs
        self.observer = observer
        self.voice = voice
        self.journal = journal
        self.settings = settings
        self.elect_leaders = elect_leaders
        self._clock = clock
        self._wall = wall
        self._sleep = sleep

    def now(self) -> str:
        return now_text(self._wall)

    async def save(self, record: RollRecord) -> None:
        # A ConfigMap store makes blocking HTTP calls: keep them off the event loop; an API
        # server that does not answer for a while is waited out as for every platform call.
        await self.observer.through_outage(lambda: asyncio.to_thread(self.journal.save, record))

    async def restart(
        self,
        members: list[Node],
        views: dict[str, PlatformView],
        cluster: ClusterView | None,
        record: RollRecord,
        reason: str,
        batch: Batch | None = None,
        *,
        force: bool = False,
    ) -> Started:
        """Restart `members` (one node, or a batch together). Every intent and baseline is
        saved before the first restart, so a roller killed in between and resumed restarts
        none of them twice (their identities tell which ones did restart). A member whose
        restart fails is on record as failed; the others are waited for by the loop."""
        if self.configs is not None:
            live = next((m for m in members if self.configs.live_only(m.name)), None)
            if live is not None:  # one broker at a time, never in a batch
                return await self.configure(live, views[live.name], cluster, record)
            for m in members:  # its live keys first: no dynamic value of its own shadows them
                if any(self.configs.keys(m.name)[:2]):
                    self._configuring(m, views[m.name].instance, "before its restart")
                    await self.configs.apply(m)
        number = record.next_batch() if batch is not None else None
        bases = {m.name: baseline(m, cluster) for m in members}
        for m in members:
            record.nodes[m.name] = NodeRecord.intent(
                self.now(), views[m.name].instance, reason, number, bases[m.name]
            )
        await self.save(record)
        names = ", ".join(m.name for m in members)
        if batch is None:
            logger.info("%s: restarting (%s)", names, reason)
        else:
            logger.info("batch %d: restarting %s (%s)", number, names, reason)
        for m in members:
            where = {} if batch is None else {"batch": number, "rack": batch.rack}
            self.observer.events.write(
                m.name,
                Event.RESTART,
                reason,
                instance=views[m.name].instance,
                **where,
                forced=force or None,
            )
            self.voice.progress(m, "restarting" + (f" (batch {number})" if number else ""), None)
        done = await asyncio.gather(
            *(self.platform.restart(m, kafka_version=self.settings.kafka_version) for m in members),
            return_exceptions=True,
        )
        started = Started([], {}, bases, number, names, tried=list(members))
        for m, outcome in zip(members, done, strict=True):
            if isinstance(outcome, RollguardError):
                record.nodes[m.name] = NodeRecord(
                    NodeStatus.FAILED, self.now(), views[m.name].instance, str(outcome), number
                )
                started.failures.append(f"{m.name}: {outcome}" if batch else str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                started.members.append(m)
                started.before[m.name] = views[m.name].instance
        if started.failures:
            await self.save(record)
        return started

    async def configure(
        self, node: Node, view: PlatformView, cluster: ClusterView | None, record: RollRecord
    ) -> Started:
        """`node`'s configuration changed live (`LiveConfigs.apply`), its intent saved first;
        then it is waited for as a restarted broker is, back in every ISR it was in before, and
        it must still run the same process, ready: a live change that restarts it, or takes it
        down, fails the roll."""
        assert self.configs is not None
        names = ", ".join(self.configs.keys(node.name)[2])
        base = baseline(node, cluster)
        reason = f"configuration applied live: {names}"
        record.nodes[node.name] = replace(
            NodeRecord.intent(self.now(), view.instance, reason, None, base),
            status=NodeStatus.CONFIGURING,
        )
        await self.save(record)
        self._configuring(node, view.instance)
        self.voice.progress(node, f"configuring live: {names}", None)
        try:
            await self.configs.apply(node)
        except RollFailed as exc:
            await self._outcome(node, NodeStatus.FAILED, str(exc), record)
            raise
        after = await self.observer.platform_view(node)
        if after.instance != view.instance or not after.ready:
            now = "restarted" if after.instance != view.instance else "not ready"
            why = f"{node.name}: {now} after the live change of {names}"
            await self._outcome(node, NodeStatus.FAILED, why, record)
            raise RollFailed(why)
        started = Started([], {}, {node.name: base}, names=node.name, tried=[node], live=True)
        started.members.append(node)
        started.before[node.name] = view.instance
        return started

    def _configuring(self, node: Node, instance: str | None, when: str = "") -> None:
        """The `configure` event of a live step: the keys it sets at the broker and at the
        cluster default (names only), and every key it reads back."""
        assert self.configs is not None
        own, cluster_keys, changed = self.configs.keys(node.name)
        names = ", ".join(changed) + (f" ({when})" if when else "")
        logger.info("%s: changing its configuration live: %s", node, names)
        self.observer.events.write(
            node.name, Event.CONFIGURE, names, keys=own, cluster=cluster_keys, instance=instance
        )

    async def on_record(self, node: Node, before: str | None) -> bool:
        """Resume: `node`'s restart is on record (its identity then, `before`) but not its
        outcome. Judged by identity: changed (or a new one on its way) means it restarted
        (True: the loop waits for it); unchanged means the restart never happened (False: the
        node is pending again, and the safety checks with it)."""
        s = self.settings
        waiting = ProgressWait(s.safety_wait, self._clock())
        while await self.platform.restart_pending(node):
            # The earlier roller's restart command still runs: judge the node once it is done.
            self.voice.progress(node, "an earlier restart command is still running", None)
            if waiting.expired(self._clock()):
                raise RollFailed(
                    f"{node.name}: the restart command of the interrupted roll still runs after "
                    f"{format_duration(s.safety_wait)}; not acting on it"
                )
            await self._sleep(s.poll_interval)
        view = await self.observer.platform_view(node)
        if before is not None and view.instance == before:
            logger.warning("%s: the restart on record did not happen; it is pending again", node)
            self.observer.events.write(node.name, Event.RESTART_NOT_OBSERVED, "identity unchanged")
            return False
        logger.info("%s: restart on record; waiting for it, not restarting", node)
        return True

    async def back(self, node: Node, note: str, record: RollRecord, **figures: str) -> None:
        """`node` is back where it was before its restart (or its live change): on record."""
        said = f" ({note})" if note else ""
        intent = record.nodes.get(node.name)
        if intent is not None and intent.status is NodeStatus.CONFIGURING:
            await self._outcome(node, NodeStatus.CONFIGURED, intent.reason, record)
            text = f"{intent.reason}; ready and in sync{said}"
            self.observer.events.write(node.name, Event.CONFIGURED, text, **figures)
            logger.info("%s: configured live%s", node, said)
            self.voice.progress(node, "configured live", None)
            return
        await self._outcome(node, NodeStatus.RESTARTED, "", record)
        self.observer.events.write(
            node.name, Event.READY, f"restarted, ready and in sync{said}", **figures
        )
        logger.info("%s: ready again%s", node, said)
        self.voice.progress(node, "ready", None)

    async def failed(self, node: Node, reason: str, record: RollRecord) -> None:
        """A restarted node up but not what the roll was for: failed on record (a resumed roll
        takes it again), no longer RESTARTING (nothing of that restart is left to wait for)."""
        await self._outcome(node, NodeStatus.FAILED, reason, record)

    async def _outcome(
        self, node: Node, status: NodeStatus, reason: str, record: RollRecord
    ) -> None:
        """The outcome of `node`'s restart on record, beside its intent (its identity and
        baseline then), saved."""
        intent = record.nodes.get(node.name) or NodeRecord(NodeStatus.RESTARTING, self.now())
        record.nodes[node.name] = replace(intent, status=status, at=self.now(), reason=reason)
        await self.save(record)

    async def leave_out(
        self, node: Node, why: str, record: RollRecord, result: RollResult, *, held: bool = False
    ) -> None:
        """A node the roll does not take (skipped, or held for later: `why` says), on record."""
        status, event = (NodeStatus.HELD, Event.HOLD) if held else (NodeStatus.SKIPPED, Event.SKIP)
        record.nodes[node.name] = NodeRecord(status, self.now(), reason=why)
        await self.save(record)
        self.observer.events.write(node.name, event, why)
        (result.held if held else result.skipped).append(node.name)

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
            self.observer.events.say(
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

"""What the roll does to the cluster and writes in its journal: the one place that applies a
step's effects (the loop, `roller.py`, hands each one here): a restart or a live step (every
intent and baseline saved before the first command), a node back, a node failed, a node left
out, a restart on record found again on resume, a batch's preferred leaders given back.

The journal is the one record of intent and outcome, and only this module writes it (through
`Effects.save`, which waits out an API server that does not answer, as every platform call
does); it holds each node's record as the roll moves it. The roll loop (`roller.py`) decides
when; nothing here waits for a node to come back.

`plan` applies none of this: its applier (`planning.Planned`) notes what a roll would do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rollguard.roller.model import ClusterView, Node, PlatformView
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.gates.keeper import Closed
from rollguard.roller.roll.node.outcome import Do, Effect
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.observer import Observer
from rollguard.roller.roll.rules.batch import Batch
from rollguard.roller.roll.rules.budgets import ProgressWait
from rollguard.roller.roll.rules.safety import Baseline, baseline, unbalanced
from rollguard.roller.roll.rules.settings import RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import JournalStore, RollRecord
from rollguard.roller.roll.voice import Voice, Wall, now_text
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import RollguardError

logger = logging.getLogger(__name__)

# A preferred leader election of these (topic, partition)s; RollguardError when it fails.
LeaderElection = Callable[[Sequence[tuple[str, int]]], Awaitable[None]]


@dataclass
class Group:
    """One restart on its way back: one node, or a batch's members together (a live step's one
    member; on resume, the restarts on record that did happen). Each member's record says the
    rest (its identity and standing before, its budgets)."""

    members: list[str]  # restarted, in order: looked at one after the other
    number: int | None = None  # the batch's, when a batch
    resumed: bool = False
    failures: list[str] = field(default_factory=list)  # why members failed, in order
    waiting: list[str] = field(default_factory=list)  # not yet back nor failed

    def __post_init__(self) -> None:
        self.waiting = self.waiting or list(self.members)

    def failed(self) -> RollFailed | None:
        if not self.failures:
            return None
        if self.number is None:
            return RollFailed(self.failures[0])
        names = ", ".join(self.members)
        return RollFailed(f"batch {self.number} ({names}): {'; '.join(self.failures)}")


class Effects:
    """The roll's applier (`plan`'s is `planning.Planned`): each effect applied, on record."""

    dry = False  # applied: a restart ends the poll

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

    def saw(self, node: Node, view: PlatformView) -> None:
        """A plan orders its entries by what it saw; a roll has no use for it."""

    def candidate(self, node: Node) -> None:
        """A broker for a batch: the batch rule decides, here as in a plan."""

    def gated(self, node: Node, effect: Effect, closed: Sequence[Closed]) -> None:
        """A node that may restart, held at the closed gates (said by the gate keeper)."""

    def fail(self, node: Node, reason: str) -> None:
        """The roll stops now: `reason` names `node` and the cause."""
        raise RollFailed(reason)

    async def start(
        self,
        members: list[Node],
        views: Mapping[str, PlatformView],
        cluster: ClusterView | None,
        roll: RollRecord,
        effect: Effect,
        batch: Batch | None = None,
    ) -> Group:
        """A restart (one node, or a batch's members), or a live step (`Do.CONFIGURE`)."""
        if effect.do is Do.CONFIGURE:
            return await self.configure(members[0], views[members[0].name], cluster, roll)
        return await self.restart(
            members, views, cluster, roll, effect.reason, batch, force=effect.force
        )

    async def save(self, record: RollRecord) -> None:
        # A ConfigMap store makes blocking HTTP calls: keep them off the event loop; an API
        # server that does not answer for a while is waited out as for every platform call.
        await self.observer.through_outage(lambda: asyncio.to_thread(self.journal.save, record))

    async def restart(
        self,
        members: list[Node],
        views: Mapping[str, PlatformView],
        cluster: ClusterView | None,
        roll: RollRecord,
        reason: str,
        batch: Batch | None = None,
        *,
        force: bool = False,
    ) -> Group:
        """Restart `members` (one node, or a batch together). Every intent and baseline is
        saved before the first restart, so a roller killed in between and resumed restarts
        none of them twice (their identities tell which ones did restart). A member whose
        restart fails is on record as failed; the others are the group waited for."""
        if self.configs is not None:
            for m in members:  # its live keys first: no dynamic value of its own shadows them
                if any(self.configs.keys(m.name)[:2]):
                    keys = self._configuring(m, views[m.name].instance, "before its restart")
                    await self.configs.apply(m)
                    self.voice.progress(m, f"configured live before its restart: {keys}", None)
        number = roll.next_batch() if batch is not None else None
        for m in members:
            roll.nodes[m.name] = _intent(
                roll.nodes[m.name],
                self.now(),
                views[m.name].instance,
                reason,
                number,
                baseline(m, cluster),
                How.RESTART,
            )
        await self.save(roll)
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
        group = Group([], number)
        for m, outcome in zip(members, done, strict=True):
            if isinstance(outcome, RollguardError):
                # A restart command that failed (or a platform that did not answer it): that
                # node failed; whatever the others' commands did, they are waited for, and the
                # roll stops once they are back.
                failed = replace(roll.nodes[m.name], phase=Phase.FAILED, at=self.now())
                roll.nodes[m.name] = replace(failed, reason=str(outcome))
                group.failures.append(f"{m.name}: {outcome}" if batch else str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                group.members.append(m.name)
        group.waiting = list(group.members)
        if group.failures:
            await self.save(roll)
        return group

    async def configure(
        self, node: Node, view: PlatformView, cluster: ClusterView | None, roll: RollRecord
    ) -> Group:
        """`node`'s configuration changed live (`LiveConfigs.apply`), its intent saved first;
        then it is waited for as a restarted broker is, back in every ISR it was in before, and
        it must still run the same process, ready: a live change that restarts it, or takes it
        down, fails the roll."""
        assert self.configs is not None
        names = ", ".join(self.configs.keys(node.name)[2])
        reason = f"configuration applied live: {names}"
        roll.nodes[node.name] = _intent(
            roll.nodes[node.name],
            self.now(),
            view.instance,
            reason,
            None,
            baseline(node, cluster),
            How.LIVE,
        )
        await self.save(roll)
        self._configuring(node, view.instance)
        self.voice.progress(node, f"configuring live: {names}", None)
        try:
            await self.configs.apply(node)
        except RollFailed as exc:
            await self._outcome(node, Phase.FAILED, str(exc), roll)
            raise
        after = await self.observer.platform_view(node)
        if after.instance != view.instance or not after.ready:
            now = "restarted" if after.instance != view.instance else "not ready"
            why = f"{node.name}: {now} after the live change of {names}"
            await self._outcome(node, Phase.FAILED, why, roll)
            raise RollFailed(why)
        return Group([node.name])

    def _configuring(self, node: Node, instance: str | None, when: str = "") -> str:
        """The `configure` event of a live step: the keys it sets at the broker and at the
        cluster default (names only), and every key it reads back; their names."""
        assert self.configs is not None
        own, cluster_keys, changed = self.configs.keys(node.name)
        names = ", ".join(changed) + (f" ({when})" if when else "")
        logger.info("%s: changing its configuration live: %s", node, names)
        self.observer.events.write(
            node.name, Event.CONFIGURE, names, keys=own, cluster=cluster_keys, instance=instance
        )
        return ", ".join(changed)

    async def on_record(self, node: Node, before: str | None) -> bool:
        """Resume: `node`'s restart is on record (its identity then, `before`) but not its
        outcome. Judged by identity: changed (or a new one on its way) means it restarted
        (True: the loop waits for it); unchanged means the restart never happened (False: the
        node is taken again, and the safety checks with it)."""
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

    async def back(self, node: Node, note: str, roll: RollRecord, **figures: str) -> None:
        """`node` is back where it was before its restart (or its live step): on record."""
        said = f" ({note})" if note else ""
        record = roll.nodes[node.name]
        await self.save(roll)
        if record.how is How.LIVE:
            text = f"{record.reason}; ready and in sync{said}"
            self.observer.events.write(node.name, Event.CONFIGURED, text, **figures)
            logger.info("%s: configured live%s", node, said)
            self.voice.progress(node, "configured live", None)
            return
        self.observer.events.write(
            node.name, Event.READY, f"restarted, ready and in sync{said}", **figures
        )
        logger.info("%s: ready again%s", node, said)
        self.voice.progress(node, "ready", None)

    async def failed(self, roll: RollRecord) -> None:
        """A restarted node up but not what the roll was for, failed on its record: saved."""
        await self.save(roll)

    async def _outcome(self, node: Node, phase: Phase, reason: str, roll: RollRecord) -> None:
        record = roll.nodes[node.name]
        roll.nodes[node.name] = replace(record, phase=phase, at=self.now(), reason=reason)
        await self.save(roll)

    async def leave_out(self, node: Node, why: str, roll: RollRecord, *, held: bool) -> None:
        """A node the roll does not take (skipped, or held for later: `why` says), on record,
        and said where the roll says what it does."""
        await self.save(roll)
        self.observer.events.write(node.name, Event.HOLD if held else Event.SKIP, why)
        self.voice.progress(node, f"{'held' if held else 'left out'}: {why}", None)

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


def _intent(
    record: NodeRecord,
    at: str,
    instance: str | None,
    reason: str,
    batch: int | None,
    base: Baseline,
    how: How,
) -> NodeRecord:
    """The record saved before a restart (or a live step): never restart it again in this
    roll; its identity and standing before, to tell whether it happened and what it must be
    back to."""
    phase = Phase.CONFIGURING if how is How.LIVE else Phase.RESTARTING
    return replace(
        record,
        phase=phase,
        at=at,
        how=how,
        instance=instance,
        reason=reason,
        batch=batch,
        base=base,
        waiting=None,
    )

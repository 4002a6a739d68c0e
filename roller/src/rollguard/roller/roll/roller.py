"""The roll loop, on one page: pending nodes, one poll, act, record.

    take the cluster's lease; ask every agent once (a refused certificate, an untrusted agent
    or a skewed clock is a configuration error: nothing is restarted)
    for each poll:   observe Kafka -> order the pending nodes
      for each node: its platform view and agent -> decide (decide.py) -> act
                     a restart ends the poll (the cluster changed); a deferral moves on
      no single restart: the ready brokers may go as one batch (batch.py, --max-batch-size)
    a poll that restarted nothing is not a failure: the roller keeps observing while the cluster
    makes progress, and fails only after --safety-wait without any, naming what never became safe

Around it: `observer.py` sees (Kafka, the platform, the agents), `decide.py`, `safety.py` and
`batch.py` rule (pure, table-tested), `after_restart.py` waits until a restarted node is back
where it was before (its baseline, saved with its intent) and returns an outcome. This module
alone writes the roll journal: the intent before every restart, every outcome after it.

The one rule above all others: a broker its agent reports in RECOVERY is never restarted, and a
broker whose agent cannot be read is unknown, never "not recovering". The lease is renewed
beside the loop by `lease.renewing`: a failed renewal is retried until the lease could have
expired; then, or when another holder takes it, the roll stops with the journal saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import ClusterView, Node, PlatformView, kafka_build
from rollguard.roller.platform import Platform
from rollguard.roller.roll.after_restart import (
    AfterRestart,
    LeaderElection,
    Progress,
    Rejoined,
)
from rollguard.roller.roll.gates.keeper import GateKeeper, Gates
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.pending import PendingWaits
from rollguard.roller.roll.planning import HELD, PlanEntry, check_names, plan_with
from rollguard.roller.roll.preflight import preflight
from rollguard.roller.roll.rules.batch import Batch, batchable, next_batch
from rollguard.roller.roll.rules.decide import (
    AwaitReady,
    AwaitRecovery,
    Defer,
    Fail,
    Restart,
    held_by_recovery,
    wanted,
)
from rollguard.roller.roll.rules.safety import baseline, roll_order
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollFailed, RollSettings
from rollguard.roller.roll.rules.waits import SafetyWait
from rollguard.roller.roll.stores.journal import (
    EventLog,
    JournalStore,
    NodeRecord,
    NodeStatus,
    RollRecord,
    RollState,
    Wall,
    nothing_to_resume,
    now_text,
    resumed_target,
    utc_now,
)
from rollguard.roller.roll.stores.lease import Lease, LeaseLost, release, renewing
from rollguard.shared.converters import format_duration
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.wire import KafkaBuild

__all__ = ["RollResult", "Roller"]

logger = logging.getLogger(__name__)
NO_LEASE = contextlib.nullcontext()


@dataclass
class RollResult:
    roll_id: str
    state: RollState
    reason: str = ""
    restarted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # --hold: for a later `roll --resume`


class Roller:
    def __init__(
        self,
        platform: Platform,
        observe_cluster: ClusterObserver | None,
        agents: AgentClient,
        journal: JournalStore,
        events: EventLog,
        *,
        settings: RollSettings,
        policy: RetryPolicy | None = None,
        lease: Lease | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Wall = utc_now,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_progress: Progress | None = None,
        elect_leaders: LeaderElection | None = None,
        gates: Gates | None = None,
    ) -> None:
        """`clock` measures every wait (monotonic seconds); `wall` stamps the journal."""
        self.settings = settings  # the roll's, set once: its waits and rules read them here
        self.platform = platform
        self.agents = agents
        self.journal = journal
        self.events = events
        self.lease = lease
        self.observer = Observer(
            platform,
            observe_cluster,
            agents,
            events,
            policy=policy,
            sleep=sleep,
            clock=clock,
            # the lease's rule for every call to the platform's API: see Observer.through_outage
            outage_limit=lease.duration if lease is not None else 30.0,
        )
        self.after = AfterRestart(
            self.observer,
            settings,
            clock=clock,
            sleep=sleep,
            on_progress=on_progress,
            elect_leaders=elect_leaders,
        )
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._on_progress = on_progress or (lambda node, text, tracker: None)
        self.pending = PendingWaits(self.after, clock=clock, on_progress=on_progress)
        self._waiting = SafetyWait()  # --safety-wait, while nothing restarts
        # With a target version: nodes taken without knowing what they run (`_on_target`).
        self._version_unknown: set[str] = set()
        # An inventory has no revisions: with a target version, what each node runs decides.
        self._revisions: bool = getattr(platform, "revisions", True)
        self.gates = GateKeeper(gates or Gates(), self.observer, self._on_progress)

    async def plan(self, *, check_agents: bool = True) -> list[PlanEntry]:
        """What a roll would do now (`planning.plan_with`); writes nothing. The agents are
        checked as a roll checks them first (`check_agents`): what would stop a roll stops the
        plan (exit 2)."""
        if check_agents:
            nodes = await self.platform.nodes()
            check_names(nodes, self.settings)  # a name that does not exist: before any request
            await self._preflight(nodes)
        return await plan_with(self.observer, self.settings, self.gates.gates)

    async def _preflight(self, nodes: list[Node]) -> None:
        """Never act blind: every agent answers over TLS, or the roll does not start."""
        await preflight(
            self.observer.agents,
            nodes,
            self.settings.max_clock_skew,
            self.events,
            force=self.settings.on_agent_unreachable == OnAgentUnreachable.FORCE,
        )

    async def roll(self, roll_id: str, *, resume: bool = False) -> RollResult:
        nodes = await self.platform.nodes()
        check_names(nodes, self.settings)
        record = await asyncio.to_thread(self.journal.load, roll_id) if resume else None
        if resume and record is None:
            raise nothing_to_resume(self.journal, roll_id)  # exit 2: nothing was done
        if record is not None and record.kafka_version != self.settings.kafka_version:
            # A resumed upgrade goes on to the same version (the CLI takes the journal's).
            target = resumed_target(record, self.settings.kafka_version)
            raise ConfigError(
                f"--resume {roll_id}: that roll is an upgrade to Kafka {target}; resume it "
                "with that target version"
            )
        if self.lease is not None:
            await self.lease.acquire()
        try:
            await self._preflight(nodes)
            if record is None:
                record = RollRecord(roll_id, self._now(), kafka_version=self.settings.kafka_version)
            result = await self._guarded(record, nodes, resume)
        except BaseException:
            await release(self.lease, failed=True)
            raise
        await release(self.lease, failed=False)
        return result

    async def _guarded(self, record: RollRecord, nodes: list[Node], resume: bool) -> RollResult:
        record.state, record.reason = RollState.RUNNING, ""
        started = self._clock()
        await self._save(record)
        self.events.write(None, Event.ROLL_START, "resumed" if resume else "", **self._target())
        try:
            try:
                async with self._renewing():
                    result = await self._roll(record, nodes)
            except LeaseLost as exc:
                raise RollFailed(f"lost the roll lease, stopping: {exc}") from exc
        except RollguardError as exc:
            record.state, record.reason = RollState.FAILED, str(exc)
            try:
                await self._save(record)
            except RollguardError as also:
                logger.error("the roll failed and its journal cannot say so: %s", also)
            self.events.write(None, Event.ROLL_FAILED, str(exc), seconds=self._clock() - started)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.state, record.reason = RollState.INTERRUPTED, "interrupted"
            await self._save(record)
            self.events.write(None, Event.ROLL_INTERRUPTED, seconds=self._clock() - started)
            raise
        record.state = RollState.COMPLETED
        await self._save(record)
        self.events.write(None, Event.ROLL_COMPLETED, seconds=self._clock() - started)
        return result

    def _renewing(self) -> contextlib.AbstractAsyncContextManager[object]:
        every, lease = self.settings.lease_renew_interval, self.lease
        return renewing(lease, every, sleep=self._sleep, clock=self._clock) if lease else NO_LEASE

    async def _save(self, record: RollRecord) -> None:
        # A ConfigMap store makes blocking HTTP calls: keep them off the event loop; an API
        # server that does not answer for a while is waited out as for every platform call.
        await self.observer.through_outage(lambda: asyncio.to_thread(self.journal.save, record))

    async def _roll(self, record: RollRecord, nodes: list[Node]) -> RollResult:
        result = RollResult(record.roll_id, RollState.RUNNING)
        pending: list[Node] = []
        for node in nodes:
            done = record.nodes.get(node.name)
            if done is not None and done.status in (NodeStatus.RESTARTED, NodeStatus.SKIPPED):
                continue
            if done is not None and done.status is NodeStatus.RESTARTING:
                back = await self.after.on_record(node, done.instance, done.baseline)
                if isinstance(back, Fail) and back.again:  # up, on the wrong version: again
                    await self._failed(node, done, back.reason, record)
                elif isinstance(back, Fail):
                    raise RollFailed(back.reason)
                elif back is not None:  # restarted: it is back
                    await self._rejoined(back, record)
                    result.restarted.append(node.name)
                    continue
            view = await self.observer.platform_view(node)
            running = await self._running(node)
            taken, why = wanted(
                node, view, self.settings, revisions=self._revisions, running=running
            )
            held = taken and node.name in self.settings.hold
            if not taken or held:
                await self._leave_out(node, why, record, result, held=held)
                continue
            if self.settings.kafka_version is not None and running is None:
                self._version_unknown.add(node.name)  # looked at again before its restart
            pending.append(node)

        while pending:
            restarted = await self._poll(pending, record, result)
            if restarted:
                for node in restarted:
                    pending.remove(node)
                    result.restarted.append(node.name)
                self._waiting.reset()
                continue
            await self._sleep(self.settings.poll_interval)
        result.state = RollState.COMPLETED
        if result.held:
            record.reason = f"held for later: {', '.join(result.held)}"
        return result

    async def _leave_out(
        self, node: Node, why: str, record: RollRecord, result: RollResult, *, held: bool = False
    ) -> None:
        """A node the roll does not take (skipped, or held for later), on record."""
        status, event, why = (NodeStatus.HELD, Event.HOLD, HELD) if held else (
            NodeStatus.SKIPPED, Event.SKIP, why)  # fmt: skip
        record.nodes[node.name] = NodeRecord(status, self._now(), reason=why)
        await self._save(record)
        self.events.write(node.name, event, why)
        (result.held if held else result.skipped).append(node.name)

    async def _on_target(
        self,
        node: Node,
        view: PlatformView,
        pending: list[Node],
        record: RollRecord,
        result: RollResult,
    ) -> bool:
        """True for a node about to be restarted that the roll took without knowing what it
        ran (not started at the roll's start: its agent says its version once it has) and that
        now says it runs the target: left out, as those known to run it were."""
        if node.name not in self._version_unknown:
            return False
        self._version_unknown.discard(node.name)
        running = await self._running(node)
        taken, why = wanted(node, view, self.settings, revisions=self._revisions, running=running)
        if taken:
            return False
        await self._leave_out(node, why, record, result)
        pending.remove(node)
        return True

    async def _running(self, node: Node) -> KafkaBuild | None:
        """The Kafka `node` runs by its agent, when the roll has a target version to compare."""
        if self.settings.kafka_version is None:
            return None
        return kafka_build(await self.observer.ask(node, log=False))

    async def _poll(
        self, pending: list[Node], record: RollRecord, result: RollResult
    ) -> list[Node]:
        """One look at every pending node, in roll order; the nodes restarted (none, one, or a
        batch). Raises RollFailed when nothing became safe for --safety-wait."""
        cluster = await self.observer.cluster()
        views = await self.observer.views(pending, cluster)
        ready = {n.node_id: views[n.name].ready for n in pending}
        deferred: dict[Node, Defer] = {}
        waiting_nodes = False
        brokers: list[Node] = []  # ready brokers, for a batch once the others are handled
        gated: list[Node] = []  # safe to restart, but a gate is closed
        # Pending nodes in log recovery (not-ready nodes come first in the order): while there
        # are any, nothing else is restarted (`held_by_recovery`).
        recovering: list[str] = []
        starting: list[str] = []  # ... or on their way back (STARTING, RECOVERY), the same
        for node in roll_order(pending, ready, cluster.active_controller if cluster else None):
            if self.settings.max_batch_size > 1 and batchable(node, views[node.name]):
                self.pending.forget(node)
                brokers.append(node)
                continue
            action = await self.pending.look(node, views[node.name], cluster)
            if isinstance(action, Fail):
                raise RollFailed(action.reason)
            if isinstance(action, AwaitRecovery):
                recovering.append(node.name)
            elif isinstance(action, AwaitReady) and action.starting:
                starting.append(node.name)
            if isinstance(action, Restart) and (recovering or starting):
                action = self._held(node, held_by_recovery(recovering, starting))
            if isinstance(action, Restart):
                if await self._on_target(node, views[node.name], pending, record, result):
                    continue
                if await self.gates.closed(ask=not gated):
                    gated.append(node)
                    continue
                await self._restart(
                    [node], views, cluster, record, action.reason, force=action.force
                )
                return [node]  # the cluster changed: observe it again before the next decision
            if isinstance(action, Defer):
                deferred[node] = action
            else:
                waiting_nodes = True
        if brokers and (recovering or starting):
            for node in brokers:
                deferred[node] = self._held(node, held_by_recovery(recovering, starting))
            brokers = []
        brokers = [
            b
            for b in brokers
            if not await self._on_target(b, views[b.name], pending, record, result)
        ]
        if brokers:
            plan = next_batch(
                brokers,
                cluster,
                max_size=self.settings.max_batch_size,
                rack_aware=self.settings.rack_aware,
                explain=False,
            )
            members = list(plan.batch.members) if plan.batch is not None else []
            if plan.batch is not None:
                if await self.gates.closed(ask=not gated):
                    gated.extend(members)
                else:
                    await self._restart(
                        members, views, cluster, record, plan.batch.reason, plan.batch
                    )
                    return members
            for held in plan.held:
                if held.blockers:
                    deferred[held.node] = Defer(held.reason, held.blockers)
                    kind = deferred[held.node].kind
                    self.observer.say(held.node.name, "defer", Event.DEFER, held.reason, kind=kind)
        if gated:
            at_gates, asked_for = self.gates.hold(gated)
            deferred.update(at_gates)
            waiting_nodes = asked_for or waiting_nodes
        self._safety_wait(deferred, waiting_nodes)
        for node, action in deferred.items():
            self._on_progress(node, f"waiting until safe: {action.reason}", None)
        return []

    def _held(self, node: Node, defer: Defer) -> Defer:
        self.observer.say(node.name, "defer", Event.DEFER, defer.reason, kind=defer.kind)
        return defer

    def _safety_wait(self, deferred: dict[Node, Defer], waiting_nodes: bool) -> None:
        """Nothing restarted in this poll (`SafetyWait` says when the budget runs)."""
        deficit = sum(b.deficit for d in deferred.values() for b in d.blockers)
        if waiting_nodes:
            self._waiting.reset()
        elif (
            waited := self._waiting.spent(self._clock(), deficit, self.settings.safety_wait)
        ) is not None:
            reasons = "; ".join(f"{n.name}: {d.reason}" for n, d in deferred.items())
            raise RollFailed(
                f"no restart became safe: {format_duration(self.settings.safety_wait)} "
                f"without progress (--safety-wait) after waiting {format_duration(waited)}: "
                f"{reasons}"
            )

    async def _restart(
        self,
        members: list[Node],
        views: dict[str, PlatformView],
        cluster: ClusterView | None,
        record: RollRecord,
        reason: str,
        batch: Batch | None = None,
        *,
        force: bool = False,
    ) -> None:
        """Restart `members` (one node, or a batch together), then wait for each until it is
        back where it was. Every intent and baseline is saved before the first restart, so a
        roller killed in between and resumed restarts none of them twice (their identities
        tell which ones did restart). A member that fails stops the roll, but only once the
        others are back: stopping while they restart would leave their partitions short."""
        number = record.next_batch() if batch is not None else None
        bases = {m.name: baseline(m, cluster) for m in members}
        for m in members:
            record.nodes[m.name] = NodeRecord.intent(
                self._now(), views[m.name].instance, reason, number, bases[m.name]
            )
        await self._save(record)
        names = ", ".join(m.name for m in members)
        if batch is None:
            logger.info("%s: restarting (%s)", names, reason)
        else:
            logger.info("batch %d: restarting %s (%s)", number, names, reason)
        for m in members:
            where = {} if batch is None else {"batch": number, "rack": batch.rack}
            self.events.write(
                m.name,
                Event.RESTART,
                reason,
                instance=views[m.name].instance,
                **where,
                forced=force or None,
            )
            self._on_progress(m, "restarting" + (f" (batch {number})" if number else ""), None)
        done = await asyncio.gather(
            *(self.platform.restart(m, kafka_version=self.settings.kafka_version) for m in members),
            return_exceptions=True,
        )
        failures: list[str] = []
        started: list[Node] = []
        for m, outcome in zip(members, done, strict=True):
            if isinstance(outcome, RollguardError):
                record.nodes[m.name] = NodeRecord(
                    NodeStatus.FAILED, self._now(), views[m.name].instance, str(outcome), number
                )
                failures.append(f"{m.name}: {outcome}" if batch else str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                started.append(m)
        if failures:
            await self._save(record)
        for m in started:
            back = await self.after.wait(m, views[m.name].instance, bases[m.name])
            if isinstance(back, Fail):
                failures.append(back.reason)
                if back.again:
                    await self._failed(m, record.nodes[m.name], back.reason, record)
            else:
                await self._rejoined(back, record)
        if failures and batch is None:
            raise RollFailed(failures[0])
        if failures:
            raise RollFailed(f"batch {number} ({names}): {'; '.join(failures)}")
        if batch is not None and number is not None:
            await self.after.elect_preferred(members, number)

    async def _failed(
        self, node: Node, intent: NodeRecord, reason: str, record: RollRecord
    ) -> None:
        """A restarted node up but not what the roll was for: failed on record (a resumed roll
        takes it again), no longer RESTARTING (nothing of that restart is left to wait for)."""
        record.nodes[node.name] = replace(
            intent, status=NodeStatus.FAILED, at=self._now(), reason=reason
        )
        await self._save(record)

    def _target(self) -> dict[str, str]:
        """The roll's target version as an event's figure (`kafkaVersion`), when it has one."""
        version = self.settings.kafka_version
        return {"kafkaVersion": version} if version is not None else {}

    def _now(self) -> str:
        return now_text(self._wall)

    async def _rejoined(self, back: Rejoined, record: RollRecord) -> None:
        node = back.node
        intent = record.nodes.get(node.name) or NodeRecord(NodeStatus.RESTARTING, self._now())
        record.nodes[node.name] = replace(
            intent, status=NodeStatus.RESTARTED, at=self._now(), reason=""
        )
        await self._save(record)
        note = f" ({back.note})" if back.note else ""
        self.events.write(
            node.name, Event.READY, f"restarted, ready and in sync{note}", **self._target()
        )
        logger.info("%s: ready again%s", node, note)
        self._on_progress(node, "ready", None)

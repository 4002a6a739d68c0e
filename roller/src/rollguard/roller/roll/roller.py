"""The roll loop, on one page: observe, step each node, act, record.

    take the cluster's lease; ask every agent once (a refused certificate, an untrusted agent
    or a skewed clock is a configuration error: nothing is restarted)
    each poll: a restart on its way back? a look at each of its nodes; else observe Kafka,
      order the pending nodes, and for each: view, agent -> step (rules/node_wait.py) -> act;
      a restart ends the poll; no single restart: a batch of ready brokers (--max-batch-size)
    a poll that restarts nothing is not a failure: the roller keeps observing while the cluster
    makes progress, and fails only after --safety-wait without any, naming what never became safe

Every node the roll waits for, before its restart (found not ready) or after it (until back
where it was: ready, caught up with the quorum, back in its ISRs), has one record in
`self._waits` and one pure `step` judges each look at it, every budget included; a failure is
said one way (`RollFailed`, raised here). Around the loop: `observer.py` sees (Kafka, the
platform; `AgentClient.ask` each agent), `rules/` rule, `voice.py` says what each look means
(the events too), `restarts.py` acts and writes the journal (the intent before every restart,
every outcome after it).

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

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import ClusterView, Node, PlatformView
from rollguard.roller.platform import Platform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.gates.keeper import GateKeeper, Gates
from rollguard.roller.roll.observer import ClusterObserver, Observer
from rollguard.roller.roll.planning import PlanEntry, check_names, plan_with
from rollguard.roller.roll.preflight import preflight
from rollguard.roller.roll.restarts import LeaderElection, Restarts, RollResult, Started
from rollguard.roller.roll.rules.batch import batchable, next_batch
from rollguard.roller.roll.rules.budgets import SafetyWait
from rollguard.roller.roll.rules.node_state import (
    Action,
    AwaitReady,
    AwaitRecovery,
    Defer,
    Done,
    Fail,
    NodeWait,
    Phase,
    Restart,
)
from rollguard.roller.roll.rules.node_wait import step, wait_restarted
from rollguard.roller.roll.rules.safety import roll_order
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollFailed, RollSettings
from rollguard.roller.roll.rules.taking import held_by_recovery
from rollguard.roller.roll.selection import Selection
from rollguard.roller.roll.stores.journal import (
    JournalStore,
    NodeStatus,
    RollRecord,
    RollState,
    nothing_to_resume,
    resumed_target,
)
from rollguard.roller.roll.stores.lease import Lease, LeaseLost, release, renewing
from rollguard.roller.roll.voice import EventLog, Progress, Voice, Wall, utc_now
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.retry import RetryPolicy

__all__ = ["RollResult", "Roller"]

logger = logging.getLogger(__name__)
NO_LEASE = contextlib.nullcontext()


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
        configs: LiveConfigs | None = None,
    ) -> None:
        """`clock` measures every wait (monotonic seconds); `wall` stamps the journal."""
        self.settings = settings  # the roll's, set once: its waits and rules read them here
        self.platform = platform
        self.agents = agents
        self.journal = journal
        self.events = events
        self.lease = lease
        # the lease's rule for every call to the platform's API: see Observer.through_outage
        outage = lease.duration if lease is not None else 30.0
        self.observer = Observer(
            platform, observe_cluster, events, policy=policy, sleep=sleep, clock=clock,
            outage_limit=outage,
        )  # fmt: skip
        self.voice = Voice(events, on_progress)
        self.restarts = Restarts(
            platform, self.observer, self.voice, journal, settings,
            clock=clock, wall=wall, sleep=sleep, elect_leaders=elect_leaders, configs=configs,
        )  # fmt: skip
        self.gates = GateKeeper(gates or Gates(), self.observer, self.voice.progress)
        self._clock = clock
        self._sleep = sleep
        self._waits: dict[str, NodeWait] = {}  # every node waited for, between two looks
        self._back: Started | None = None  # the restart on its way back
        self._waiting = SafetyWait()  # --safety-wait, while nothing restarts
        revisions = getattr(platform, "revisions", True)  # an inventory has none
        self.selection = Selection(
            self.observer, agents, self.restarts, settings, revisions=revisions
        )

    async def plan(self, *, check_agents: bool = True) -> list[PlanEntry]:
        """What a roll would do now (`planning.plan_with`); writes nothing. The agents are
        checked as a roll checks them first (`check_agents`): what would stop a roll stops the
        plan (exit 2)."""
        if check_agents:
            nodes = await self.platform.nodes()
            check_names(nodes, self.settings)  # a name that does not exist: before any request
            await self._preflight(nodes)
        return await plan_with(self.observer, self.agents, self.settings, self.gates.gates)

    async def _preflight(self, nodes: list[Node]) -> None:
        """Never act blind: every agent answers over TLS, or the roll does not start."""
        force = self.settings.on_agent_unreachable == OnAgentUnreachable.FORCE
        await preflight(self.agents, nodes, self.settings.max_clock_skew, self.events, force=force)

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
                now = self.restarts.now()
                record = RollRecord(roll_id, now, kafka_version=self.settings.kafka_version)
            result = await self._guarded(record, nodes, resume)
        except BaseException:
            await release(self.lease, failed=True)
            raise
        await release(self.lease, failed=False)
        return result

    async def _guarded(self, record: RollRecord, nodes: list[Node], resume: bool) -> RollResult:
        record.state, record.reason = RollState.RUNNING, ""
        started, save = self._clock(), self.restarts.save
        await save(record)
        self.events.write(None, Event.ROLL_START, "resumed" if resume else "", **self._target())
        try:
            try:
                renew, lease = self.settings.lease_renew_interval, self.lease
                keep = (
                    renewing(lease, renew, sleep=self._sleep, clock=self._clock)
                    if lease
                    else NO_LEASE
                )
                async with keep:
                    result = await self._roll(record, nodes)
            except LeaseLost as exc:
                raise RollFailed(f"lost the roll lease, stopping: {exc}") from exc
        except RollguardError as exc:
            record.state, record.reason = RollState.FAILED, str(exc)
            try:
                await save(record)
            except RollguardError as also:
                logger.error("the roll failed and its journal cannot say so: %s", also)
            self.events.write(None, Event.ROLL_FAILED, str(exc), seconds=self._clock() - started)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.state, record.reason = RollState.INTERRUPTED, "interrupted"
            await save(record)
            self.events.write(None, Event.ROLL_INTERRUPTED, seconds=self._clock() - started)
            raise
        record.state = RollState.COMPLETED
        await save(record)
        self.events.write(None, Event.ROLL_COMPLETED, seconds=self._clock() - started)
        return result

    async def _roll(self, record: RollRecord, nodes: list[Node]) -> RollResult:
        result = RollResult(record.roll_id, RollState.RUNNING)
        pending: list[Node] = []
        resumed = Started([], {}, {}, resumed=True)
        for node in nodes:
            done = record.nodes.get(node.name)
            if done is not None and done.status.settled:
                continue
            if done is not None and done.status is NodeStatus.RESTARTING:  # noqa: SIM102
                if await self.restarts.on_record(node, done.instance):
                    resumed.add(node, done.instance, done.baseline)
                    continue
            if await self.selection.take(node, record, result):
                pending.append(node)
        if resumed.members:
            self._on_way_back(resumed, pending)
        while pending or self._back is not None:
            if self._back is not None:
                await self._follow(self._back, pending, record, result)
            elif await self._poll(pending, record, result):
                self._waiting.reset()
            else:
                await self._sleep(self.settings.poll_interval)
        result.state = RollState.COMPLETED
        if result.held:
            record.reason = f"held for later: {', '.join(result.held)}"
        return result

    async def _follow(
        self, back: Started, pending: list[Node], record: RollRecord, result: RollResult
    ) -> None:
        """One look at the restart on its way back: at its first member not yet back (a batch's
        in order), what its phase needs. A member that failed stops the roll once the others
        are back (stopping while they restart would leave their partitions short)."""
        node = next((m for m in back.members if m.name in self._waits), None)
        if node is not None:
            wait, view, answer, cluster = self._waits[node.name], None, None, None
            if not wait.watching_recovery:
                cluster = await self.observer.cluster()
            if wait.phase is Phase.READY and not wait.watching_recovery:
                view = await self.observer.view(node, cluster)
            if wait.asks_agent:
                answer = await self.agents.ask(node)
            done = step(wait, node, view, answer, cluster, self._clock(), self.settings)
            self.voice.look(node, wait, done, answer)
            if done.failure is None and not isinstance(done.action, Done):
                assert done.wait is not None
                self._waits[node.name] = done.wait
                if not done.at_once:
                    await self._sleep(self.settings.poll_interval)
                return
            del self._waits[node.name]
            if isinstance(done.action, Done):
                await self.restarts.back(node, done.action.note, record, **self._target())
                (result.configured if back.live else result.restarted).append(node.name)
            elif isinstance(done.action, Fail) and done.action.again:  # up on the wrong version
                await self.restarts.failed(node, done.action.reason, record)
                if not back.resumed:
                    back.failures.append(done.action.reason)
                elif await self.selection.take(node, record, result):  # on resume: taken again now
                    pending.append(node)
            else:
                assert done.failure is not None
                back.failures.append(done.failure)
            if any(m.name in self._waits for m in back.members):
                return
        self._back = None
        self._waiting.reset()
        if (failed := back.failed()) is not None:
            raise failed
        if back.number is not None:
            await self.restarts.elect_preferred(back.members, back.number)

    async def _look(self, node: Node, view: PlatformView, cluster: ClusterView | None) -> Action:
        """One look at a pending node (its agent asked when it is not ready), judged, said."""
        answer = None if view.ready else await self.agents.ask(node)
        wait = self._waits.get(node.name)
        done = step(wait, node, view, answer, cluster, self._clock(), self.settings)
        if done.wait is None:
            self._waits.pop(node.name, None)
        else:
            self._waits[node.name] = done.wait
        self.voice.look(node, wait, done, answer)
        if done.failure is not None:
            raise RollFailed(done.failure)
        assert isinstance(done.action, Action)
        return done.action

    def _on_way_back(self, started: Started, pending: list[Node]) -> list[Node]:
        """`started` on its way back, no longer pending: each member waited for from its
        identity before its restart."""
        for m in started.members:
            self._waits[m.name] = wait_restarted(
                m, self.settings, self._clock(), started.before[m.name], started.bases[m.name],
                live=started.live,
            )  # fmt: skip
        self._back = started
        for m in started.tried:
            if m in pending:
                pending.remove(m)
        return started.tried

    async def _poll(
        self, pending: list[Node], record: RollRecord, result: RollResult
    ) -> list[Node]:
        """One look at every pending node, in roll order; the nodes restarted (none, one, or a
        batch), no longer pending. Raises RollFailed when nothing became safe for
        --safety-wait."""
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
                self._waits.pop(node.name, None)
                brokers.append(node)
                continue
            action = await self._look(node, views[node.name], cluster)
            if isinstance(action, AwaitRecovery):
                recovering.append(node.name)
            elif isinstance(action, AwaitReady) and action.starting:
                starting.append(node.name)
            if isinstance(action, Restart) and (recovering or starting):
                action = self.voice.defer(node, held_by_recovery(recovering, starting))
            if isinstance(action, Restart):
                if await self.selection.on_target(node, views[node.name], record, result):
                    pending.remove(node)
                    continue
                if await self.gates.closed(ask=not gated):
                    gated.append(node)
                    continue
                started = await self.restarts.restart(
                    [node], views, cluster, record, action.reason, force=action.force
                )
                return self._on_way_back(started, pending)  # the cluster changed: look again
            if isinstance(action, Defer):
                deferred[node] = action
            else:
                waiting_nodes = True
        if brokers and (recovering or starting):
            for node in brokers:
                deferred[node] = self.voice.defer(node, held_by_recovery(recovering, starting))
            brokers = []
        for b in list(brokers):
            if await self.selection.on_target(b, views[b.name], record, result):
                brokers.remove(b)
                pending.remove(b)
        if brokers:
            s = self.settings
            plan = next_batch(
                brokers, cluster, max_size=s.max_batch_size, rack_aware=s.rack_aware, explain=False
            )
            members = list(plan.batch.members) if plan.batch is not None else []
            if plan.batch is not None:
                if await self.gates.closed(ask=not gated):
                    gated.extend(members)
                else:
                    started = await self.restarts.restart(
                        members, views, cluster, record, plan.batch.reason, plan.batch
                    )
                    return self._on_way_back(started, pending)
            for held in plan.held:
                if held.blockers:
                    deferred[held.node] = self.voice.defer(
                        held.node, Defer(held.reason, held.blockers)
                    )
        if gated:
            at_gates, asked_for = self.gates.hold(gated)
            deferred.update(at_gates)
            waiting_nodes = asked_for or waiting_nodes
        self._safety_wait(deferred, waiting_nodes)
        for node, action in deferred.items():
            self.voice.progress(node, f"waiting until safe: {action.reason}", None)
        return []

    def _safety_wait(self, deferred: dict[Node, Defer], waiting_nodes: bool) -> None:
        """Nothing restarted in this poll: the --safety-wait budget runs (`SafetyWait`)."""
        if waiting_nodes:
            self._waiting.reset()
            return
        held = [(n.name, d.reason, sum(b.deficit for b in d.blockers)) for n, d in deferred.items()]
        if (why := self._waiting.spent(self._clock(), held, self.settings.safety_wait)) is not None:
            raise RollFailed(why)

    def _target(self) -> dict[str, str]:
        """The roll's target version as an event's figure (`kafkaVersion`), when it has one."""
        version = self.settings.kafka_version
        return {"kafkaVersion": version} if version is not None else {}

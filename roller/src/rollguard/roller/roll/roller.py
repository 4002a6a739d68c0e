"""The roll loop: observe, decide with the pure rules, act, record; one node (or batch) at a time.

    take the cluster's lease; ask every agent once (a refused certificate, an untrusted agent
    or a skewed clock is a configuration error: nothing is restarted)
    for each poll:   observe Kafka (partitions, reassignments, quorum) -> order the pending nodes
      for each node: platform view + its agent -> stuck? not ready? recovering? unsafe? -> act
                     a restart ends the poll (the cluster changed); a deferral moves on
    a poll that restarted nothing is not a failure: the roller keeps observing while the cluster
    makes progress, and fails only after --safety-wait without any, naming what never became safe
    after a restart: the new process (by identity) ready, its log recovery, the quorum caught up
    (controllers), every ISR rejoined (brokers); only then the next node.

Three kinds of waiting are kept apart: transient errors (retried with the shared retry policy
by each client), waiting until a restart is safe (`rollguard.roller.roll.waits`, by progress),
and waiting for a broker's log recovery (`rollguard.roller.roll.progress`, by rate and stall).
The one rule above all others: a broker its agent reports in RECOVERY is never restarted, and a
broker whose agent cannot be read is unknown, never "not recovering".

With `--max-batch-size` above 1, ready brokers that are not controllers go in batches chosen by
`rollguard.roller.roll.batch`: every member's intent is saved, the members are restarted
together, and each is waited for as a single node is (readiness, recovery, ISR catch-up); a
member that fails stops the roll once the others have been waited for. Then the partitions
whose preferred leader is a member get a preferred leader election. Not-ready nodes and
controllers are handled alone, exactly as in a serial roll (which `--max-batch-size 1` is).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import (
    AgentAnswer,
    AgentReport,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
)
from rollguard.roller.platform import Platform
from rollguard.roller.roll.batch import Batch, next_batch, plan_batches
from rollguard.roller.roll.decide import (
    Action,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Defer,
    Fail,
    Restart,
    agent_unknown,
    decide,
)
from rollguard.roller.roll.journal import (
    EventLog,
    JournalStore,
    NodeRecord,
    NodeStatus,
    RollRecord,
    RollState,
    now_text,
)
from rollguard.roller.roll.lease import Lease
from rollguard.roller.roll.preflight import preflight
from rollguard.roller.roll.progress import RecoveryTracker, Verdict, format_duration
from rollguard.roller.roll.safety import (
    catching_up,
    describe_partitions,
    roll_order,
    voter_caught_up,
)
from rollguard.roller.roll.waits import ProgressWait
from rollguard.shared.errors import RollguardError
from rollguard.shared.retry import RetryPolicy, retry_async

logger = logging.getLogger(__name__)


class RollFailed(RollguardError):
    """The roll stopped; the message names the node and the cause."""


class OnAgentUnreachable(StrEnum):
    """What a node whose agent cannot be read gets once the operation timeout has passed."""

    WAIT = "wait"  # unknown is not "not recovering": wait within the safety budget
    FORCE = "force"  # the old rule, on explicit request: force-restart it


@dataclass(frozen=True, slots=True)
class RollSettings:
    operation_timeout: float = 300.0
    poll_interval: float = 2.0
    max_recovery_wait: float = 6 * 3600.0
    stall_timeout: float = 600.0
    safety_wait: float = 1800.0  # waiting until a restart is safe: budget without progress
    on_agent_unreachable: OnAgentUnreachable = OnAgentUnreachable.WAIT
    max_clock_skew: float = 30.0  # between the roller and any agent, checked before acting
    lease_renew_interval: float = 10.0
    only: frozenset[str] = frozenset()  # node names; empty: every node that needs it
    skip: frozenset[str] = frozenset()
    all_nodes: bool = False  # restart nodes that are already up to date too
    max_batch_size: int = 1  # brokers restarted together; 1 is the serial roll
    rack_aware: bool | None = None  # batches by rack first; None: when brokers report racks
    elect_preferred_leaders: bool = True  # after each batch (--max-batch-size above 1)
    election_wait: float = 10.0  # how long to watch a batch's preferred leaders come back
    # per node name: its log recovery's wait budget from history (`--expectations`), never
    # above max_recovery_wait; a node without one gets max_recovery_wait
    recovery_budgets: Mapping[str, float] = field(default_factory=dict)

    def recovery_budget(self, node: str) -> float:
        return min(self.recovery_budgets.get(node, self.max_recovery_wait), self.max_recovery_wait)


class Outcome(StrEnum):
    RESTARTED = "restarted"
    DEFERRED = "deferred"  # not safe now
    WAITING = "waiting"  # not ready, recovering or unknown: waited for, with its own budget


@dataclass(slots=True)
class _NodeWait:
    """A pending node's wait across polls: since when it is not ready, its recovery, and how
    long its agent has been unreadable."""

    since: float
    unknown: ProgressWait | None = None
    recovery: RecoveryTracker | None = None


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One line of `rollguard plan`: what a roll would do with a node now, and why."""

    node: Node
    action: str  # restart, force-restart, defer, wait, fail, skip
    reason: str
    batch: int | None = None  # with --max-batch-size above 1: the batch it would restart in
    rack: str | None = None  # the batch's one rack, when it has one

    def to_json(self) -> dict[str, Any]:
        entry = {
            "node": self.node.name,
            "nodeId": self.node.node_id,
            "roles": sorted(self.node.roles),
            "action": self.action,
            "reason": self.reason,
        }
        if self.batch is not None:
            entry.update(batch=self.batch, rack=self.rack)
        return entry

    def text(self) -> str:
        text = f"{self.action}: {self.reason}" if self.reason else self.action
        if self.batch is not None:
            where = f", rack {self.rack}" if self.rack is not None else ""
            text = f"batch {self.batch}{where}: {text}"
        return text


@dataclass
class RollResult:
    roll_id: str
    state: RollState
    reason: str = ""
    restarted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


ClusterObserver = Callable[[], Awaitable[ClusterView]]
# A preferred leader election of these (topic, partition)s; RollguardError when it fails.
LeaderElection = Callable[[Sequence[tuple[str, int]]], Awaitable[None]]
Progress = Callable[[Node, str, RecoveryTracker | None], None]


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
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_progress: Progress | None = None,
        elect_leaders: LeaderElection | None = None,
    ) -> None:
        self.platform = platform
        self.observe_cluster = observe_cluster
        self.agents = agents
        self.journal = journal
        self.events = events
        self.settings = settings
        self.policy = policy or RetryPolicy()  # transient Admin API errors
        self.lease = lease
        self._clock = clock
        self._sleep = sleep
        self._on_progress = on_progress or (lambda node, text, tracker: None)
        self._said: dict[tuple[str, str], str] = {}  # (node, kind) -> last reason logged
        self._waits: dict[str, _NodeWait] = {}
        self.elect_leaders = elect_leaders

    # ---- the plan -------------------------------------------------------------------------

    def _wanted(self, node: Node, view: PlatformView) -> tuple[bool, str]:
        s = self.settings
        if node.name in s.skip:
            return False, "skipped with --skip"
        if view.opted_out:
            return False, "opted out by annotation"
        if s.only:
            return (node.name in s.only), "not named by --only"
        if s.all_nodes or not view.up_to_date or view.stuck:
            return True, ""
        return False, "already runs the desired revision"

    def _check_names(self, nodes: list[Node]) -> None:
        known = {n.name for n in nodes}
        unknown = sorted((self.settings.only | self.settings.skip) - known)
        if unknown:
            raise RollFailed(
                f"no node named {', '.join(unknown)} (the nodes are {', '.join(sorted(known))})"
            )

    async def plan(self) -> list[PlanEntry]:
        """What a roll would do now, in order, with the reason for each node; no action.
        RollFailed when the cluster cannot be observed: a plan without it would be a guess."""
        nodes = await self.platform.nodes()
        self._check_names(nodes)
        cluster = await self._cluster()
        if cluster is None:
            raise RollFailed(
                "the Kafka Admin API cannot be reached: no plan can be made without the cluster"
            )
        views = {n.name: await self._view(n, cluster) for n in nodes}
        order = roll_order(
            nodes, {n.node_id: views[n.name].ready for n in nodes}, cluster.active_controller
        )
        entries = []
        brokers: list[Node] = []
        for node in order:
            wanted, why = self._wanted(node, views[node.name])
            if not wanted:
                entries.append(PlanEntry(node, "skip", why))
                continue
            if self.settings.max_batch_size > 1 and _batchable(node, views[node.name]):
                brokers.append(node)
                continue
            answer = None if views[node.name].ready else await self._ask(node, log=False)
            action = decide(
                node,
                views[node.name],
                cluster,
                agent=answer,
                timeout=self.settings.operation_timeout,
            )
            entries.append(_plan_entry(node, action))
        if brokers:
            entries += self._plan_batches(brokers, cluster)
        return entries

    def _plan_batches(self, brokers: list[Node], cluster: ClusterView) -> list[PlanEntry]:
        """The batches the ready brokers would restart in, each assumed back in sync before
        the next, and the ones held back now (waiting for the cluster), with the reasons."""
        batches, held = plan_batches(
            brokers,
            cluster,
            max_size=self.settings.max_batch_size,
            rack_aware=self.settings.rack_aware,
        )
        entries = [
            PlanEntry(member, "restart", batch.reason, number, batch.rack)
            for number, batch in enumerate(batches, 1)
            for member in batch.members
        ]
        entries += [PlanEntry(h.node, "defer", h.reason) for h in held]
        return entries

    # ---- the roll -------------------------------------------------------------------------

    async def roll(self, roll_id: str, *, resume: bool = False) -> RollResult:
        nodes = await self.platform.nodes()
        self._check_names(nodes)
        record = await asyncio.to_thread(self.journal.load, roll_id) if resume else None
        if resume and record is None:
            raise RollFailed(f"no journal for roll {roll_id} to resume")
        if self.lease is not None:
            await self.lease.acquire()
        try:
            # Never act blind: every agent answers over TLS, or the roll does not start.
            await preflight(self.agents, nodes, self.settings.max_clock_skew, self.events)
            if record is None:
                record = RollRecord(roll_id, now_text())
            return await self._guarded(record, nodes, resume)
        finally:
            if self.lease is not None:
                await self.lease.release()

    async def _guarded(self, record: RollRecord, nodes: list[Node], resume: bool) -> RollResult:
        record.state, record.reason = RollState.RUNNING, ""
        started = self._clock()
        await self._save(record)
        self.events.write(None, "roll-start", "resumed" if resume else "")
        try:
            result = await self._with_lease(self._roll(record, nodes))
        except RollguardError as exc:
            record.state, record.reason = RollState.FAILED, str(exc)
            try:
                await self._save(record)
            except RollguardError as also:
                logger.error("the roll failed and its journal cannot say so: %s", also)
            self.events.write(None, "roll-failed", str(exc), seconds=self._clock() - started)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.state, record.reason = RollState.INTERRUPTED, "interrupted"
            await self._save(record)
            self.events.write(None, "roll-interrupted", seconds=self._clock() - started)
            raise
        record.state = RollState.COMPLETED
        await self._save(record)
        self.events.write(None, "roll-completed", seconds=self._clock() - started)
        return result

    async def _with_lease(self, work: Awaitable[RollResult]) -> RollResult:
        """Run the roll while the lease is renewed beside it; a lost lease stops it at once."""
        if self.lease is None:
            return await work
        roll = asyncio.ensure_future(work)
        renewal = asyncio.create_task(self._renew())
        try:
            await asyncio.wait({roll, renewal}, return_when=asyncio.FIRST_COMPLETED)
            if not roll.done():
                roll.cancel()
                await asyncio.gather(roll, return_exceptions=True)
                renewal.result()  # raises RollFailed: the lease was lost
            return roll.result()
        finally:
            for task in (roll, renewal):
                task.cancel()
            await asyncio.gather(roll, renewal, return_exceptions=True)

    async def _renew(self) -> None:
        assert self.lease is not None
        while True:
            await self._sleep(self.settings.lease_renew_interval)
            try:
                await self.lease.renew()
            except RollguardError as exc:
                raise RollFailed(f"lost the roll lease, stopping: {exc}") from exc

    async def _save(self, record: RollRecord) -> None:
        # A ConfigMap store makes blocking HTTP calls: keep them off the event loop.
        await asyncio.to_thread(self.journal.save, record)

    async def _roll(self, record: RollRecord, nodes: list[Node]) -> RollResult:
        result = RollResult(record.roll_id, RollState.RUNNING)
        pending: list[Node] = []
        for node in nodes:
            done = record.nodes.get(node.name)
            if done is not None and done.status in (NodeStatus.RESTARTED, NodeStatus.SKIPPED):
                continue
            if (
                done is not None
                and done.status is NodeStatus.RESTARTING
                and await self._verify_restart(node, done, record)
            ):
                result.restarted.append(node.name)
                continue
            view = await self.platform.observe(node)
            wanted, why = self._wanted(node, view)
            if not wanted:
                record.nodes[node.name] = NodeRecord(NodeStatus.SKIPPED, now_text(), reason=why)
                await self._save(record)
                self.events.write(node.name, "skip", why)
                result.skipped.append(node.name)
                continue
            pending.append(node)

        waiting: ProgressWait | None = None
        while pending:
            cluster = await self._cluster()
            views = {n.name: await self._view(n, cluster) for n in pending}
            order = roll_order(
                pending,
                {n.node_id: views[n.name].ready for n in pending},
                cluster.active_controller if cluster else None,
            )
            deferred: dict[Node, Defer] = {}
            waiting_nodes = False
            restarted = False
            brokers: list[Node] = []  # ready brokers, for a batch once the others are handled
            for node in order:
                if self.settings.max_batch_size > 1 and _batchable(node, views[node.name]):
                    self._waits.pop(node.name, None)
                    brokers.append(node)
                    continue
                outcome, action = await self._handle(node, views[node.name], cluster, record)
                if outcome is Outcome.DEFERRED:
                    assert isinstance(action, Defer)
                    deferred[node] = action
                elif outcome is Outcome.WAITING:
                    waiting_nodes = True
                else:
                    pending.remove(node)
                    result.restarted.append(node.name)
                    restarted = True
                    break  # the cluster changed: observe it again before the next decision
            if not restarted and brokers:
                plan = next_batch(
                    brokers,
                    cluster,
                    max_size=self.settings.max_batch_size,
                    rack_aware=self.settings.rack_aware,
                    explain=False,
                )
                if plan.batch is not None:
                    await self._restart_batch(plan.batch, views, record)
                    for member in plan.batch.members:
                        pending.remove(member)
                        result.restarted.append(member.name)
                    restarted = True
                for held in plan.held:
                    if held.blockers and not restarted:
                        deferred[held.node] = Defer(held.reason, held.blockers)
                        self._say(held.node.name, "defer", "defer", held.reason)
            if restarted:
                waiting = None
                continue
            now = self._clock()
            if waiting_nodes:
                # A node is being waited for (readiness, recovery, an unknown agent), each
                # with its own budget: the safety budget runs only when nothing else does.
                waiting = None
            else:
                # Nothing may be restarted now. Not a failure: wait while the cluster progresses.
                waiting = waiting or ProgressWait(self.settings.safety_wait, now)
                waiting.observe(now, sum(b.deficit for d in deferred.values() for b in d.blockers))
                if waiting.expired(now):
                    reasons = "; ".join(f"{n.name}: {d.reason}" for n, d in deferred.items())
                    raise RollFailed(
                        f"no restart became safe: {format_duration(self.settings.safety_wait)} "
                        f"without progress (--safety-wait) after waiting "
                        f"{format_duration(waiting.waited(now))}: {reasons}"
                    )
            for node, action in deferred.items():
                self._on_progress(node, f"waiting until safe: {action.reason}", None)
            await self._sleep(self.settings.poll_interval)
        result.state = RollState.COMPLETED
        return result

    async def _cluster(self) -> ClusterView | None:
        """Kafka's view; transient errors retried with the shared policy, then None (nothing
        can be proven safe without it, so every restart waits)."""
        if self.observe_cluster is None:
            return None
        observe = self.observe_cluster
        try:
            return await retry_async(
                observe,
                self.policy,
                operation="kafka-admin",
                retriable=(RollguardError,),
                sleep=self._sleep,
            )
        except RollguardError as exc:
            self._say(None, "admin", "admin-unavailable", str(exc), logging.WARNING)
            return None

    async def _view(self, node: Node, cluster: ClusterView | None) -> PlatformView:
        """The platform's view; a controller-only node is ready only when the KRaft quorum
        says it is caught up (it has no BrokerState that could say so)."""
        view = await self.platform.observe(node)
        # Without the quorum its readiness cannot be judged; the quorum check that every
        # controller restart needs then holds it back anyway.
        if (
            view.ready
            and node.is_controller
            and not node.is_broker
            and cluster is not None
            and cluster.quorum is not None
        ):
            caught_up = voter_caught_up(
                node.node_id, cluster.quorum, cluster.quorum_fetch_timeout_ms
            )
            view = replace(view, ready=caught_up)
        return view

    async def _handle(
        self, node: Node, view: PlatformView, cluster: ClusterView | None, record: RollRecord
    ) -> tuple[Outcome, Action]:
        """One look at one pending node. Waiting for it (not ready, recovering, unknown) does
        not hold the poll: other nodes may be restarted meanwhile when the safety rules allow,
        and its wait goes on at the next poll, with its own budget."""
        s = self.settings
        answer: AgentAnswer | None = None
        wait = None
        if view.ready:
            self._waits.pop(node.name, None)
        else:  # ask its agent at once and at every poll, not after a timeout
            answer = await self._ask(node)
            wait = self._waits.setdefault(node.name, _NodeWait(self._clock()))
        action = decide(
            node,
            view,
            cluster,
            agent=answer,
            waited=self._clock() - wait.since if wait else 0.0,
            timeout=s.operation_timeout,
            force_unknown=s.on_agent_unreachable is OnAgentUnreachable.FORCE,
        )
        if wait is not None:
            if isinstance(answer, AgentReport) and not is_recovering(answer):
                wait.recovery = None  # out of recovery, by its own word
            if not isinstance(action, AwaitUnknown):
                wait.unknown = None
        if isinstance(action, AwaitRecovery):
            assert wait is not None
            wait.recovery = wait.recovery or self._tracker(node)
            self._recovery_step(node, wait.recovery, answer)
            return Outcome.WAITING, action
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
        if isinstance(action, AwaitReady | AwaitUnknown):
            self._say(node.name, "wait", "wait-ready", action.reason)
            self._on_progress(node, f"waiting for readiness: {describe_answer(answer)}", None)
            return Outcome.WAITING, action
        if isinstance(action, Fail):
            raise RollFailed(action.reason)
        if isinstance(action, Defer):
            self._say(node.name, "defer", "defer", action.reason)
            return Outcome.DEFERRED, action
        assert isinstance(action, Restart)
        self._waits.pop(node.name, None)
        await self._restart(node, view, record, action.reason)
        return Outcome.RESTARTED, action

    def _tracker(self, node: Node) -> RecoveryTracker:
        s = self.settings
        return RecoveryTracker(s.stall_timeout, s.recovery_budget(node.name), started=self._clock())

    async def _restart(
        self, node: Node, view: PlatformView, record: RollRecord, reason: str
    ) -> None:
        # The intent goes on record before the restart: a roller killed after this line and
        # resumed checks the node's identity, and restarts it only if it did not change.
        record.nodes[node.name] = NodeRecord(
            NodeStatus.RESTARTING, now_text(), view.instance, reason
        )
        await self._save(record)
        self.events.write(node.name, "restart", reason, instance=view.instance)
        logger.info("%s: restarting (%s)", node, reason)
        self._on_progress(node, "restarting", None)
        try:
            await self.platform.restart(node)
        except RollguardError as exc:
            record.nodes[node.name] = NodeRecord(
                NodeStatus.FAILED, now_text(), view.instance, str(exc)
            )
            await self._save(record)
            raise RollFailed(str(exc)) from exc
        await self._await_restarted(node, record, view.instance)

    async def _restart_batch(
        self, batch: Batch, views: dict[str, PlatformView], record: RollRecord
    ) -> None:
        """Restart the members together, then wait for each as for a single node. Every
        member's intent is saved before the first restart, so a roller killed in between and
        resumed restarts none of them twice (their identities tell which ones did restart)."""
        number = record.next_batch()
        members = batch.members
        for m in members:
            record.nodes[m.name] = NodeRecord(
                NodeStatus.RESTARTING, now_text(), views[m.name].instance, batch.reason, number
            )
        await self._save(record)
        names = ", ".join(m.name for m in members)
        logger.info("batch %d: restarting %s (%s)", number, names, batch.reason)
        for m in members:
            self.events.write(
                m.name,
                "restart",
                batch.reason,
                instance=views[m.name].instance,
                batch=number,
                rack=batch.rack,
            )
            self._on_progress(m, f"restarting (batch {number})", None)
        outcomes = await asyncio.gather(
            *(self.platform.restart(m) for m in members), return_exceptions=True
        )
        failures: list[str] = []
        started: list[Node] = []
        for m, outcome in zip(members, outcomes, strict=True):
            if isinstance(outcome, RollguardError):
                record.nodes[m.name] = NodeRecord(
                    NodeStatus.FAILED, now_text(), views[m.name].instance, str(outcome), number
                )
                failures.append(f"{m.name}: {outcome}")
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                started.append(m)
        if failures:
            await self._save(record)
        # A failed member stops the roll, but only once the others are back: stopping while
        # they restart would leave their partitions short with nobody watching.
        for m in started:
            try:
                await self._await_restarted(m, record, views[m.name].instance)
            except RollFailed as exc:
                failures.append(str(exc))
        if failures:
            raise RollFailed(f"batch {number} ({names}): {'; '.join(failures)}")
        await self._elect_preferred(members, number)

    async def _elect_preferred(self, members: Sequence[Node], number: int) -> None:
        """Give the batch's members back the leadership they lost (ElectLeaders, preferred),
        and watch it come back for a moment. Leadership balance is not safety: a failed
        election or a slow one is logged, never fatal."""
        s = self.settings
        if not s.elect_preferred_leaders or self.elect_leaders is None:
            return
        ids = {m.node_id for m in members}

        def unbalanced(cluster: ClusterView) -> list[tuple[str, int]]:
            return [
                (p.topic, p.partition)
                for p in cluster.partitions
                if p.replicas
                and p.replicas[0] in ids
                and p.replicas[0] in p.isr
                and p.leader != p.replicas[0]
            ]

        cluster = await self._cluster()
        wanted = unbalanced(cluster) if cluster is not None else []
        if not wanted:
            return
        try:
            await self.elect_leaders(wanted)
        except RollguardError as exc:
            self._say(None, "elect", "elect-failed", f"batch {number}: {exc}", logging.WARNING)
            return
        self.events.write(None, "elect-leaders", f"batch {number}", partitions=len(wanted))
        deadline = self._clock() + s.election_wait
        while True:
            cluster = await self._cluster()
            left = unbalanced(cluster) if cluster is not None else wanted
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

    async def _verify_restart(self, node: Node, done: NodeRecord, record: RollRecord) -> bool:
        """Resume: a node whose restart is on record but not its outcome. Judged by identity:
        changed (or a new one on its way) means it restarted, so wait for it; unchanged means the
        restart never happened, so it goes back to the pending nodes (and the safety checks)."""
        waiting = ProgressWait(self.settings.safety_wait, self._clock())
        while await self.platform.restart_pending(node):
            # The earlier roller's restart command still runs: judge the node once it is done.
            self._on_progress(node, "an earlier restart command is still running", None)
            if waiting.expired(self._clock()):
                raise RollFailed(
                    f"{node.name}: the restart command of the interrupted roll still runs after "
                    f"{format_duration(self.settings.safety_wait)}; not acting on it"
                )
            await self._sleep(self.settings.poll_interval)
        view = await self.platform.observe(node)
        if done.instance is not None and view.instance == done.instance:
            logger.warning("%s: the restart on record did not happen; it is pending again", node)
            self.events.write(node.name, "restart-not-observed", "identity unchanged")
            return False
        logger.info("%s: restart on record; waiting for it, not restarting", node)
        await self._await_restarted(node, record, done.instance)
        return True

    async def _await_restarted(self, node: Node, record: RollRecord, before: str | None) -> None:
        """After a restart: the new process ready (by identity; log recovery waited for, never
        restarted), then the quorum caught up (controllers) and every ISR rejoined (brokers)."""
        s = self.settings
        started = self._clock()
        unknown: ProgressWait | None = None
        while True:
            view = await self._view(node, await self._cluster())
            answer = await self._ask(node)
            if is_recovering(answer):
                await self._wait_recovery(node, answer)
                continue
            new = before is None or (view.instance is not None and view.instance != before)
            if view.ready and new:
                break
            now = self._clock()
            if now - started >= s.operation_timeout:
                if not agent_unknown(node, answer) or view.process_gone:
                    raise RollFailed(
                        f"{node.name} is not ready {format_duration(s.operation_timeout)} after "
                        f"its restart (agent: {describe_answer(answer)}); it was restarted once "
                        "in this roll and is not restarted again"
                    )
                unknown = unknown or ProgressWait(s.safety_wait, now)
                if unknown.expired(now):
                    raise RollFailed(
                        f"{node.name} is not ready after its restart and its agent cannot be "
                        f"read ({describe_answer(answer)}) for "
                        f"{format_duration(unknown.waited(now))}; not restarting it again"
                    )
            if new:
                text = f"waiting for readiness: {describe_answer(answer)}"
            else:  # the process from before the restart is still the one that answers
                text = "waiting for the new process to start"
            self._on_progress(node, text, None)
            await self._sleep(s.poll_interval)
        if node.is_controller:
            await self._await_quorum(node)
        if node.is_broker:
            await self._await_isr(node)
        previous = record.nodes.get(node.name)
        batch = previous.batch if previous is not None else None
        record.nodes[node.name] = NodeRecord(NodeStatus.RESTARTED, now_text(), before, batch=batch)
        await self._save(record)
        self.events.write(node.name, "ready", "restarted, ready and in sync")
        logger.info("%s: ready again", node)
        self._on_progress(node, "ready", None)

    async def _await_quorum(self, node: Node) -> None:
        """Until the controller's new process has fetched from the leader: a caught-up time
        later than the leader's time when it came back (the leader's clock on both sides)."""
        since: int | None = None
        waiting = ProgressWait(self.settings.safety_wait, self._clock())
        while True:
            cluster = await self._cluster()
            quorum = cluster.quorum if cluster is not None else None
            if quorum is not None and node.node_id not in {v.node_id for v in quorum.voters}:
                return  # not a voter (an observer or a broker-only id): nothing to wait for
            if quorum is not None and cluster is not None:
                leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
                if since is None and leader is not None:
                    since = leader.last_caught_up_ms
                if since is not None and voter_caught_up(
                    node.node_id, quorum, cluster.quorum_fetch_timeout_ms, since_ms=since
                ):
                    return
            now = self._clock()
            if waiting.expired(now):
                raise RollFailed(
                    f"{node.name} has not caught up with the KRaft quorum leader "
                    f"{format_duration(waiting.waited(now))} after its restart"
                )
            self._on_progress(node, "catching up with the quorum", None)
            await self._sleep(self.settings.poll_interval)

    async def _await_isr(self, node: Node) -> None:
        """Until the restarted broker is back in the ISR of every partition it hosts: before
        that, restarting another replica of those partitions could take them below min ISR."""
        waiting = ProgressWait(self.settings.safety_wait, self._clock())
        while True:
            cluster = await self._cluster()
            lagging = catching_up(node.node_id, cluster) if cluster is not None else None
            if lagging == []:
                return
            now = self._clock()
            if lagging is not None:
                waiting.observe(now, len(lagging))
            if waiting.expired(now):
                what = (
                    f"{len(lagging)} partitions ({describe_partitions(lagging)})"
                    if lagging
                    else "its partitions (the Admin API cannot be reached)"
                )
                raise RollFailed(
                    f"{node.name} has not rejoined the ISR of {what}: no progress for "
                    f"{format_duration(self.settings.safety_wait)} (--safety-wait)"
                )
            if lagging:
                text = f"catching up: {len(lagging)} partitions not yet in sync"
                self._say(node.name, "catch-up", "catch-up", text, count=len(lagging))
                self._on_progress(node, text, None)
            await self._sleep(self.settings.poll_interval)

    async def _ask(self, node: Node, *, log: bool = True) -> AgentAnswer | None:
        if node.agent_url is None:
            return None
        answer = await self.agents.broker_state(node.agent_url, once=True)
        if log:
            figures = {}
            if isinstance(answer, AgentReport):
                figures["brokerState"] = int(answer.report.broker_state)
                if answer.report.recovery is not None:
                    figures["remainingLogsToRecover"] = answer.report.recovery.remaining_logs
                    figures["remainingSegmentsToRecover"] = (
                        answer.report.recovery.remaining_segments
                    )
            self.events.write(node.name, "observe-agent", describe_answer(answer), **figures)
        return answer

    def _say(
        self,
        node: str | None,
        kind: str,
        action: str,
        reason: str,
        level: int = logging.INFO,
        **figures: Any,
    ) -> None:
        """Log and journal a wait once per change of its reason, not at every poll."""
        if self._said.get((node or "", kind)) == reason:
            return
        self._said[(node or "", kind)] = reason
        logger.log(level, "%s: %s", node or "cluster", reason)
        self.events.write(node, action, reason, **figures)

    async def _wait_recovery(self, node: Node, answer: AgentAnswer | None) -> None:
        """Wait while the restarted broker recovers; RollFailed when it stalls or takes too
        long. It is never restarted: that would start its recovery over."""
        tracker = self._tracker(node)
        while not (isinstance(answer, AgentReport) and not is_recovering(answer)):
            # An unreadable agent in the middle of a recovery: still recovering, for all we know.
            self._recovery_step(node, tracker, answer)
            await self._sleep(self.settings.poll_interval)
            answer = await self._ask(node)

    def _recovery_step(
        self, node: Node, tracker: RecoveryTracker, answer: AgentAnswer | None
    ) -> None:
        """Record one look at a recovering broker; RollFailed on a stall or past the budget."""
        if isinstance(answer, AgentReport) and answer.report.recovery is not None:
            recovery = answer.report.recovery
            tracker.observe(self._clock(), recovery.remaining_logs, recovery.remaining_segments)
        verdict = tracker.verdict(self._clock())
        text = tracker.describe()
        self._on_progress(node, "recovering: " + text, tracker)
        logger.info("%s is performing log recovery: %s", node, text)
        self.events.write(node.name, "wait-recovery", verdict.value, **_figures(tracker))
        if verdict is Verdict.STALLED:
            raise RollFailed(
                f"{node.name} is performing log recovery but made no progress "
                f"for {format_duration(self.settings.stall_timeout)} ({text}); not "
                "restarting it"
            )
        if verdict is Verdict.TOO_LONG:
            from_history = node.name in self.settings.recovery_budgets
            raise RollFailed(
                f"{node.name} is still performing log recovery after "
                f"{format_duration(self.settings.recovery_budget(node.name))}"
                f"{' (its budget from history)' if from_history else ''}"
                f" ({text}); not "
                "restarting it"
            )


def _batchable(node: Node, view: PlatformView) -> bool:
    """A ready broker that is not a controller: the batch planner's to place. Controllers,
    combined nodes and brokers that are not ready are handled alone, as in a serial roll."""
    return node.is_broker and not node.is_controller and view.ready and not view.stuck


def _plan_entry(node: Node, action: Action) -> PlanEntry:
    if isinstance(action, Restart):
        return PlanEntry(node, "force-restart" if action.force else "restart", action.reason)
    if isinstance(action, Defer):
        return PlanEntry(node, "defer", action.reason)
    if isinstance(action, Fail):
        return PlanEntry(node, "fail", action.reason)
    return PlanEntry(node, "wait", action.reason)


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

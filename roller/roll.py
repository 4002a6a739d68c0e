"""The roll loop: observe, decide with the pure rules, act, record; one node at a time.

    for each pass:   observe Kafka (partitions, quorum) -> order the pending nodes
      for each node: platform view -> stuck? not ready? recovering? blocked? -> act
                     a restart ends the pass (the cluster changed); a deferral moves on
    a pass that restarted nothing waits (shared retry policy) and tries again, up to
    --retry-max-retries times, then fails with the reasons of every deferral.

The one rule above all others: a broker its agent reports in RECOVERY is never restarted. The
roller waits for it while it makes progress (up to --max-recovery-wait) and gives up on it,
still without restarting it, when it has made none for --stall-timeout.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from roller.agent_client import AgentAnswer, AgentClient, AgentReport
from roller.decide import (
    AwaitReady,
    AwaitRecovery,
    Defer,
    Fail,
    Restart,
    decide,
    describe_answer,
    is_recovering,
)
from roller.journal import (
    EventLog,
    JournalStore,
    NodeRecord,
    NodeStatus,
    RollRecord,
    RollState,
    now_text,
)
from roller.model import ClusterView, Node, PlatformView
from roller.platform import Platform, RestartError
from roller.progress import RecoveryTracker, Verdict
from roller.safety import roll_order
from shared.errors import RollguardError
from shared.retry import RetryPolicy, backoff_ms

logger = logging.getLogger(__name__)


class RollFailed(RollguardError):
    """The roll stopped; the message names the node and the cause."""


@dataclass(frozen=True, slots=True)
class RollSettings:
    operation_timeout: float = 300.0
    poll_interval: float = 2.0
    max_recovery_wait: float = 6 * 3600.0
    stall_timeout: float = 600.0
    only: frozenset[str] = frozenset()  # node names; empty: every node that needs it
    skip: frozenset[str] = frozenset()
    all_nodes: bool = False  # restart nodes that are already up to date too


class Outcome(StrEnum):
    RESTARTED = "restarted"
    DEFERRED = "deferred"
    REPLAN = "replan"  # the node changed (became ready after waiting): plan again


@dataclass
class RollResult:
    roll_id: str
    state: RollState
    reason: str = ""
    restarted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


ClusterObserver = Callable[[], Awaitable[ClusterView]]


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
        policy: RetryPolicy,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        uniform: Callable[[], float] = random.random,
        on_progress: Callable[[Node, str, RecoveryTracker | None], None] | None = None,
    ) -> None:
        self.platform = platform
        self.observe_cluster = observe_cluster
        self.agents = agents
        self.journal = journal
        self.events = events
        self.settings = settings
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self._uniform = uniform
        self._on_progress = on_progress or (lambda node, text, tracker: None)

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

    async def plan(self) -> list[tuple[Node, str]]:
        """What a roll would do now, in order, with the reason for each node: no action."""
        nodes = await self.platform.nodes()
        views = {n.name: await self.platform.observe(n) for n in nodes}
        cluster = await self._cluster()
        order = roll_order(
            nodes,
            {n.node_id: views[n.name].ready for n in nodes},
            cluster.active_controller if cluster else None,
        )
        lines = []
        for node in order:
            wanted, why = self._wanted(node, views[node.name])
            if not wanted:
                lines.append((node, f"skip: {why}"))
                continue
            action = decide(node, views[node.name], cluster,
                            timeout=self.settings.operation_timeout)  # fmt: skip
            lines.append((node, _plan_text(action)))
        return lines

    # ---- the roll -------------------------------------------------------------------------

    async def roll(self, roll_id: str, *, resume: bool = False) -> RollResult:
        record = self.journal.load(roll_id) if resume else None
        if resume and record is None:
            raise RollFailed(f"no journal for roll {roll_id} to resume")
        if record is None:
            record = RollRecord(roll_id, now_text())
        record.state, record.reason = RollState.RUNNING, ""
        self.journal.save(record)
        self.events.write(None, "roll-start", "resumed" if resume else "")
        try:
            result = await self._roll(record)
        except RollFailed as exc:
            record.state, record.reason = RollState.FAILED, str(exc)
            self.journal.save(record)
            self.events.write(None, "roll-failed", str(exc))
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            record.state, record.reason = RollState.INTERRUPTED, "interrupted"
            self.journal.save(record)
            self.events.write(None, "roll-interrupted")
            raise
        record.state = RollState.COMPLETED
        self.journal.save(record)
        self.events.write(None, "roll-completed")
        return result

    async def _roll(self, record: RollRecord) -> RollResult:
        result = RollResult(record.roll_id, RollState.RUNNING)
        nodes = await self.platform.nodes()
        pending: list[Node] = []
        for node in nodes:
            done = record.nodes.get(node.name)
            if done is not None and done.status in (NodeStatus.RESTARTED, NodeStatus.SKIPPED):
                continue
            if done is not None and done.status is NodeStatus.RESTARTING:
                # Killed between the intent and the outcome: never restart it again, only
                # wait for it (it may be recovering from exactly that restart).
                logger.info("%s: restart already on record; waiting for it, not restarting", node)
                await self._await_restarted(node, record, done.instance)
                result.restarted.append(node.name)
                continue
            view = await self.platform.observe(node)
            wanted, why = self._wanted(node, view)
            if not wanted:
                record.nodes[node.name] = NodeRecord(NodeStatus.SKIPPED, now_text(), reason=why)
                self.journal.save(record)
                self.events.write(node.name, "skip", why)
                result.skipped.append(node.name)
                continue
            pending.append(node)

        idle_passes = 0
        while pending:
            cluster = await self._cluster()
            views = {n.name: await self.platform.observe(n) for n in pending}
            order = roll_order(
                pending,
                {n.node_id: views[n.name].ready for n in pending},
                cluster.active_controller if cluster else None,
            )
            deferred: dict[str, str] = {}
            changed = False
            for node in order:
                outcome, reason = await self._handle(node, views[node.name], cluster, record)
                if outcome is Outcome.DEFERRED:
                    deferred[node.name] = reason
                    continue
                if outcome is Outcome.RESTARTED:
                    pending.remove(node)
                    result.restarted.append(node.name)
                changed = True
                break  # the cluster changed: observe it again before the next decision
            if changed:
                idle_passes = 0
                continue
            if idle_passes >= self.policy.max_retries:
                reasons = "; ".join(f"{name}: {why}" for name, why in deferred.items())
                raise RollFailed(
                    f"gave up after {idle_passes + 1} passes without a safe restart: {reasons}"
                )
            delay = backoff_ms(self.policy, idle_passes, self._uniform()) / 1000
            idle_passes += 1
            logger.info("no node can be restarted safely now; trying again in %.1fs", delay)
            await self._sleep(delay)
        result.state = RollState.COMPLETED
        return result

    async def _cluster(self) -> ClusterView | None:
        if self.observe_cluster is None:
            return None
        try:
            return await self.observe_cluster()
        except RollguardError as exc:
            logger.warning("cannot observe the cluster through the Admin API: %s", exc)
            self.events.write(None, "admin-unavailable", str(exc))
            return None

    async def _handle(self, node: Node, view: PlatformView, cluster: ClusterView | None,
                      record: RollRecord) -> tuple[Outcome, str]:  # fmt: skip
        timeout = self.settings.operation_timeout
        action = decide(node, view, cluster, timeout=timeout)
        if isinstance(action, AwaitReady):
            if await self._wait_ready(node, timeout):
                return Outcome.REPLAN, "became ready"
            answer = await self._ask(node)
            action = decide(node, view, cluster, waited=True, agent=answer, timeout=timeout)
            if isinstance(action, AwaitRecovery):
                await self._wait_recovery(node, answer)
                return Outcome.REPLAN, "recovered"
        if isinstance(action, Fail):
            raise RollFailed(action.reason)
        if isinstance(action, Defer):
            logger.info("%s: deferred: %s", node, action.reason)
            self.events.write(node.name, "defer", action.reason)
            return Outcome.DEFERRED, action.reason
        assert isinstance(action, Restart)
        await self._restart(node, view, record, action.reason)
        return Outcome.RESTARTED, ""

    async def _restart(
        self, node: Node, view: PlatformView, record: RollRecord, reason: str
    ) -> None:
        # The intent goes on record before the restart: a roller killed after this line and
        # resumed will wait for this node, never restart it again.
        record.nodes[node.name] = NodeRecord(
            NodeStatus.RESTARTING, now_text(), view.instance, reason
        )
        self.journal.save(record)
        self.events.write(node.name, "restart", reason)
        logger.info("%s: restarting (%s)", node, reason)
        self._on_progress(node, "restarting", None)
        try:
            await self.platform.restart(node)
        except RestartError as exc:
            record.nodes[node.name] = NodeRecord(
                NodeStatus.FAILED, now_text(), view.instance, str(exc)
            )
            self.journal.save(record)
            raise RollFailed(str(exc)) from exc
        await self._await_restarted(node, record, view.instance)

    async def _await_restarted(self, node: Node, record: RollRecord, before: str | None) -> None:
        """Wait until a restarted node is ready again; recovery is waited for, never restarted."""
        if not await self._wait_ready(node, self.settings.operation_timeout, before):
            answer = await self._ask(node)
            if not is_recovering(answer):
                raise RollFailed(
                    f"{node.name} is not ready {self.settings.operation_timeout:g}s "
                    f"after its restart (agent: {describe_answer(answer)}); it was restarted "
                    "once in this roll and is not restarted again"
                )
            await self._wait_recovery(node, answer)
            if not await self._wait_ready(node, self.settings.operation_timeout, before):
                raise RollFailed(
                    f"{node.name} finished log recovery but is not ready "
                    f"{self.settings.operation_timeout:g}s later"
                )
        record.nodes[node.name] = NodeRecord(NodeStatus.RESTARTED, now_text(), before)
        self.journal.save(record)
        self.events.write(node.name, "ready", "restarted and ready")
        logger.info("%s: ready again", node)
        self._on_progress(node, "ready", None)

    async def _wait_ready(self, node: Node, timeout: float, before: str | None = None) -> bool:
        deadline = self._clock() + timeout
        while True:
            view = await self.platform.observe(node)
            # On Kubernetes the old pod may still look ready: only a new instance counts.
            if view.ready and (before is None or view.instance != before):
                return True
            if self._clock() >= deadline:
                return False
            self._on_progress(node, "waiting for readiness", None)
            await self._sleep(self.settings.poll_interval)

    async def _ask(self, node: Node) -> AgentAnswer | None:
        if node.agent_url is None:
            return None
        answer = await self.agents.broker_state(node.agent_url)
        figures = {}
        if isinstance(answer, AgentReport):
            figures["brokerState"] = int(answer.report.broker_state)
            if answer.report.recovery is not None:
                figures["remainingLogsToRecover"] = answer.report.recovery.remaining_logs
                figures["remainingSegmentsToRecover"] = answer.report.recovery.remaining_segments
        self.events.write(node.name, "observe-agent", describe_answer(answer), **figures)
        return answer

    async def _wait_recovery(self, node: Node, answer: AgentAnswer | None) -> None:
        """Wait while the broker recovers; RollFailed when it stalls or takes too long."""
        tracker = RecoveryTracker(
            self.settings.stall_timeout, self.settings.max_recovery_wait, started=self._clock()
        )
        while True:
            if isinstance(answer, AgentReport) and answer.report.recovery is not None:
                recovery = answer.report.recovery
                tracker.observe(self._clock(), recovery.remaining_logs, recovery.remaining_segments)
            elif not is_recovering(answer):
                return  # out of recovery: readiness is judged by the caller
            verdict = tracker.verdict(self._clock())
            text = tracker.describe()
            self._on_progress(node, "recovering: " + text, tracker)
            logger.info("%s is performing log recovery: %s", node, text)
            self.events.write(node.name, "wait-recovery", verdict.value, **_figures(tracker))
            if verdict is Verdict.STALLED:
                raise RollFailed(
                    f"{node.name} is performing log recovery but made no progress "
                    f"for {self.settings.stall_timeout:g}s ({text}); not restarting "
                    "it"
                )
            if verdict is Verdict.TOO_LONG:
                raise RollFailed(
                    f"{node.name} is still performing log recovery after "
                    f"{self.settings.max_recovery_wait:g}s ({text}); not "
                    "restarting it"
                )
            await self._sleep(self.settings.poll_interval)
            answer = await self._ask(node)


def _plan_text(action: object) -> str:
    if isinstance(action, Restart):
        return action.reason if action.force else "restart"
    if isinstance(action, Defer):
        return f"defer: {action.reason}"
    if isinstance(action, Fail):
        return f"fail: {action.reason}"
    return "not ready: wait, then ask its agent"


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

"""One node the roll waits for, before its restart or after it until it is back where it was:
the frozen record kept between two looks (`NodeWait`), and the one pure `step` that judges
each look and every budget of the wait (table-tested: tests/unit/test_node_wait.py,
tests/sim/test_quorum_wait.py). Nothing here reads a clock, a network or the journal.

Phases: FOUND_NOT_READY (pending, not ready: waited for, or forced by the rules); after the
restart READY (a new process ready), QUORUM for a controller whose voter was caught up before,
ISR for a broker (back in every ISR it was in before), then `Done`. The rules of what to do are
`decide.decide` (before the restart) and `decide.after_restart`; the budgets (`budgets.py`)
are judged here: readiness (the operation timeout from the last progress: `ReadyWait`), a log
recovery (its rate and stalls within the node's recovery budget: `RecoveryTracker`; never
restarted), an unreadable agent (unknown, never "not recovering": --safety-wait while it stays
unreadable), the cluster (a voter catching up, a broker rejoining its ISRs: --safety-wait
without progress, `Budget`). A restarted node whose agent becomes unreadable mid-recovery is
still recovering for all the roller knows: its recovery's budget goes on (`watching_recovery`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import ClassVar

from rollguard.roller.model import (
    AgentAnswer,
    AgentReport,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
)
from rollguard.roller.roll.rules.budgets import (
    Budget,
    ReadyWait,
    RecoveryTracker,
    Verdict,
    recovery_failure,
)
from rollguard.roller.roll.rules.decide import (
    Action,
    AfterRestart,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    Fail,
    Restart,
    after_restart,
    decide,
)
from rollguard.roller.roll.rules.safety import (
    Baseline,
    describe_partitions,
    rejoining,
    voter_caught_up,
    voter_lag,
)
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollSettings
from rollguard.shared.converters import format_duration

__all__ = ["AwaitIsr", "AwaitQuorum", "Done", "NodeWait", "Phase", "Step", "step"]

FOUND_NOT_READY = "it was found not ready"
IN_SYNC = Baseline()  # in every ISR, its voter caught up: all a restart can take away


class Phase(StrEnum):
    FOUND_NOT_READY = "found-not-ready"  # pending: not ready before its restart
    READY = "ready"  # restarted: until a new process is ready
    QUORUM = "quorum"  # a controller: until its voter caught up with the leader again
    ISR = "isr"  # a broker: until it is back in every ISR it was in before


@dataclass(frozen=True, slots=True)
class NodeWait:
    """What the roller remembers of one node it waits for, between two looks."""

    ready: ReadyWait  # since when, and its last progress: the operation timeout's start
    phase: Phase = Phase.FOUND_NOT_READY
    before: str | None = None  # its identity before the restart (None: not known)
    base: Baseline = IN_SYNC  # where it stood before the restart
    unknown_since: float | None = None  # its agent unreadable at every look since
    recovery: RecoveryTracker | None = None  # in log recovery since the tracker's start
    budget: Budget | None = None  # QUORUM and ISR: the cluster's progress
    since_ms: int | None = None  # QUORUM: the leader's caught-up time when the node was back
    note: str = ""  # ISR: what it was already out of before its restart

    @classmethod
    def found_not_ready(
        cls, node: Node, settings: RollSettings, now: float, instance: str | None
    ) -> NodeWait:
        return cls(ReadyWait.start(now, instance, _limit(node, settings), FOUND_NOT_READY))

    @classmethod
    def after_restart(cls, node: Node, s: RollSettings, now: float, before: str | None,
                      base: Baseline = IN_SYNC, *, live: bool = False) -> NodeWait:  # fmt: skip
        """`live`: its configuration changed live, no restart: straight to its ISRs."""
        ready = ReadyWait.start(now, before, _limit(node, s))
        if live:
            return cls(ready, Phase.ISR, before, base, budget=Budget.start(now))
        return cls(ready, Phase.READY, before, base)

    @property
    def restarted(self) -> bool:
        return self.phase is not Phase.FOUND_NOT_READY

    @property
    def watching_recovery(self) -> bool:
        """A restarted node in log recovery: only its agent is asked until it ends."""
        return self.phase is Phase.READY and self.recovery is not None

    @property
    def asks_agent(self) -> bool:
        """Its agent is asked at each look (found not ready, or on its way back)."""
        return self.phase in (Phase.FOUND_NOT_READY, Phase.READY)


@dataclass(frozen=True, slots=True)
class AwaitQuorum:
    reason: str  # a restarted controller catching up with the quorum leader
    lag: int | None  # records behind the leader, when reported
    kind: ClassVar[str] = "quorum"


@dataclass(frozen=True, slots=True)
class AwaitIsr:
    reason: str  # a restarted broker not yet back in every ISR it was in before
    lagging: int  # partitions left (0: the cluster cannot be seen)
    already: str = ""  # at this look: what it was already out of before its restart
    kind: ClassVar[str] = "catch-up"


@dataclass(frozen=True, slots=True)
class Done:
    """Back where it was before its restart."""

    note: str = ""  # what it was already out of before its restart, if anything
    already: str = ""  # said at this look (the note, when it still holds)


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one look: the action, the record for the next look (None: nothing to
    remember), and `failure` when the roll cannot go on (why, naming the node: the node is not
    restarted). `at_once`: look again now, not after a poll interval (a recovery just ended, a
    phase ended)."""

    action: Action | AfterRestart | AwaitQuorum | AwaitIsr | Done
    wait: NodeWait | None
    failure: str | None = None
    verdict: Verdict | None = None  # the recovery's, with AwaitRecovery
    at_once: bool = False


def step(
    wait: NodeWait | None,
    node: Node,
    view: PlatformView | None,
    answer: AgentAnswer | None,
    cluster: ClusterView | None,
    now: float,
    settings: RollSettings,
) -> Step:
    """The next step for `node`: `wait` is what the last look left (None: a pending node
    not waited for), `view` its platform's view (None only while `wait.watching_recovery`),
    `answer` its agent's (None: no agent, or not asked: a ready node before its restart, a
    restarted one past READY), `cluster` Kafka's (None: it cannot be seen)."""
    if wait is None or wait.phase is Phase.FOUND_NOT_READY:
        assert view is not None
        return _pending(wait, node, view, answer, cluster, now, settings)
    if wait.phase is Phase.READY:
        return _after(wait, node, view, answer, now, settings)
    if wait.phase is Phase.QUORUM:
        return _quorum(wait, node, cluster, now, settings)
    return _isr(wait, node, cluster, now, settings)


def _pending(
    wait: NodeWait | None,
    node: Node,
    view: PlatformView,
    answer: AgentAnswer | None,
    cluster: ClusterView | None,
    now: float,
    s: RollSettings,
) -> Step:
    if view.ready:  # nothing to wait for: the safety rules decide
        return Step(decide(node, view, cluster), None)
    wait = wait or NodeWait.found_not_ready(node, s, now, view.instance)
    ready = wait.ready.observe(now, view.instance, answer)
    action = decide(
        node,
        view,
        cluster,
        agent=answer,
        waited=ready.waited(now),
        timeout=s.operation_timeout,
        force_unknown=s.on_agent_unreachable is OnAgentUnreachable.FORCE,
        since=ready.since,
    )
    recovery = wait.recovery
    if isinstance(answer, AgentReport) and not is_recovering(answer):
        recovery = None  # out of recovery, by its own word
    wait = replace(wait, ready=ready, recovery=recovery)
    if isinstance(action, Restart):
        return Step(action, None)
    if isinstance(action, Fail):
        return Step(action, None, failure=action.reason)
    return _waiting(
        wait,
        node,
        action,
        answer,
        now,
        s,
        lambda reason, waited: (
            f"{reason}; waited {waited} (--safety-wait). Restart it by hand once you know it "
            "is not recovering, or use --on-agent-unreachable force"
        ),
    )


def _after(
    wait: NodeWait,
    node: Node,
    view: PlatformView | None,
    answer: AgentAnswer | None,
    now: float,
    s: RollSettings,
) -> Step:
    if wait.recovery is not None:
        if isinstance(answer, AgentReport) and not is_recovering(answer):
            # Over, by its own word: look at the whole node again at once (readiness counts
            # the recovery's end as progress from that look).
            ended = AwaitReady(f"{node.name}'s log recovery ended")
            return Step(ended, replace(wait, recovery=None), at_once=True)
        # An unreadable agent in the middle of a recovery: still recovering, for all we know.
        recovering = AwaitRecovery(
            f"{node.name} is performing log recovery: {describe_answer(answer)}"
        )
        return _recovering(wait, node, recovering, answer, now, s)
    assert view is not None
    ready = wait.ready.observe(now, view.instance, answer)
    action = after_restart(
        node,
        view,
        answer,
        before=wait.before,
        waited=ready.waited(now),
        timeout=s.operation_timeout,
        since=ready.since,
        target=s.kafka_version,
    )
    wait = replace(wait, ready=ready)
    if isinstance(action, Back):
        return _next(wait, node, action, now)
    if isinstance(action, Fail):
        return Step(action, wait, failure=action.reason)
    return _waiting(
        wait,
        node,
        action,
        answer,
        now,
        s,
        lambda reason, waited: f"{reason} for {waited}; not restarting it again",
    )


def _waiting(
    wait: NodeWait,
    node: Node,
    action: AwaitReady | AwaitRecovery | AwaitUnknown | Defer,  # Defer: for a ready node only
    answer: AgentAnswer | None,
    now: float,
    s: RollSettings,
    gave_up: Callable[[str, str], str],
) -> Step:
    """A node not ready, before or after its restart: its recovery or its unreadable agent
    judged by their own budgets (`gave_up(reason, waited)`: the roll's failure when the unknown
    agent's is spent)."""
    if isinstance(action, AwaitRecovery):
        return _recovering(wait, node, action, answer, now, s)
    if not isinstance(action, AwaitUnknown):
        return Step(action, replace(wait, unknown_since=None))
    since = wait.unknown_since if wait.unknown_since is not None else now
    wait = replace(wait, unknown_since=since)
    if now - since >= s.safety_wait:
        return Step(action, wait, failure=gave_up(action.reason, format_duration(now - since)))
    return Step(action, wait)


def _next(wait: NodeWait, node: Node, action: Back | AwaitQuorum, now: float) -> Step:
    """READY or QUORUM over: the next phase at once, or `Done`."""
    if wait.phase is Phase.READY and node.is_controller and wait.base.voter_caught_up:
        return Step(
            action, replace(wait, phase=Phase.QUORUM, budget=Budget.start(now)), at_once=True
        )
    if node.is_broker:
        return Step(action, replace(wait, phase=Phase.ISR, budget=Budget.start(now)), at_once=True)
    return Step(Done(), wait)


def _quorum(
    wait: NodeWait, node: Node, cluster: ClusterView | None, now: float, s: RollSettings
) -> Step:
    """Until the controller's new process has fetched from the leader: a caught-up time later
    than the leader's own when the node came back (the leader's clock on both sides). A voter
    back from a long restart fetches the metadata log it missed for as long as its lag behind
    the leader keeps shrinking."""
    assert wait.budget is not None
    quorum = cluster.quorum if cluster is not None else None
    since, lag = wait.since_ms, None
    if quorum is not None and cluster is not None:
        if node.node_id not in {v.node_id for v in quorum.voters}:
            # not a voter (an observer, or a broker-only id): nothing to wait for
            return _next(wait, node, AwaitQuorum("not a voter", None), now)
        leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
        if since is None and leader is not None:
            since = leader.last_caught_up_ms
        if since is not None and voter_caught_up(
            node.node_id, quorum, cluster.quorum_fetch_timeout_ms, since_ms=since
        ):
            return _next(wait, node, AwaitQuorum("caught up", 0), now)
        lag = voter_lag(node.node_id, quorum)
    budget = wait.budget if lag is None else wait.budget.observe(now, lag)
    wait = replace(wait, budget=budget, since_ms=since)
    behind = f": {lag} records behind the leader" if lag else ""
    action = AwaitQuorum(f"catching up with the quorum{behind}", lag)
    if not budget.expired(now, s.safety_wait):
        return Step(action, wait)
    return Step(
        action,
        wait,
        failure=f"{node.name} has not caught up with the KRaft quorum leader "
        f"{format_duration(budget.waited(now))} after its restart"
        + (f" ({lag} records behind, no progress for "
           f"{format_duration(s.safety_wait)})" if lag else ""),
    )  # fmt: skip


def _isr(
    wait: NodeWait, node: Node, cluster: ClusterView | None, now: float, s: RollSettings
) -> Step:
    """Until the restarted broker is back in the ISR of every partition it was in before: until
    then, restarting another replica of those could take them below min ISR."""
    assert wait.budget is not None
    lagging, already, note = None, "", wait.note
    if cluster is not None:
        lagging, out = rejoining(node.node_id, cluster, wait.base)
        if out:
            note = already = f"already out of sync before its restart: {describe_partitions(out)}"
        if not lagging:
            return Step(Done(note, already), replace(wait, note=note))
    budget = wait.budget if lagging is None else wait.budget.observe(now, len(lagging))
    wait = replace(wait, budget=budget, note=note)
    count = len(lagging) if lagging else 0
    action = AwaitIsr(f"catching up: {count} partitions not yet in sync", count, already)
    if not budget.expired(now, s.safety_wait):
        return Step(action, wait)
    what = (
        f"{len(lagging)} partitions ({describe_partitions(lagging)})"
        if lagging
        else "its partitions (the Admin API cannot be reached)"
    )
    return Step(
        action,
        wait,
        failure=f"{node.name} has not rejoined the ISR of {what}: no progress for "
        f"{format_duration(s.safety_wait)} (--safety-wait)",
    )


def _recovering(
    wait: NodeWait,
    node: Node,
    action: AwaitRecovery,
    answer: AgentAnswer | None,
    now: float,
    s: RollSettings,
) -> Step:
    """One look at a node in log recovery: its figures recorded, its recovery judged."""
    tracker = wait.recovery or RecoveryTracker(
        s.stall_timeout, s.recovery_budget(node.name), started=now
    )
    if isinstance(answer, AgentReport) and answer.report.recovery is not None:
        recovery = answer.report.recovery
        tracker = tracker.observe(now, recovery.remaining_logs, recovery.remaining_segments)
    verdict = tracker.verdict(now)
    wait = replace(wait, recovery=tracker, unknown_since=None)
    return Step(action, wait, recovery_failure(node.name, tracker, verdict, s), verdict)


def _limit(node: Node, s: RollSettings) -> float:
    """Past its recovery budget plus one operation timeout, nothing counts as progress
    (`budgets.ReadyWait`)."""
    return s.recovery_budget(node.name) + s.operation_timeout

"""A restarted node from its restart until it is back where it was (pure, table-tested with
`step`): a new process by identity, ready (`after_restart`), on the roll's target Kafka version
(`on_target`), a controller caught up with the quorum leader (`quorum`), a broker back in every
ISR it was in before (`isr`), each of the last two judged by --safety-wait without progress
(`budgets.Budget`). Past the operation timeout a readable agent (or a gone process) fails the
roll: a node is never restarted twice in one roll.
"""

from __future__ import annotations

from dataclasses import replace

from rollguard.roller.model import (
    AgentAnswer,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
    is_starting,
    kafka_build,
)
from rollguard.roller.roll.node.actions import (
    AfterRestart,
    AwaitIsr,
    AwaitQuorum,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Done,
    Fail,
    Look,
)
from rollguard.roller.roll.node.before import agent_unknown
from rollguard.roller.roll.node.record import CatchUp, NodeRecord
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import (
    describe_partitions,
    rejoining,
    voter_caught_up,
    voter_lag,
)
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.converters import format_duration

__all__ = ["after_restart", "isr", "next_phase", "on_target", "quorum"]


def after_restart(
    node: Node,
    view: PlatformView,
    agent: AgentAnswer | None,
    *,
    before: str | None,
    waited: float,
    timeout: float,
    since: str = "its restart",
    target: str | None = None,
) -> AfterRestart:
    """Where a restarted node stands: `before` is its identity before the restart (None: not
    known, any ready process will do); `waited`: seconds since its last progress, and `since`
    what that was (`node_state.ReadyWait`: the restart, a new process, a BrokerState further on,
    the end of its log recovery)."""
    if is_recovering(agent):
        return AwaitRecovery(f"{node.name} is performing log recovery: {describe_answer(agent)}")
    new = before is None or (view.instance is not None and view.instance != before)
    # A platform may call a controller ready (a pod whose port accepts, a voter caught up) while
    # its agent still sees the server starting: not back until its start is over.
    if view.ready and new and not is_starting(agent):
        # Its new process by identity, or only by readiness (a controller-only node has none:
        # an answer about the old process may still be on its way).
        proven = before is not None and view.instance is not None
        return on_target(node, agent, target, waited, timeout, proven=proven)
    if waited >= timeout:
        if not agent_unknown(node, agent) or view.process_gone:
            return Fail(
                f"{node.name} is not ready {format_duration(timeout)} after {since} (agent: "
                f"{describe_answer(agent)}); it was restarted once in this roll and is not "
                "restarted again"
            )
        return AwaitUnknown(
            f"{node.name} is not ready after its restart and its agent cannot be read "
            f"({describe_answer(agent)})"
        )
    if new:
        return AwaitReady(f"waiting for readiness: {describe_answer(agent)}")
    # The process from before the restart is still the one that answers.
    return AwaitReady("waiting for the new process to start")


def on_target(
    node: Node,
    agent: AgentAnswer | None,
    target: str | None,
    waited: float,
    timeout: float,
    *,
    proven: bool,
) -> AfterRestart:
    """A restarted node ready again is back if it runs the roll's target version (if any): one
    back on another version (binaries not switched, the wrong image) stops the roll before the
    next node; one whose agent has not said yet is waited for within the operation timeout. On
    another version without `proven` (its new process not told by identity, as a controller-only
    node's is not): waited for too, the old process's last answer may still be what its agent
    says; another version at the operation timeout is the same failure."""
    running = kafka_build(agent)
    if target is None or (running is not None and running.version == target):
        on = f" on Kafka {target}" if target is not None else ""
        return Back(f"{node.name} is ready again{on}")
    if running is not None and (proven or waited >= timeout):
        return Fail(
            f"{node.name} came back on Kafka {running.version}, not on the target {target}: "
            "its binaries or image were not switched; the roll stops before the next node",
            again=True,
        )
    if running is not None:
        return AwaitReady(
            f"{node.name} says Kafka {running.version}, not yet the target {target}: waiting "
            "for its new process to say"
        )
    if waited >= timeout:
        return Fail(
            f"{node.name} is ready again but has not said which Kafka it runs "
            f"{format_duration(timeout)} after its restart (agent: {describe_answer(agent)}); "
            f"the target is {target}: not going on without seeing it"
        )
    return AwaitReady(f"{node.name} is ready; waiting for its agent to say which Kafka it runs")


def next_phase(record: NodeRecord, node: Node, action: Back | AwaitQuorum, now: float) -> Look:
    """Ready again (or QUORUM over): the next catch-up at once, or `Done`."""
    if record.catch_up is None and node.is_controller and record.base.voter_caught_up:
        quorum = replace(record, catch_up=CatchUp.QUORUM, budget=Budget.start(now))
        return Look(action, quorum, at_once=True)
    if node.is_broker:
        isr = replace(record, catch_up=CatchUp.ISR, budget=Budget.start(now))
        return Look(action, isr, at_once=True)
    return Look(Done(), record)


def quorum(
    record: NodeRecord, node: Node, cluster: ClusterView | None, now: float, s: RollSettings
) -> Look:
    """Until the controller's new process has fetched from the leader: a caught-up time later
    than the leader's own when the node came back (the leader's clock on both sides). A voter
    back from a long restart fetches the metadata log it missed for as long as its lag behind
    the leader keeps shrinking."""
    assert record.budget is not None
    quorum = cluster.quorum if cluster is not None else None
    since, lag = record.since_ms, None
    if quorum is not None and cluster is not None:
        if node.node_id not in {v.node_id for v in quorum.voters}:
            # not a voter (an observer, or a broker-only id): nothing to wait for
            return next_phase(record, node, AwaitQuorum("not a voter", None), now)
        leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
        if since is None and leader is not None:
            since = leader.last_caught_up_ms
        if since is not None and voter_caught_up(
            node.node_id, quorum, cluster.quorum_fetch_timeout_ms, since_ms=since
        ):
            return next_phase(record, node, AwaitQuorum("caught up", 0), now)
        lag = voter_lag(node.node_id, quorum)
    budget = record.budget if lag is None else record.budget.observe(now, lag)
    record = replace(record, budget=budget, since_ms=since)
    behind = f": {lag} records behind the leader" if lag else ""
    action = AwaitQuorum(f"catching up with the quorum{behind}", lag)
    if not budget.expired(now, s.safety_wait):
        return Look(action, record)
    return Look(
        action,
        record,
        failure=f"{node.name} has not caught up with the KRaft quorum leader "
        f"{format_duration(budget.waited(now))} after its restart"
        + (
            f" ({lag} records behind, no progress for {format_duration(s.safety_wait)})"
            if lag
            else ""
        ),
    )


def isr(
    record: NodeRecord, node: Node, cluster: ClusterView | None, now: float, s: RollSettings
) -> Look:
    """Until the restarted broker is back in the ISR of every partition it was in before: until
    then, restarting another replica of those could take them below min ISR."""
    assert record.budget is not None
    lagging, already, note = None, "", record.note
    if cluster is not None:
        lagging, out = rejoining(node.node_id, cluster, record.base)
        if out:
            note = already = f"already out of sync before its restart: {describe_partitions(out)}"
        if not lagging:
            return Look(Done(note, already), replace(record, note=note))
    budget = record.budget if lagging is None else record.budget.observe(now, len(lagging))
    record = replace(record, budget=budget, note=note)
    count = len(lagging) if lagging else 0
    action = AwaitIsr(f"catching up: {count} partitions not yet in sync", count, already)
    if not budget.expired(now, s.safety_wait):
        return Look(action, record)
    what = (
        f"{len(lagging)} partitions ({describe_partitions(lagging)})"
        if lagging
        else "its partitions (the Admin API cannot be reached)"
    )
    return Look(
        action,
        record,
        failure=f"{node.name} has not rejoined the ISR of {what}: no progress for "
        f"{format_duration(s.safety_wait)} (--safety-wait)",
    )

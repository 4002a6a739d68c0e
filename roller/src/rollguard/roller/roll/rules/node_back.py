"""A restarted node from the moment it is ready again until it is back where it was (pure,
table-tested with `node_wait.step`): on the roll's target Kafka version (`on_target`), a
controller caught up with the quorum leader (QUORUM), a broker back in every ISR it was in
before (ISR), each judged by --safety-wait without progress (`budgets.Budget`).
"""

from __future__ import annotations

from dataclasses import replace

from rollguard.roller.model import AgentAnswer, ClusterView, Node, describe_answer, kafka_build
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.node_state import (
    AfterRestart,
    AwaitIsr,
    AwaitQuorum,
    AwaitReady,
    Back,
    Done,
    Fail,
    NodeWait,
    Phase,
    Step,
)
from rollguard.roller.roll.rules.safety import (
    describe_partitions,
    rejoining,
    voter_caught_up,
    voter_lag,
)
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.converters import format_duration

__all__ = ["isr", "next_phase", "on_target", "quorum"]


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


def next_phase(wait: NodeWait, node: Node, action: Back | AwaitQuorum, now: float) -> Step:
    """READY or QUORUM over: the next phase at once, or `Done`."""
    if wait.phase is Phase.READY and node.is_controller and wait.base.voter_caught_up:
        return Step(
            action, replace(wait, phase=Phase.QUORUM, budget=Budget.start(now)), at_once=True
        )
    if node.is_broker:
        return Step(action, replace(wait, phase=Phase.ISR, budget=Budget.start(now)), at_once=True)
    return Step(Done(), wait)


def quorum(
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
            return next_phase(wait, node, AwaitQuorum("not a voter", None), now)
        leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
        if since is None and leader is not None:
            since = leader.last_caught_up_ms
        if since is not None and voter_caught_up(
            node.node_id, quorum, cluster.quorum_fetch_timeout_ms, since_ms=since
        ):
            return next_phase(wait, node, AwaitQuorum("caught up", 0), now)
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


def isr(
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

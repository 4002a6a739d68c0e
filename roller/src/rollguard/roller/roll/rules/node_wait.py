"""One node the roll waits for, before its restart or after it until it is back where it was:
the one pure `step` that judges each look at it and every budget of the wait, moving on its
frozen record (`node_state.NodeWait`). Table-tested (tests/unit/test_node_wait.py, test_decide.py,
tests/sim/test_quorum_wait.py); nothing here reads a clock, a network or the journal.

Phases: FOUND_NOT_READY (pending, not ready: waited for, or forced by the rules); after the
restart READY (a new process ready), then (`node_back.py`) QUORUM for a controller whose voter
was caught up before, ISR for a broker, then `Done`. The budgets: readiness (the operation
timeout from the last progress: `ReadyWait`), a log recovery (its rate and stalls within the
node's recovery budget: `RecoveryTracker`; never restarted), an unreadable agent (unknown,
never "not recovering": --safety-wait while it stays unreadable). A restarted node whose agent
becomes unreadable mid-recovery is still recovering for all the roller knows.

The rules for a node that needs a restart (`decide`), in order:
1. stuck (a pod that waiting will not cure): restart it if a new revision is the cure, else fail;
2. its agent reports log recovery (figures in STARTING or RECOVERY, or RECOVERY): never
   restart it (that would start the recovery over), wait;
3. within the operation timeout, counted from the last progress seen: wait;
4. past it, the agent readable and the broker not recovering: force-restart (Strimzi's rule);
5. past it, the agent unreadable: the state is *unknown*, not "not recovering". Force only when
   the platform proves the broker process is gone, or with `--on-agent-unreachable force`;
   otherwise wait within the safety budget.
A ready node is restarted when no safety rule blocks it, else deferred. After its restart
(`after_restart`), a node is back once a new process (by identity) is ready; past the operation
timeout a readable agent (or a gone process) fails the roll: it is not restarted again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rollguard.roller.model import (
    BROKER_STATE_MISSING,
    AgentAnswer,
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
    is_starting,
)
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.node_back import isr, next_phase, on_target, quorum
from rollguard.roller.roll.rules.node_state import (
    FORCE,
    IN_SYNC,
    Action,
    AfterRestart,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    Fail,
    NodeWait,
    Phase,
    ReadyWait,
    RecoveryTracker,
    Restart,
    Step,
    Verdict,
)
from rollguard.roller.roll.rules.safety import Baseline, describe_blockers, restart_blockers
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollSettings
from rollguard.shared.converters import format_duration
from rollguard.shared.wire import LOADING_STATES

FOUND_NOT_READY = "it was found not ready"


def wait_found_not_ready(node: Node, s: RollSettings, now: float, instance: str | None) -> NodeWait:
    """The record of a pending node found not ready (`instance`: its process, if known)."""
    return NodeWait(ReadyWait.start(now, instance, _limit(node, s), FOUND_NOT_READY))


def wait_restarted(node: Node, s: RollSettings, now: float, before: str | None,
                   base: Baseline = IN_SYNC, *, live: bool = False) -> NodeWait:  # fmt: skip
    """The record of a node just restarted (`before`: its identity until then); `live`: its
    configuration changed live, no restart: straight to its ISRs."""
    ready = ReadyWait.start(now, before, _limit(node, s))
    if live:
        return NodeWait(ready, Phase.ISR, before, base, budget=Budget.start(now))
    return NodeWait(ready, Phase.READY, before, base)


def recovery_budget_of(node: str, s: RollSettings) -> float:
    """How long `node`'s log recovery is waited for: its budget from history (`--expectations`),
    never above --max-recovery-wait, else --max-recovery-wait."""
    return min(s.recovery_budgets.get(node, s.max_recovery_wait), s.max_recovery_wait)


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
        return quorum(wait, node, cluster, now, settings)
    return isr(wait, node, cluster, now, settings)


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
    wait = wait or wait_found_not_ready(node, s, now, view.instance)
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
        return next_phase(wait, node, action, now)
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
        s.stall_timeout, recovery_budget_of(node.name, s), started=now
    )
    if isinstance(answer, AgentReport) and answer.report.recovery is not None:
        recovery = answer.report.recovery
        tracker = tracker.observe(now, recovery.remaining_logs, recovery.remaining_segments)
    verdict = tracker.verdict(now)
    wait = replace(wait, recovery=tracker, unknown_since=None)
    return Step(action, wait, recovery_failure(node.name, tracker, verdict, s), verdict)


def _limit(node: Node, s: RollSettings) -> float:
    """Past its recovery budget plus one operation timeout, nothing counts as progress
    (`node_state.ReadyWait`)."""
    return recovery_budget_of(node.name, s) + s.operation_timeout


def recovery_failure(
    name: str, tracker: RecoveryTracker, verdict: Verdict, s: RollSettings
) -> str | None:
    """Why the roll stops waiting for this recovery (stalled, or past its budget), or None."""
    if verdict is Verdict.PROGRESSING:
        return None
    text = tracker.describe()
    if verdict is Verdict.STALLED:
        return (
            f"{name} is performing log recovery but made no progress for "
            f"{format_duration(s.stall_timeout)} ({text}); not restarting it"
        )
    history = " (its budget from history)" if name in s.recovery_budgets else ""
    return (
        f"{name} is still performing log recovery after "
        f"{format_duration(recovery_budget_of(name, s))}{history} ({text}); not restarting it"
    )


def agent_unknown(node: Node, answer: AgentAnswer | None) -> bool:
    """True when the agent's answer says nothing about the broker: no agent, no HTTP answer,
    or an error other than a controller-only node's expected `broker-state-missing`."""
    if answer is None:
        return True
    if isinstance(answer, AgentReport):
        return False
    return not (answer.reason == BROKER_STATE_MISSING and not node.is_broker)


def decide(
    node: Node,
    view: PlatformView,
    cluster: ClusterView | None,
    *,
    agent: AgentAnswer | None = None,
    waited: float = 0.0,
    timeout: float = 300.0,
    force_unknown: bool = False,
    since: str = "it was found not ready",
) -> Action:
    """The next action for a node that needs a restart.

    `agent`: what its agent said at this poll (None: no agent, or not asked); `waited`: seconds
    the node has been waited for without becoming ready since its last progress (`since` says
    what that was); `timeout`: the operation timeout; `force_unknown`: `--on-agent-unreachable
    force`.
    """
    if view.stuck:
        if view.up_to_date:
            return Fail(
                f"{node.name} is stuck ({view.stuck}) and already runs the desired "
                "revision: restarting it will not help"
            )
        return Restart(f"{FORCE}: stuck in {view.stuck}", force=True)
    if not view.ready:
        # Never restart a broker in log recovery: that would start the recovery over.
        if is_recovering(agent):
            return AwaitRecovery(
                f"{node.name} is performing log recovery: {describe_answer(agent)}"
            )
        if waited < timeout:
            starting = (
                isinstance(agent, AgentReport) and agent.report.broker_state in LOADING_STATES
            )
            return AwaitReady(
                f"{node.name} is not ready; agent: {describe_answer(agent)}", starting=starting
            )
        if not agent_unknown(node, agent):
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s (since {since}); agent: "
                f"{describe_answer(agent)}",
                force=True,
            )
        if view.process_gone:
            return Restart(
                f"{FORCE}: not ready after {timeout:g}s and the platform shows its process is "
                f"gone; agent: {describe_answer(agent)}",
                force=True,
            )
        if force_unknown:
            return Restart(
                f"{FORCE} (--on-agent-unreachable force): not ready after {timeout:g}s; "
                f"agent: {describe_answer(agent)}",
                force=True,
            )
        return AwaitUnknown(
            f"{node.name} is not ready and its agent cannot be read "
            f"({_unavailable(agent)}): its broker may be recovering, so it is not restarted"
        )
    blockers = restart_blockers(node, cluster)
    if blockers:
        return Defer(describe_blockers(blockers), tuple(blockers))
    return Restart("restart")


def _unavailable(answer: AgentAnswer | None) -> str:
    if isinstance(answer, AgentUnavailable):
        return answer.describe()  # with the agent's URL, as every message about an agent
    return describe_answer(answer)


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

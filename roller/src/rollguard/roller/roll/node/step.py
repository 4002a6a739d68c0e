"""One node, one look: the one pure `step` that moves a node's record through the roll, from
the roll's first look at it (`taking.take`) to its end, every budget of its waits judged
(table-tested in tests/unit/test_node_wait.py and test_decide.py, tests/sim/test_quorum_wait.py;
nothing here reads a clock, a network or the journal).

    step(record, seen, settings) -> Outcome(record, effect, said)

Before its restart: a ready node is restarted when no safety rule blocks it (`before.decide`),
else deferred; one not ready is waited for (found not ready: `_pending`). After it (`_after`):
a new process ready (`after.after_restart`), then caught up with the quorum and back in its
ISRs (`after.quorum`, `after.isr`). The budgets: readiness (the operation timeout from the last
progress: `budgets.ReadyWait`), a log recovery (its rate and stalls within the node's recovery
budget: `budgets.RecoveryTracker`; never restarted), an unreadable agent (unknown, never "not
recovering": --safety-wait while it stays unreadable). A restarted node whose agent becomes
unreadable mid-recovery is still recovering for all the roller knows. What a look comes to, and
what it says, is `speech.outcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rollguard.roller.model import AgentReport, Node, describe_answer, is_recovering
from rollguard.roller.roll.node.actions import (
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    Fail,
    Look,
    Restart,
)
from rollguard.roller.roll.node.after import after_restart, isr, next_phase, quorum
from rollguard.roller.roll.node.before import decide
from rollguard.roller.roll.node.budgets import ReadyWait, RecoveryTracker, Verdict
from rollguard.roller.roll.node.outcome import Outcome, Seen
from rollguard.roller.roll.node.record import IN_SYNC, CatchUp, How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.node.speech import CATCH_UP, RESTARTED, outcome
from rollguard.roller.roll.node.taking import take
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import Baseline
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollSettings
from rollguard.shared.converters import format_duration

__all__ = ["judge", "recovery_budget_of", "restarted", "step"]

FOUND_NOT_READY = "it was found not ready"


def step(record: NodeRecord, seen: Seen, settings: RollSettings) -> Outcome:
    """The next step for a node: `record` is what the last look left, `seen` what the roll sees
    of it now (its platform's view is None only while its recovery is watched after its
    restart; its agent's answer None when it has none or was not asked: a ready node before
    its restart, a restarted one catching up)."""
    if record.phase is Phase.NEW:
        return take(record, seen, settings)
    return outcome(record, seen, judge(record, seen, settings), settings)


def judge(record: NodeRecord, seen: Seen, settings: RollSettings) -> Look:
    """The rules' judgement of one look at a node the roll took (`step` turns it into the
    node's outcome): before its restart, after it, or catching up."""
    if not record.restarted:
        return _pending(record, seen, settings)
    if record.catch_up is None:
        return _after(record, seen, settings)
    if record.catch_up is CatchUp.QUORUM:
        return quorum(record, seen.node, seen.cluster, seen.now, settings)
    return isr(record, seen.node, seen.cluster, seen.now, settings)


def restarted(
    record: NodeRecord,
    node: Node,
    s: RollSettings,
    now: float,
    before: str | None,
    base: Baseline = IN_SYNC,
    *,
    how: How = How.RESTART,
) -> NodeRecord:
    """The record of a node just restarted (`before`: its identity until then), or configured
    live (`how`: straight to its ISRs, its process the same), waited for from now."""
    record = replace(
        record,
        how=how,
        instance=before,
        base=base,
        ready=ReadyWait.start(now, before, _limit(node, s)),
        recovery=None,
        unknown_since=None,
        catch_up=None,
        budget=None,
        since_ms=None,
        note="",
    )
    if how is How.LIVE:
        waiting = Waiting(CATCH_UP, "back in its ISRs", now)
        isr = replace(record, catch_up=CatchUp.ISR, budget=Budget.start(now), waiting=waiting)
        return replace(isr, phase=Phase.CONFIGURING)
    waiting = Waiting(RESTARTED, "waiting for its new process", now)
    return replace(record, phase=Phase.RESTARTING, waiting=waiting)


def recovery_budget_of(node: str, s: RollSettings) -> float:
    """How long `node`'s log recovery is waited for: its budget from history (`--expectations`),
    never above --max-recovery-wait, else --max-recovery-wait."""
    return min(s.recovery_budgets.get(node, s.max_recovery_wait), s.max_recovery_wait)


def _pending(record: NodeRecord, seen: Seen, s: RollSettings) -> Look:
    node, view, answer = seen.node, seen.view, seen.answer
    assert view is not None
    if view.ready:  # nothing to wait for: the safety rules decide (a batch's, for a candidate)
        done = _unwaited(record)
        if seen.batching:
            return Look(Restart("restart"), done)  # the batch's rule decides
        return Look(decide(node, view, seen.cluster), done)
    ready = record.ready or ReadyWait.start(
        seen.now, view.instance, _limit(node, s), FOUND_NOT_READY
    )
    ready = ready.observe(seen.now, view.instance, answer)
    action = decide(
        node,
        view,
        seen.cluster,
        agent=answer,
        waited=ready.waited(seen.now),
        timeout=s.operation_timeout,
        force_unknown=s.on_agent_unreachable is OnAgentUnreachable.FORCE,
        since=ready.since,
    )
    recovery = record.recovery
    if isinstance(answer, AgentReport) and not is_recovering(answer):
        recovery = None  # out of recovery, by its own word
    record = replace(record, ready=ready, recovery=recovery)
    if isinstance(action, Restart):
        return Look(action, _unwaited(record))
    if isinstance(action, Fail):
        return Look(action, _unwaited(record), failure=action.reason)
    return _waiting(
        record,
        node,
        action,
        seen,
        s,
        lambda reason, waited: (
            f"{reason}; waited {waited} (--safety-wait). Restart it by hand once you know it "
            "is not recovering, or use --on-agent-unreachable force"
        ),
    )


def _unwaited(record: NodeRecord) -> NodeRecord:
    """A pending node with nothing to wait for (ready, or to be restarted now)."""
    return replace(record, ready=None, recovery=None, unknown_since=None)


def _after(record: NodeRecord, seen: Seen, s: RollSettings) -> Look:
    node, view, answer = seen.node, seen.view, seen.answer
    if record.recovery is not None:
        if isinstance(answer, AgentReport) and not is_recovering(answer):
            # Over, by its own word: look at the whole node again at once (readiness counts
            # the recovery's end as progress from that look).
            ended = AwaitReady(f"{node.name}'s log recovery ended")
            return Look(ended, replace(record, recovery=None), at_once=True)
        # An unreadable agent in the middle of a recovery: still recovering, for all we know.
        recovering = AwaitRecovery(
            f"{node.name} is performing log recovery: {describe_answer(answer)}"
        )
        return _recovering(record, node, recovering, seen, s)
    assert view is not None and record.ready is not None
    ready = record.ready.observe(seen.now, view.instance, answer)
    action = after_restart(
        node,
        view,
        answer,
        before=record.instance,
        waited=ready.waited(seen.now),
        timeout=s.operation_timeout,
        since=ready.since,
        target=s.kafka_version,
    )
    record = replace(record, ready=ready)
    if isinstance(action, Back):
        return next_phase(record, node, action, seen.now)
    if isinstance(action, Fail):
        return Look(action, record, failure=action.reason)
    return _waiting(
        record,
        node,
        action,
        seen,
        s,
        lambda reason, waited: f"{reason} for {waited}; not restarting it again",
    )


def _waiting(
    record: NodeRecord,
    node: Node,
    action: AwaitReady | AwaitRecovery | AwaitUnknown | Defer,  # Defer: for a ready node only
    seen: Seen,
    s: RollSettings,
    gave_up: Callable[[str, str], str],
) -> Look:
    """A node not ready, before or after its restart: its recovery or its unreadable agent
    judged by their own budgets (`gave_up(reason, waited)`: the roll's failure when the unknown
    agent's is spent)."""
    if isinstance(action, AwaitRecovery):
        return _recovering(record, node, action, seen, s)
    if not isinstance(action, AwaitUnknown):
        return Look(action, replace(record, unknown_since=None))
    now = seen.now
    since = record.unknown_since if record.unknown_since is not None else now
    record = replace(record, unknown_since=since)
    if now - since >= s.safety_wait:
        return Look(action, record, failure=gave_up(action.reason, format_duration(now - since)))
    return Look(action, record)


def _recovering(
    record: NodeRecord, node: Node, action: AwaitRecovery, seen: Seen, s: RollSettings
) -> Look:
    """One look at a node in log recovery: its figures recorded, its recovery judged."""
    now, answer = seen.now, seen.answer
    tracker = record.recovery or RecoveryTracker(
        s.stall_timeout, recovery_budget_of(node.name, s), started=now
    )
    if isinstance(answer, AgentReport) and answer.report.recovery is not None:
        recovery = answer.report.recovery
        tracker = tracker.observe(now, recovery.remaining_logs, recovery.remaining_segments)
    verdict = tracker.verdict(now)
    record = replace(record, recovery=tracker, unknown_since=None)
    return Look(action, record, recovery_failure(node.name, tracker, verdict, s), verdict)


def _limit(node: Node, s: RollSettings) -> float:
    """Past its recovery budget plus one operation timeout, nothing counts as progress
    (`budgets.ReadyWait`)."""
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

"""What one look at a node comes to (`outcome`): the rules' `Look` turned into the node's record
(its phase, what it waits for now), the one effect the roll applies, and what the look says,
in the order the roll has always said it: what its agent answered (`observe-agent`), its
recovery at every look with its figures, its wait once per change of its reason, the live
view's line.

The roll's own rules meet the node's here, once it may be restarted: while another node of the
roll is in log recovery or starting, it is deferred (`taking.held_by_recovery`); a node taken
without knowing its Kafka version is looked at again (`taking.recheck`); a ready broker with
`--max-batch-size` above 1 is a batch's candidate; a node whose desired configuration Kafka
takes live is configured, not restarted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rollguard.roller.model import AgentAnswer, AgentReport, Node, describe_answer
from rollguard.roller.roll.node.actions import (
    AwaitIsr,
    AwaitQuorum,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    DeferKind,
    Done,
    Fail,
    Look,
    Restart,
)
from rollguard.roller.roll.node.before import agent_unknown
from rollguard.roller.roll.node.budgets import RecoveryTracker, Verdict
from rollguard.roller.roll.node.outcome import (
    LOOK,
    LOOK_NOW,
    Do,
    Effect,
    Outcome,
    Said,
    Seen,
    log,
    progress,
    say,
    write,
)
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.node.taking import held_by_recovery, recheck
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.dataset import Event

RESTARTED = "restart"  # the waiting kind of a node restarted, until its new process is ready
CATCH_UP = "catch-up"  # ... and of one ready again, until back in its ISRs


def outcome(before: NodeRecord, seen: Seen, look: Look, s: RollSettings) -> Outcome:
    """`look` at the node whose record was `before`, as the roll applies and says it."""
    node = seen.node
    said = _heard(seen.answer)
    action, record = look.action, look.record
    if isinstance(action, AwaitRecovery):
        assert record.recovery is not None and look.verdict is not None
        said += _recovery(node, record.recovery, look.verdict)
    if not before.restarted:
        if look.failure is None and isinstance(action, Restart):
            return _may_restart(record, seen, action, said, s)
        said += _pending(node, look, seen.answer)
        return _moved(before, seen, look, said)
    said += _back(node, before, look, seen.answer)
    return _moved(before, seen, look, said)


def deferred(record: NodeRecord, seen: Seen, defer: Defer) -> Outcome:
    """A node the roll's own rules hold back now (a batch's, a gate's), said as any deferral."""
    said = [say("defer", Event.DEFER, defer.reason, kind=defer.kind)]
    return Outcome(
        _waits(record, seen, Phase.PENDING, _deferral(record, seen, defer)), LOOK, tuple(said)
    )


def held_at_gates(record: NodeRecord, now: float, defer: Defer | None) -> NodeRecord:
    """A node that may restart, held at the closed gates (said by the gate keeper): `defer`
    at a health gate (within --safety-wait), None at a window or a pause alone."""
    reason = defer.reason if defer is not None else "held at a gate"
    last = record.waiting
    since = last.since if last is not None and last.kind == DeferKind.GATE else now
    blockers = defer.blockers if defer is not None else ()
    waiting = Waiting(DeferKind.GATE, reason, since, blockers, deferral=True)
    return replace(record, phase=Phase.PENDING, waiting=waiting)


def _may_restart(
    record: NodeRecord, seen: Seen, action: Restart, said: list[Said], s: RollSettings
) -> Outcome:
    """A node the rules would restart: held while others recover or start, left out when it
    turns out to run the target already, else the roll's to restart (alone, in a batch, or
    live)."""
    if seen.recovering or seen.starting:
        held = held_by_recovery(list(seen.recovering), seen.starting)
        said.append(say("defer", Event.DEFER, held.reason, kind=held.kind))
        waiting = _deferral(record, seen, held)
        return Outcome(_waits(record, seen, Phase.PENDING, waiting), LOOK, tuple(said))
    why = recheck(record, seen, s)
    if why is not None:
        left = replace(record, phase=Phase.LEFT_OUT, at=seen.wall, why=why, waiting=None)
        return Outcome(left, Effect(Do.LEAVE_OUT, why), tuple(said))
    if record.live_only and not action.force:  # its configuration, changed live: why says
        effect = Effect(Do.CONFIGURE, record.why)
    elif seen.batching and not action.force:
        effect = Effect(Do.BATCH, action.reason)
    else:
        effect = Effect(Do.RESTART, action.reason, action.force)
    return Outcome(_waits(record, seen, Phase.PENDING, None), effect, tuple(said))


def _moved(before: NodeRecord, seen: Seen, look: Look, said: list[Said]) -> Outcome:
    """The record after a look that restarts nothing, and its effect."""
    action, record = look.action, look.record
    if look.failure is not None:
        if not before.restarted:  # the roll cannot go on: this node is why
            failed = replace(record, phase=Phase.FAILED, at=seen.wall, reason=look.failure)
            return Outcome(failed, Effect(Do.FAIL_ROLL, look.failure), tuple(said))
        if isinstance(action, Fail) and action.again:  # up, on another version: on record
            failed = replace(record, phase=Phase.FAILED, at=seen.wall, reason=look.failure)
            return Outcome(failed, Effect(Do.FAIL_NODE, look.failure), tuple(said))
        # Its restart stays on record: a resumed roll waits for it again, never restarts it.
        return Outcome(record, Effect(Do.FAIL_NODE, look.failure), tuple(said))
    if isinstance(action, Done):
        done = replace(record, phase=Phase.DONE, at=seen.wall, waiting=None)
        return Outcome(done, Effect(Do.BACK, action.note), tuple(said))
    phase, waiting = _where(record, seen, action)
    return Outcome(
        _waits(record, seen, phase, waiting), LOOK_NOW if look.at_once else LOOK, tuple(said)
    )


def _where(record: NodeRecord, seen: Seen, action: Any) -> tuple[Phase, Waiting | None]:
    """The node's phase after a look, and what it waits for now."""
    if isinstance(action, AwaitRecovery):
        return Phase.RECOVERING, _wait(record, seen, action.kind, action.reason)
    if isinstance(action, Defer):
        return Phase.PENDING, _deferral(record, seen, action)
    live = record.how is How.LIVE
    if record.restarted and record.catch_up is not None:
        phase = Phase.CONFIGURING if live else Phase.CATCHING_UP
        return phase, _wait(record, seen, CATCH_UP, action.reason)
    if record.restarted:
        assert record.ready is not None
        return Phase.RESTARTING, _wait(record, seen, RESTARTED, action.reason, record.ready.started)
    if isinstance(action, AwaitReady | AwaitUnknown):
        starting = isinstance(action, AwaitReady) and action.starting
        waiting = _wait(record, seen, action.kind, action.reason, starting=starting)
        return Phase.WAITING, replace(waiting, unknown=agent_unknown(seen.node, seen.answer))
    return Phase.PENDING, None


def _wait(
    record: NodeRecord,
    seen: Seen,
    kind: str,
    reason: str,
    since: float | None = None,
    *,
    starting: bool = False,
) -> Waiting:
    """What the node waits for now: since `since` when given, else since it began to wait for
    the same (at an earlier look), else from now."""
    last = record.waiting
    if since is None:
        since = last.since if last is not None and last.kind == kind else seen.now
    return Waiting(kind, reason, since, starting=starting)


def _deferral(record: NodeRecord, seen: Seen, defer: Defer) -> Waiting:
    waiting = _wait(record, seen, defer.kind, defer.reason)
    return replace(waiting, blockers=defer.blockers, deferral=True)


def _waits(record: NodeRecord, seen: Seen, phase: Phase, waiting: Waiting | None) -> NodeRecord:
    at = seen.wall if phase is not record.phase else record.at
    return replace(record, phase=phase, at=at, waiting=waiting)


# ---- what a look says -------------------------------------------------------------------------


def _heard(answer: AgentAnswer | None) -> list[Said]:
    """What its agent answered at this look: an `observe-agent` event, with the figures."""
    if answer is None:
        return []
    figures: dict[str, Any] = {}
    if isinstance(answer, AgentReport):
        figures["brokerState"] = int(answer.report.broker_state)
        if answer.report.recovery is not None:
            figures["remainingLogsToRecover"] = answer.report.recovery.remaining_logs
            figures["remainingSegmentsToRecover"] = answer.report.recovery.remaining_segments
    return [write(Event.OBSERVE_AGENT, describe_answer(answer), **figures)]


def _recovery(node: Node, tracker: RecoveryTracker, verdict: Verdict) -> list[Said]:
    """One look at a recovering broker: the live view, the log, a `wait-recovery` event."""
    text = tracker.describe()
    return [
        progress("recovering: " + text, tracker),
        log(f"{node} is performing log recovery: {text}"),
        write(Event.WAIT_RECOVERY, verdict.value, **_figures(tracker)),
    ]


def _pending(node: Node, look: Look, answer: AgentAnswer | None) -> list[Said]:
    action = look.action
    if look.failure is not None:
        return []
    if isinstance(action, Defer):
        return [say("defer", Event.DEFER, action.reason, kind=action.kind)]
    if isinstance(action, AwaitReady | AwaitUnknown):
        return [
            say("wait", Event.WAIT_READY, action.reason, kind=action.kind),
            progress(f"waiting for readiness: {describe_answer(answer)}"),
        ]
    return []


def _back(node: Node, before: NodeRecord, look: Look, answer: AgentAnswer | None) -> list[Said]:
    action, said = look.action, []
    if isinstance(action, Back):
        if node.is_controller and not before.base.voter_caught_up:
            said.append(log(f"{node}: its voter was not caught up before its restart"))
    elif isinstance(action, AwaitIsr | Done) and action.already:
        said.append(say("out-of-sync", Event.OUT_OF_SYNC_BEFORE, action.already))
    if look.failure is not None or look.at_once or isinstance(action, Back | Done | AwaitRecovery):
        return said
    if isinstance(action, AwaitIsr):
        if action.lagging:
            said.append(say("catch-up", Event.CATCH_UP, action.reason, count=action.lagging))
            said.append(progress(action.reason))
        return said
    assert isinstance(action, AwaitReady | AwaitUnknown | AwaitQuorum | Fail)
    text = action.reason
    if isinstance(action, AwaitUnknown):
        text = f"waiting for readiness: {describe_answer(answer)}"
    return [*said, progress(text)]


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

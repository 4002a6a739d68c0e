"""One node waited for until it is ready, before its restart or after it: the record the roller
keeps between two looks, and the one pure step that judges every budget of that wait
(table-tested in tests/test_node_wait.py).

    NodeWait                                      frozen: what is remembered of the node
    step(wait, node, view, answer, cluster, now, settings) -> Step(action, wait, failure)

The rules of what to do are `decide.decide` (a node found not ready, before its restart) and
`decide.after_restart` (a restarted one); the budgets are judged here, once, for both:
- readiness: the operation timeout counted from the last progress (`readiness.ReadyWait`);
- a log recovery: its rate and stalls, within the node's recovery budget
  (`progress.RecoveryTracker`); never restarted;
- an agent that cannot be read: unknown, never "not recovering", waited for within
  --safety-wait while it stays unreadable; then the roll fails, naming the node.

A restarted node whose agent becomes unreadable in the middle of its log recovery is still
recovering for all the roller knows: its recovery's own budget goes on (it is only looked at
through its agent then: `watching_recovery`). The callers do the I/O and say what a step
means (events, progress); nothing here reads a clock, a network or the journal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from rollguard.roller.model import (
    AgentAnswer,
    AgentReport,
    ClusterView,
    Node,
    PlatformView,
    describe_answer,
    is_recovering,
)
from rollguard.roller.roll.decide import (
    Action,
    AfterRestart,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Fail,
    Restart,
    after_restart,
    decide,
)
from rollguard.roller.roll.progress import RecoveryTracker, Verdict, format_duration
from rollguard.roller.roll.readiness import ReadyWait
from rollguard.roller.roll.settings import OnAgentUnreachable, RollSettings

__all__ = ["NodeWait", "Step", "recovery_failure", "step"]

FOUND_NOT_READY = "it was found not ready"


@dataclass(frozen=True, slots=True)
class NodeWait:
    """What the roller remembers of one node it waits for, between two looks."""

    ready: ReadyWait  # since when, and its last progress: the operation timeout's start
    restarted: bool = False  # after its restart in this roll (else: found not ready before it)
    before: str | None = None  # its identity before the restart (None: not known)
    unknown_since: float | None = None  # its agent unreadable at every look since
    recovery: RecoveryTracker | None = None  # in log recovery since the tracker's start

    @classmethod
    def found_not_ready(
        cls, node: Node, settings: RollSettings, now: float, instance: str | None
    ) -> NodeWait:
        return cls(ReadyWait.start(now, instance, _limit(node, settings), FOUND_NOT_READY))

    @classmethod
    def after_restart(
        cls, node: Node, settings: RollSettings, now: float, before: str | None
    ) -> NodeWait:
        return cls(
            ReadyWait.start(now, before, _limit(node, settings)), restarted=True, before=before
        )

    @property
    def watching_recovery(self) -> bool:
        """A restarted node in log recovery: only its agent is asked until it ends."""
        return self.restarted and self.recovery is not None


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one look: the action, the record for the next look (None: nothing to
    remember), and `failure` when the roll cannot go on (why, naming the node: the node is not
    restarted). `at_once`: look again now, not after a poll interval (a recovery just ended)."""

    action: Action | AfterRestart
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
    `answer` its agent's (None: no agent, or not asked: a ready node before its restart)."""
    if wait is not None and wait.restarted:
        return _after(wait, node, view, answer, now, settings)
    assert view is not None
    return _pending(wait, node, view, answer, cluster, now, settings)


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
    if isinstance(action, AwaitRecovery):
        return _recovering(wait, node, action, answer, now, s)
    if isinstance(action, AwaitUnknown):
        return _unknown(
            wait,
            action,
            now,
            s,
            lambda waited: (
                f"{action.reason}; waited {waited} (--safety-wait). Restart it by hand once "
                "you know it is not recovering, or use --on-agent-unreachable force"
            ),
        )
    return Step(action, replace(wait, unknown_since=None))


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
    )
    wait = replace(wait, ready=ready)
    if isinstance(action, Fail):
        return Step(action, wait, failure=action.reason)
    if isinstance(action, AwaitRecovery):
        return _recovering(wait, node, action, answer, now, s)
    if isinstance(action, AwaitUnknown):
        return _unknown(
            wait, action, now, s, lambda waited: f"{action.reason} for {waited}; not restarting "
            "it again"
        )  # fmt: skip
    return Step(action, replace(wait, unknown_since=None))


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
    return Step(action, wait, recovery_failure(node, tracker, verdict, s), verdict)


def _unknown(
    wait: NodeWait,
    action: AwaitUnknown,
    now: float,
    s: RollSettings,
    message: Callable[[str], str],
) -> Step:
    since = wait.unknown_since if wait.unknown_since is not None else now
    wait = replace(wait, unknown_since=since)
    if now - since >= s.safety_wait:
        return Step(action, wait, failure=message(format_duration(now - since)))
    return Step(action, wait)


def recovery_failure(
    node: Node, tracker: RecoveryTracker, verdict: Verdict, s: RollSettings
) -> str | None:
    """Why the roll stops waiting for this recovery (stalled, or past its budget), or None."""
    text = tracker.describe()
    if verdict is Verdict.STALLED:
        return (
            f"{node.name} is performing log recovery but made no progress for "
            f"{format_duration(s.stall_timeout)} ({text}); not restarting it"
        )
    if verdict is Verdict.TOO_LONG:
        history = " (its budget from history)" if node.name in s.recovery_budgets else ""
        return (
            f"{node.name} is still performing log recovery after "
            f"{format_duration(s.recovery_budget(node.name))}{history} ({text}); "
            "not restarting it"
        )
    return None


def _limit(node: Node, s: RollSettings) -> float:
    """Past its recovery budget plus one operation timeout, nothing counts as progress
    (`readiness`)."""
    return s.recovery_budget(node.name) + s.operation_timeout

"""The readiness budget counts from the last progress, not from the restart (pure, table-tested).

Each case is a node's timeline after its restart at 0 s, polled every second as the roller polls
it: what its platform and its agent show at each second. `ReadyWait.observe` and the pure rules
(`after_restart` after a restart, `decide` for a node found not ready before it) give the step
at each poll; the table says when the node is back, or when and why the roll fails. A real
Kafka 4.x broker (field notes): STARTING, its log recovery in STARTING with the recovery gauges,
seconds more in STARTING after the gauges go (catching up with the metadata log, registering;
longer under load), RECOVERY for ~0.1 s, RUNNING.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from rollguard.roller.model import (
    AgentAnswer,
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PartitionInfo,
    PlatformView,
    Role,
)
from rollguard.roller.roll.node.actions import (
    AfterRestart,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Fail,
    Restart,
)
from rollguard.roller.roll.node.after import after_restart
from rollguard.roller.roll.node.before import decide
from rollguard.roller.roll.node.budgets import ReadyWait
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, RecoveryProgress

NODE = Node(0, "kafka-0", frozenset({Role.BROKER, Role.CONTROLLER}), "https://kafka-0:8443")
BROKER = Node(0, "kafka-0", frozenset({Role.BROKER}), "https://kafka-0:8443")
URL = NODE.agent_url or ""
BUDGET = 6 * 3600.0  # --max-recovery-wait's default


@dataclass(frozen=True)
class Look:
    instance: str | None
    answer: AgentAnswer | None
    ready: bool = False


def report(state: BrokerState, logs: int | None = None) -> AgentReport:
    recovery = RecoveryProgress(logs, logs * 4) if logs is not None else None
    return AgentReport(URL, BrokerStateReport(state, recovery))


DOWN = Look(None, AgentUnavailable(URL, 503, "jmx-unreachable", "connection refused"))
OLD = Look("old", report(BrokerState.RUNNING), ready=True)  # the process before the restart


def broker(
    *,
    jvm: float = 2.0,
    recovery: tuple[float, float] | None = None,
    running: float | None = None,
    in_recovery_state: tuple[float, float] = (0.0, 0.0),
    not_running: tuple[float, float] = (0.0, 0.0),
    crashes: tuple[float, ...] = (),
) -> Callable[[float], Look]:
    """A broker restarted at 0: the old process answers until 0.5 s, no JVM until `jvm`, its
    log recovery (gauges present, in STARTING) over `recovery` (start, end), RECOVERY over
    `in_recovery_state`, NOT_RUNNING over `not_running` (a KRaft broker before its lifecycle
    manager starts), RUNNING from `running` (None: never); a new process at each crash."""

    def at(t: float) -> Look:
        if t < 0.5:
            return OLD
        if t < jvm:
            return DOWN
        instance = f"new-{sum(1 for c in crashes if c <= t)}"
        if running is not None and t >= running:
            return Look(instance, report(BrokerState.RUNNING), ready=True)
        if not_running[0] <= t < not_running[1]:
            return Look(instance, report(BrokerState.NOT_RUNNING))
        if in_recovery_state[0] <= t < in_recovery_state[1]:
            return Look(instance, report(BrokerState.RECOVERY))
        if recovery is not None and recovery[0] <= t < recovery[1]:
            left = max(1, round(100 * (recovery[1] - t) / (recovery[1] - recovery[0])))
            return Look(instance, report(BrokerState.STARTING, left))
        return Look(instance, report(BrokerState.STARTING))

    return at


def follow(
    timeline: Callable[[float], Look], timeout: float, *, until: float = 2000.0
) -> tuple[float, AfterRestart]:
    """Poll the restarted node every second from 0 until it is back or the roll fails."""
    wait = ReadyWait.start(0.0, "old", BUDGET + timeout)
    t = 0.0
    while t <= until:
        look = timeline(t)
        wait = wait.observe(t, look.instance, look.answer)
        view = PlatformView(exists=True, ready=look.ready, up_to_date=True, instance=look.instance)
        step = after_restart(
            NODE,
            view,
            look.answer,
            before="old",
            waited=wait.waited(t),
            timeout=timeout,
            since=wait.since,
        )
        if isinstance(step, Back | Fail):
            return t, step
        assert isinstance(step, AwaitReady | AwaitRecovery | AwaitUnknown)
        t += 1.0
    raise AssertionError(f"still waiting after {until} s")


# The case: a real 288 s recovery, then seconds in STARTING before RUNNING.
RECOVERY_290 = broker(recovery=(5.0, 290.0), running=296.0)
# STARTING 20 s after the recovery, with the brief RECOVERY a real broker shows before RUNNING.
STARTING_20 = broker(recovery=(5.0, 290.0), in_recovery_state=(310.0, 310.5), running=311.0)
STUCK_IN_STARTING = broker(recovery=(5.0, 290.0))  # never leaves STARTING after its recovery


@pytest.mark.parametrize(
    ("timeline", "timeout", "outcome", "at", "text"),
    [
        # A recovery longer than the timeout is waited through, and the wait after it too.
        (RECOVERY_290, 30.0, Back, 296.0, "ready again"),
        (RECOVERY_290, 300.0, Back, 296.0, "ready again"),
        (STARTING_20, 30.0, Back, 311.0, "ready again"),
        (STARTING_20, 300.0, Back, 311.0, "ready again"),
        # Never leaving STARTING after it: fails, the timeout counted from the recovery's end.
        (STUCK_IN_STARTING, 30.0, Fail, 320.0, "not ready 30s after its log recovery ended"),
        (STUCK_IN_STARTING, 300.0, Fail, 590.0, "not ready 5m00s after its log recovery ended"),
        # No recovery, never ready: the timeout from its last step forward (STARTING at 2 s).
        (broker(), 30.0, Fail, 32.0, "not ready 30s after its new process started"),
        # A step forward (NOT_RUNNING -> STARTING) starts the budget again.
        (broker(not_running=(2.0, 20.0)), 30.0, Fail, 50.0, "after it reached STARTING"),
        # A clean restart slower than the timeout on a loaded machine still fails: no progress.
        (broker(running=40.0), 30.0, Fail, 32.0, "is not restarted again"),
        # Crashes are not progress: only the first new process counts.
        (broker(crashes=(10.0, 20.0, 30.0, 40.0)), 30.0, Fail, 32.0, "its new process started"),
    ],
)
def test_after_a_restart_the_readiness_budget_counts_from_the_last_progress(
    timeline: Callable[[float], Look], timeout: float, outcome: type, at: float, text: str
) -> None:
    when, step = follow(timeline, timeout)
    assert isinstance(step, outcome), step
    assert when == at
    assert text in step.reason


def test_the_old_rule_would_have_failed_the_288_s_recovery_the_moment_it_ended() -> None:
    """The issue's case, as it was (the budget from the restart): the table above is the fix."""
    look = RECOVERY_290(291.0)
    view = PlatformView(exists=True, ready=False, up_to_date=True, instance=look.instance)
    old = after_restart(NODE, view, look.answer, before="old", waited=291.0, timeout=30.0)
    assert isinstance(old, Fail) and "not ready 30s after its restart" in old.reason


def test_the_whole_wait_stays_bounded_by_the_recovery_budget_and_one_timeout() -> None:
    """Past the limit nothing is progress: a recovery ending then starts no new budget."""
    wait = ReadyWait.start(0.0, "old", limit=100.0)
    wait = wait.observe(2.0, "new", report(BrokerState.STARTING, 10))
    assert (wait.progress_at, wait.since) == (2.0, "its new process started")
    wait = wait.observe(99.0, "new", report(BrokerState.STARTING))  # its recovery ended
    assert (wait.progress_at, wait.since) == (99.0, "its log recovery ended")
    wait = wait.observe(100.0, "new", report(BrokerState.STARTING, 5))  # another load
    wait = wait.observe(150.0, "new", report(BrokerState.RUNNING))
    assert (wait.progress_at, wait.since) == (99.0, "its log recovery ended")
    assert wait.waited(150.0) == 51.0


@pytest.mark.parametrize(
    ("looks", "progress_at", "since"),
    [
        # an unreadable agent in the middle of a recovery: not its end
        ([report(BrokerState.STARTING, 9), DOWN.answer], 1.0, "it reached STARTING"),
        ([report(BrokerState.STARTING, 9), DOWN.answer, report(BrokerState.STARTING)], 3.0,
         "its log recovery ended"),
        # the shutdown states are not forward
        ([report(BrokerState.STARTING), report(BrokerState.PENDING_CONTROLLED_SHUTDOWN)], 1.0,
         "it reached STARTING"),
        # backwards is not progress, and forward again only past the furthest
        ([report(BrokerState.STARTING), report(BrokerState.NOT_RUNNING),
          report(BrokerState.STARTING)], 1.0, "it reached STARTING"),
        ([report(BrokerState.STARTING), report(BrokerState.RUNNING)], 2.0, "it reached RUNNING"),
    ],
)  # fmt: skip
def test_what_counts_as_progress(
    looks: list[AgentAnswer | None], progress_at: float, since: str
) -> None:
    wait = ReadyWait.start(0.0, "p", limit=1000.0, since="it was found not ready")
    for t, answer in enumerate(looks, start=1):
        wait = wait.observe(float(t), "p", answer)
    assert (wait.progress_at, wait.since) == (progress_at, since)


def pending(
    timeline: Callable[[float], Look], timeout: float, *, until: float = 2000.0
) -> tuple[float, object]:
    """A node found not ready (recovering on its own) before the roll restarts it: `decide` at
    each poll until it is ready (a plain restart now) or force-restarted."""
    first = timeline(0.0)
    wait = ReadyWait.start(0.0, first.instance, BUDGET + timeout, "it was found not ready")
    t = 0.0
    while t <= until:
        look = timeline(t)
        wait = wait.observe(t, look.instance, look.answer)
        view = PlatformView(exists=True, ready=look.ready, up_to_date=False, instance=look.instance)
        action = decide(
            BROKER,
            view,
            _HEALTHY,
            agent=look.answer,
            waited=wait.waited(t),
            timeout=timeout,
            since=wait.since,
        )
        if isinstance(action, Restart):
            return t, action
        t += 1.0
    raise AssertionError(f"still waiting after {until} s")


_HEALTHY = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (0, 1, 2), 2),), None, None)


def _recovering_on_its_own(registering: float) -> Callable[[float], Look]:
    """Found in a 400 s recovery of its own (in STARTING), then `registering` s in STARTING."""

    def at(t: float) -> Look:
        if t < 400.0:
            left = max(1, round(100 * (400.0 - t) / 400.0))
            return Look("p", report(BrokerState.STARTING, left))
        if t < 400.0 + registering:
            return Look("p", report(BrokerState.STARTING))
        return Look("p", report(BrokerState.RUNNING), ready=True)

    return at


@pytest.mark.parametrize(
    ("registering", "timeout", "at", "forced", "text"),
    [
        # Ready 20 s after its recovery: restarted as any ready node (not forced).
        (20.0, 30.0, 420.0, False, "restart"),
        (20.0, 300.0, 420.0, False, "restart"),
        # Stuck in STARTING after it: forced, the timeout counted from the recovery's end.
        (10_000.0, 30.0, 430.0, True, "since its log recovery ended"),
        (10_000.0, 300.0, 700.0, True, "not ready after 300s (since its log recovery ended)"),
    ],
)
def test_a_node_found_recovering_is_not_forced_the_moment_its_recovery_ends(
    registering: float, timeout: float, at: float, forced: bool, text: str
) -> None:
    when, action = pending(_recovering_on_its_own(registering), timeout)
    assert isinstance(action, Restart)
    assert (when, action.force) == (at, forced)
    assert text in action.reason

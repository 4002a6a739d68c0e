"""One node's wait, before and after its restart: every transition of the rules' judgement of a
look (`node.step.judge`, which `step` turns into the node's outcome) and every budget it judges
(pure: the clock is a number given to each look)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from test_decide import CONTROLLER, HEALTHY, NODE, TIGHT, view

from rollguard.roller.model import (
    AgentAnswer,
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PartitionInfo,
    PlatformView,
    QuorumInfo,
    VoterInfo,
)
from rollguard.roller.roll.node.actions import (
    AwaitIsr,
    AwaitQuorum,
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    Done,
    Fail,
    Look,
    Restart,
)
from rollguard.roller.roll.node.budgets import Verdict
from rollguard.roller.roll.node.outcome import Seen
from rollguard.roller.roll.node.record import CatchUp, NodeRecord, Phase
from rollguard.roller.roll.node.step import judge
from rollguard.roller.roll.node.step import restarted as restarted_record
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import Baseline
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollSettings
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, RecoveryProgress

URL = NODE.agent_url or ""
S = RollSettings(operation_timeout=60, stall_timeout=120, safety_wait=300, max_recovery_wait=900)


def report(state: BrokerState, logs: int | None = None, segments: int = 10) -> AgentReport:
    recovery = RecoveryProgress(logs, segments) if logs is not None else None
    return AgentReport(URL, BrokerStateReport(state, recovery))


RUNNING = report(BrokerState.RUNNING)
STARTING = report(BrokerState.STARTING)
DOWN = AgentUnavailable(URL, None, "unreachable", "refused")


def recovering(logs: int) -> AgentReport:
    return report(BrokerState.RECOVERY, logs)


TAKEN = NodeRecord(NODE.name, Phase.PENDING)  # a node the roll took, not yet looked at


def step(
    record: NodeRecord | None,
    node: Node,
    view: PlatformView | None,
    answer: AgentAnswer | None,
    cluster: ClusterView | None,
    now: float,
    settings: RollSettings,
) -> Look:
    """One look judged: `record` is what the last look left (None: a pending node not waited
    for)."""
    seen = Seen(node, now, "", view, answer, cluster)
    return judge(record or replace(TAKEN, name=node.name), seen, settings)


def run(
    looks: Sequence[tuple[float, PlatformView | None, AgentAnswer | None]],
    wait: NodeRecord | None = None,
    settings: RollSettings = S,
) -> list[Look]:
    """Each look in turn, the record carried from one to the next, as the loops do."""
    steps = []
    for now, seen, answer in looks:
        done = step(wait, NODE, seen, answer, HEALTHY, now, settings)
        steps.append(done)
        wait = done.record
    return steps


def restarted(at: float = 0.0, before: str | None = "old") -> NodeRecord:
    return restarted_record(TAKEN, NODE, S, at, before)


def waits(look: Look) -> bool:
    """Whether the record remembers a wait for the next look (a pending node's)."""
    r = look.record
    return r.ready is not None or r.recovery is not None or r.unknown_since is not None


# ---- before its restart --------------------------------------------------------------------


def test_a_ready_node_is_decided_by_the_safety_rules_and_nothing_is_remembered() -> None:
    done = step(None, NODE, view(), None, HEALTHY, 0, S)
    assert isinstance(done.action, Restart) and not waits(done) and done.failure is None
    held = step(None, NODE, view(), None, TIGHT, 0, S)
    assert isinstance(held.action, Defer) and not waits(held)


def test_a_node_found_not_ready_is_waited_for_within_the_timeout_then_forced() -> None:
    steps = run(
        [
            (0, view(ready=False), STARTING),
            (59, view(ready=False), STARTING),
            (60, view(ready=False), STARTING),
        ]
    )
    assert [type(s.action) for s in steps] == [AwaitReady, AwaitReady, Restart]
    assert steps[0].action.starting  # type: ignore[union-attr]  # holds the others' restarts
    assert steps[0].record.ready.since == "it reached STARTING"
    assert not waits(steps[2]) and "not ready after 60s" in steps[2].action.reason


def test_a_step_forward_while_not_ready_starts_the_timeout_again() -> None:
    steps = run(
        [
            (0, view(ready=False), report(BrokerState.NOT_RUNNING)),
            (50, view(ready=False), STARTING),  # further on: progress at 50
            (100, view(ready=False), STARTING),
            (110, view(ready=False), STARTING),
        ]
    )
    assert [type(s.action) for s in steps] == [AwaitReady, AwaitReady, AwaitReady, Restart]


def test_a_recovery_before_the_restart_is_tracked_then_forgotten_when_it_ends() -> None:
    steps = run(
        [
            (0, view(ready=False), recovering(10)),
            (30, view(ready=False), recovering(8)),
            (40, view(ready=False), STARTING),
        ]
    )
    assert [type(s.action) for s in steps] == [AwaitRecovery, AwaitRecovery, AwaitReady]
    tracker = steps[1].record.recovery  # type: ignore[union-attr]
    assert tracker is not None and [p.logs for p in tracker.points] == [10, 8]
    assert steps[1].verdict is Verdict.PROGRESSING
    assert steps[2].record.recovery is None
    # its end is progress: not forced at 60 s from the first look
    later = step(steps[2].record, NODE, view(ready=False), STARTING, HEALTHY, 99, S)
    assert isinstance(later.action, AwaitReady)


def test_a_stalled_recovery_before_the_restart_fails_the_roll_without_a_restart() -> None:
    steps = run(
        [
            (0, view(ready=False), recovering(10)),
            (119, view(ready=False), recovering(10)),
            (120, view(ready=False), recovering(10)),
        ]
    )
    assert [s.failure is None for s in steps] == [True, True, False]
    assert steps[2].verdict is Verdict.STALLED and isinstance(steps[2].action, AwaitRecovery)
    assert "made no progress for 2m00s" in (steps[2].failure or "")


def test_an_unreadable_agent_is_waited_for_within_the_safety_wait_then_fails() -> None:
    # unknown from its first look past the timeout (60 s): the budget counts from there
    looks = [(t, view(ready=False), DOWN) for t in (0, 60, 100, 359, 360)]
    steps = run(looks)
    assert [type(s.action) for s in steps] == [
        AwaitReady,
        AwaitUnknown,
        AwaitUnknown,
        AwaitUnknown,
        AwaitUnknown,
    ]
    assert [s.failure is None for s in steps] == [True, True, True, True, False]
    assert "waited 5m00s (--safety-wait)" in (steps[4].failure or "")


def test_the_unknown_budget_starts_again_when_the_agent_answers() -> None:
    looks = [
        (0, view(ready=False), DOWN),
        (60, view(ready=False), DOWN),  # unknown from 60
        (300, view(ready=False), STARTING),  # readable, a step forward: progress
        (310, view(ready=False), DOWN),
        (360, view(ready=False), DOWN),  # unknown from 360
        (659, view(ready=False), DOWN),
        (660, view(ready=False), DOWN),
    ]
    steps = run(looks)
    assert [type(s.action) for s in steps] == [
        AwaitReady,
        AwaitUnknown,
        AwaitReady,
        AwaitReady,
        AwaitUnknown,
        AwaitUnknown,
        AwaitUnknown,
    ]
    assert [s.failure is None for s in steps] == [True] * 6 + [False]


def test_an_unreadable_agent_with_force_is_restarted_past_the_timeout() -> None:
    forcing = RollSettings(operation_timeout=60, on_agent_unreachable=OnAgentUnreachable.FORCE)
    steps = run([(0, view(ready=False), DOWN), (60, view(ready=False), DOWN)], settings=forcing)
    assert isinstance(steps[1].action, Restart) and not waits(steps[1])


# ---- after its restart ---------------------------------------------------------------------


def test_back_once_a_new_process_is_ready() -> None:
    steps = run(
        [
            (1, view(ready=True, instance="old"), RUNNING),  # the old one still answers
            (5, view(ready=False, instance="new"), STARTING),
            (9, view(ready=True, instance="new"), RUNNING),
        ],
        restarted(),
    )
    assert [type(s.action) for s in steps] == [AwaitReady, AwaitReady, Back]
    assert steps[0].action.reason == "waiting for the new process to start"


def test_not_back_within_the_timeout_fails_and_is_not_restarted_again() -> None:
    steps = run(
        [
            (0, view(ready=False, instance="new"), STARTING),
            (60, view(ready=False, instance="new"), STARTING),
        ],
        restarted(),
    )
    assert isinstance(steps[1].action, Fail)
    assert "is not restarted again" in (steps[1].failure or "")


def test_a_recovery_after_the_restart_outlasts_the_timeout_and_is_watched_by_its_agent() -> None:
    wait = restarted()
    first = step(wait, NODE, view(ready=False, instance="new"), recovering(50), None, 5, S)
    assert isinstance(first.action, AwaitRecovery)
    assert first.record.watching_recovery  # the platform is not asked until it ends
    # its agent unreadable mid-recovery: still recovering, judged by the recovery's own budget
    blind = step(first.record, NODE, None, DOWN, None, 100, S)
    assert isinstance(blind.action, AwaitRecovery) and blind.failure is None
    assert blind.verdict is Verdict.PROGRESSING
    on = step(blind.record, NODE, None, recovering(10), None, 288, S)
    assert on.failure is None
    ended = step(on.record, NODE, None, STARTING, None, 289, S)
    assert ended.at_once and not ended.record.watching_recovery
    # 284 s after the restart, well past the 60 s timeout: the recovery's end is progress
    after = step(ended.record, NODE, view(ready=False, instance="new"), STARTING, None, 289, S)
    assert isinstance(after.action, AwaitReady) and after.failure is None
    assert after.record.ready.since == "its log recovery ended"
    back = step(after.record, NODE, view(ready=True, instance="new"), RUNNING, None, 300, S)
    assert isinstance(back.action, Back)


def test_a_recovery_after_the_restart_past_its_budget_fails() -> None:
    first = step(restarted(), NODE, view(ready=False, instance="new"), recovering(900), None, 0, S)
    steps = [first]
    for t in range(100, 1000, 100):
        steps.append(step(steps[-1].record, NODE, None, recovering(900 - t), None, t, S))
    assert steps[-1].verdict is Verdict.TOO_LONG
    assert "still performing log recovery after 15m00s" in (steps[-1].failure or "")
    assert all(s.failure is None for s in steps[:-1])


def test_an_unreadable_agent_after_the_restart_is_waited_for_then_fails() -> None:
    looks = [(t, view(ready=False, instance="new"), DOWN) for t in (0, 60, 359, 360)]
    steps = run(looks, restarted())
    assert [type(s.action) for s in steps] == [AwaitReady, AwaitUnknown, AwaitUnknown, AwaitUnknown]
    assert "for 5m00s; not restarting it again" in (steps[3].failure or "")
    assert steps[2].failure is None


@pytest.mark.parametrize("gone", [True, False])
def test_a_gone_process_past_the_timeout_fails_at_once(gone: bool) -> None:
    steps = run(
        [
            (0, view(ready=False, instance="new", gone=gone), DOWN),
            (60, view(ready=False, instance="new", gone=gone), DOWN),
        ],
        restarted(),
    )
    assert isinstance(steps[1].action, Fail if gone else AwaitUnknown)


# ---- back where it was: the quorum and the ISRs ---------------------------------------------


def test_a_restarted_broker_is_done_once_back_in_every_isr_it_was_in_before() -> None:
    out = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (0, 2), 2),), None, None)
    wait = restarted()
    back = step(wait, NODE, view(ready=True, instance="new"), RUNNING, out, 0, S)
    assert isinstance(back.action, Back) and back.at_once
    assert back.record.catch_up is CatchUp.ISR
    steps = [step(back.record, NODE, None, None, out, t, S) for t in (0, 299)]
    assert isinstance(steps[0].action, AwaitIsr) and steps[0].action.lagging == 1
    assert not back.record.asks_agent  # only Kafka is asked now
    late = step(steps[0].record, NODE, None, None, out, 300, S)
    assert "has not rejoined the ISR of 1 partitions (t-0)" in (late.failure or "")
    done = step(steps[0].record, NODE, None, None, HEALTHY, 10, S)
    assert isinstance(done.action, Done) and done.action.note == ""


def test_what_it_was_already_out_of_before_its_restart_is_not_waited_for() -> None:
    out = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (0, 2), 2),), None, None)
    wait = replace(restarted(), catch_up=CatchUp.ISR, base=Baseline(frozenset({"t-0"})))
    wait = replace(wait, budget=Budget.start(0))
    done = step(wait, NODE, None, None, out, 0, S)
    assert isinstance(done.action, Done)
    assert done.action.note == "already out of sync before its restart: t-0"


def test_the_cluster_unseen_is_waited_for_within_the_safety_wait() -> None:
    wait = replace(restarted(), catch_up=CatchUp.ISR, budget=Budget.start(0))
    steps = [step(wait, NODE, None, None, None, t, S) for t in (0, 299, 300)]
    assert [s.failure is None for s in steps] == [True, True, False]
    assert "its partitions (the Admin API cannot be reached)" in (steps[2].failure or "")


@pytest.mark.parametrize("caught_up_before", [True, False])
def test_a_controller_waits_for_the_quorum_only_if_its_voter_was_caught_up_before(
    caught_up_before: bool,
) -> None:
    base = Baseline(voter_caught_up=caught_up_before)
    wait = restarted_record(replace(TAKEN, name=CONTROLLER.name), CONTROLLER, S, 0, "old", base)
    back = step(wait, CONTROLLER, view(ready=True, instance="new"), None, None, 0, S)
    if caught_up_before:
        assert back.record.catch_up is CatchUp.QUORUM and back.at_once
    else:
        assert isinstance(back.action, Done)  # controller-only: nothing else to wait for


def test_a_voter_not_yet_caught_up_is_waited_for_then_done() -> None:
    taken = replace(TAKEN, name=CONTROLLER.name)
    wait = replace(
        restarted_record(taken, CONTROLLER, S, 0, "old"),
        catch_up=CatchUp.QUORUM,
        budget=Budget.start(0),
    )
    behind = ClusterView((), QuorumInfo(1, (VoterInfo(1, 5000, 900), VoterInfo(9, 1000, 400))), 1)
    first = step(wait, CONTROLLER, None, None, behind, 10, S)
    assert isinstance(first.action, AwaitQuorum) and first.action.lag == 500
    assert first.record.since_ms == 5000  # the leader's, when back
    caught = ClusterView((), QuorumInfo(1, (VoterInfo(1, 6000, 900), VoterInfo(9, 6000, 900))), 1)
    assert isinstance(step(first.record, CONTROLLER, None, None, caught, 12, S).action, Done)

"""The per-node decision table (proposal 048's rules, pure)."""

from __future__ import annotations

import pytest

from roller.agent_client import AgentReport, AgentUnavailable
from roller.decide import AwaitReady, AwaitRecovery, Defer, Fail, Restart, decide
from roller.model import ClusterView, Node, PartitionInfo, PlatformView, Role
from shared.states import BrokerState
from shared.wire import BrokerStateReport, RecoveryProgress

NODE = Node(1, "kafka-1", frozenset({Role.BROKER}), "https://kafka-1:8443")
HEALTHY = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (0, 1, 2), 2),), None, None)
TIGHT = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (1, 2), 2),), None, None)
RECOVERING = AgentReport(
    NODE.agent_url or "", BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(3, 40))
)
STARTING = AgentReport(NODE.agent_url or "", BrokerStateReport(BrokerState.STARTING))
DOWN = AgentUnavailable(NODE.agent_url or "", None, "unreachable", "refused")


def view(ready: bool = True, up_to_date: bool = False, stuck: str | None = None) -> PlatformView:
    return PlatformView(exists=True, ready=ready, up_to_date=up_to_date, stuck=stuck)


@pytest.mark.parametrize(
    ("platform", "cluster", "waited", "agent", "expected", "text"),
    [
        (view(), HEALTHY, False, None, Restart, "restart"),
        (view(), TIGHT, False, None, Defer, "min.insync.replicas"),
        (view(), None, False, None, Defer, "could not be observed"),
        (view(ready=False, stuck="CrashLoopBackOff"), TIGHT, False, None, Restart, "stuck"),
        (
            view(ready=False, stuck="Unschedulable", up_to_date=True),
            HEALTHY,
            False,
            None,
            Fail,
            "will not help",
        ),
        (view(ready=False), HEALTHY, False, None, AwaitReady, "not ready"),
        (
            view(ready=False),
            HEALTHY,
            True,
            RECOVERING,
            AwaitRecovery,
            "3 logs and 40 segments left",
        ),
        (view(ready=False), TIGHT, True, RECOVERING, AwaitRecovery, "log recovery"),
        (view(ready=False), HEALTHY, True, STARTING, Restart, "STARTING"),
        (view(ready=False), HEALTHY, True, DOWN, Restart, "unreachable"),
        (view(ready=False), HEALTHY, True, None, Restart, "no agent"),
    ],
)
def test_decisions(
    platform: PlatformView,
    cluster: ClusterView | None,
    waited: bool,
    agent: object,
    expected: type,
    text: str,
) -> None:
    action = decide(NODE, platform, cluster, waited=waited, agent=agent)  # type: ignore[arg-type]
    assert isinstance(action, expected)
    assert text in action.reason
    if isinstance(action, Restart) and not platform.ready:
        assert action.force


def test_a_recovering_broker_is_never_restarted_whatever_else_is_true() -> None:
    for cluster in (HEALTHY, TIGHT, None):
        for up_to_date in (True, False):
            action = decide(
                NODE,
                view(ready=False, up_to_date=up_to_date),
                cluster,
                waited=True,
                agent=RECOVERING,
            )
            assert not isinstance(action, Restart)

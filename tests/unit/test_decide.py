"""The per-node decision table (proposal 048's rules and rollguard's, pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rollguard.roller.model import (
    AgentReport,
    AgentUnavailable,
    ClusterView,
    Node,
    PartitionInfo,
    PlatformView,
    Role,
)
from rollguard.roller.roll.node.actions import (
    AwaitReady,
    AwaitRecovery,
    AwaitUnknown,
    Back,
    Defer,
    DeferKind,
    Fail,
    Restart,
)
from rollguard.roller.roll.node.after import after_restart
from rollguard.roller.roll.node.before import agent_unknown, decide
from rollguard.roller.roll.node.taking import held_by_recovery, wanted
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, KafkaBuild, RecoveryPhase, RecoveryProgress

NODE = Node(1, "kafka-1", frozenset({Role.BROKER}), "https://kafka-1:8443")
CONTROLLER = Node(9, "ctrl-9", frozenset({Role.CONTROLLER}), "https://ctrl-9:8443")
HEALTHY = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (0, 1, 2), 2),), None, None)
TIGHT = ClusterView((PartitionInfo("t", 0, (0, 1, 2), (1, 2), 2),), None, None)
RECOVERING = AgentReport(
    NODE.agent_url or "", BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(3, 40))
)
STARTING = AgentReport(NODE.agent_url or "", BrokerStateReport(BrokerState.STARTING))
# Kafka 4.x recovers in STARTING as often as in RECOVERY; a clean start loads its logs there too
RECOVERING_IN_STARTING = AgentReport(
    NODE.agent_url or "", BrokerStateReport(BrokerState.STARTING, RecoveryProgress(14, 52))
)
LOADING = AgentReport(
    NODE.agent_url or "",
    BrokerStateReport(BrokerState.STARTING, RecoveryProgress(13, 0, RecoveryPhase.LOADING)),
)
DOWN = AgentUnavailable(NODE.agent_url or "", None, "unreachable", "refused")
REFUSED = AgentUnavailable(NODE.agent_url or "", None, "tls-refused", "certificate required")
NO_JMX = AgentUnavailable(NODE.agent_url or "", 503, "jmx-unreachable", "connection refused")
NO_STATE = AgentUnavailable(NODE.agent_url or "", 503, "broker-state-missing", "no MBean")
LATE = 301.0  # past the default operation timeout of 300 s


def view(
    ready: bool = True,
    up_to_date: bool = False,
    stuck: str | None = None,
    gone: bool = False,
    instance: str | None = None,
    opted_out: bool = False,
) -> PlatformView:
    return PlatformView(
        exists=True,
        ready=ready,
        up_to_date=up_to_date,
        stuck=stuck,
        process_gone=gone,
        instance=instance,
        opted_out=opted_out,
    )


@pytest.mark.parametrize(
    ("platform", "cluster", "waited", "agent", "expected", "text"),
    [
        (view(), HEALTHY, 0, None, Restart, "restart"),
        (view(), TIGHT, 0, None, Defer, "min.insync.replicas"),
        (view(), None, 0, None, Defer, "could not be observed"),
        (view(ready=False, stuck="CrashLoopBackOff"), TIGHT, 0, None, Restart, "stuck"),
        (
            view(ready=False, stuck="Unschedulable", up_to_date=True),
            HEALTHY,
            0,
            None,
            Fail,
            "will not help",
        ),
        # Not ready: the agent is asked at once, and its answer shown while waiting.
        (view(ready=False), HEALTHY, 0, STARTING, AwaitReady, "STARTING"),
        (
            view(ready=False),
            HEALTHY,
            0,
            RECOVERING,
            AwaitRecovery,
            "3 logs left to recover (40 segments",
        ),
        (view(ready=False), TIGHT, LATE, RECOVERING, AwaitRecovery, "log recovery"),
        (view(ready=False), HEALTHY, LATE, RECOVERING_IN_STARTING, AwaitRecovery, "STARTING (1)"),
        (view(ready=False), HEALTHY, LATE, LOADING, AwaitRecovery, "13 logs left to load"),
        # Past the operation timeout, a readable agent that says "not recovering": force.
        (view(ready=False), HEALTHY, LATE, STARTING, Restart, "STARTING"),
        # ... but an unreadable one is unknown: wait, never force.
        (view(ready=False), HEALTHY, LATE, DOWN, AwaitUnknown, "cannot be read"),
        (view(ready=False), HEALTHY, LATE, REFUSED, AwaitUnknown, "tls-refused"),
        (view(ready=False), HEALTHY, LATE, NO_JMX, AwaitUnknown, "jmx-unreachable"),
        (view(ready=False), HEALTHY, LATE, None, AwaitUnknown, "no agent"),
        # ... unless the platform proves the process gone.
        (view(ready=False, gone=True), HEALTHY, LATE, DOWN, Restart, "process is gone"),
        (view(ready=False, gone=True), HEALTHY, 10, DOWN, AwaitReady, "not ready"),
    ],
)
def test_decisions(
    platform: PlatformView,
    cluster: ClusterView | None,
    waited: float,
    agent: AgentReport | AgentUnavailable | None,
    expected: type,
    text: str,
) -> None:
    action = decide(NODE, platform, cluster, waited=waited, agent=agent)
    assert isinstance(action, expected)
    assert text in action.reason
    if isinstance(action, Restart) and not platform.ready:
        assert action.force


def test_unknown_is_forced_only_on_explicit_request() -> None:
    action = decide(NODE, view(ready=False), HEALTHY, waited=LATE, agent=DOWN, force_unknown=True)
    assert (
        isinstance(action, Restart) and action.force and "--on-agent-unreachable" in action.reason
    )
    early = decide(NODE, view(ready=False), HEALTHY, waited=5, agent=DOWN, force_unknown=True)
    assert isinstance(early, AwaitReady)
    recovering = decide(
        NODE, view(ready=False), HEALTHY, waited=LATE, agent=RECOVERING, force_unknown=True
    )
    assert isinstance(recovering, AwaitRecovery)


def test_a_controller_only_nodes_agent_without_broker_state_is_not_unknown() -> None:
    assert not agent_unknown(CONTROLLER, NO_STATE)
    assert agent_unknown(NODE, NO_STATE)  # a broker without BrokerState is broken
    assert agent_unknown(CONTROLLER, DOWN)
    action = decide(CONTROLLER, view(ready=False), HEALTHY, waited=LATE, agent=NO_STATE)
    assert isinstance(action, Restart) and action.force


def test_a_recovering_broker_is_never_restarted_whatever_else_is_true() -> None:
    for cluster in (HEALTHY, TIGHT, None):
        for up_to_date in (True, False):
            for gone in (True, False):
                for force in (True, False):
                    action = decide(
                        NODE,
                        view(ready=False, up_to_date=up_to_date, gone=gone),
                        cluster,
                        waited=LATE,
                        agent=RECOVERING,
                        force_unknown=force,
                    )
                    assert isinstance(action, AwaitRecovery)


RUNNING = AgentReport(NODE.agent_url or "", BrokerStateReport(BrokerState.RUNNING))


@pytest.mark.parametrize(
    ("platform", "before", "waited", "agent", "expected", "text"),
    [
        # Back: a new process (by identity), ready; or any ready one when the old is unknown.
        (view(instance="b"), "a", 0, RUNNING, Back, "ready again"),
        (view(instance="a"), None, 0, RUNNING, Back, "ready again"),
        # The old process still answers: not back, whatever it says.
        (view(instance="a"), "a", 0, RUNNING, AwaitReady, "new process to start"),
        (view(instance=None), "a", 0, RUNNING, AwaitReady, "new process to start"),
        # In log recovery: waited for, never restarted, before or after the timeout.
        (view(ready=False, instance="b"), "a", 0, RECOVERING, AwaitRecovery, "log recovery"),
        (view(ready=False), "a", LATE, RECOVERING_IN_STARTING, AwaitRecovery, "STARTING"),
        (view(ready=False, instance="b"), "a", 10, STARTING, AwaitReady, "STARTING"),
        # Past the timeout: a readable agent, or a gone process, ends the roll: restarted once.
        (view(ready=False, instance="b"), "a", LATE, STARTING, Fail, "not restarted again"),
        (view(ready=False, gone=True), "a", LATE, DOWN, Fail, "not ready 5m00s after"),
        # ... an unreadable one is unknown: waited for within the safety budget.
        (view(ready=False), "a", LATE, DOWN, AwaitUnknown, "cannot be read"),
        (view(ready=False), "a", LATE, None, AwaitUnknown, "no agent"),
    ],
)
def test_after_a_restart(
    platform: PlatformView,
    before: str | None,
    waited: float,
    agent: AgentReport | AgentUnavailable | None,
    expected: type,
    text: str,
) -> None:
    step = after_restart(NODE, platform, agent, before=before, waited=waited, timeout=300)
    assert isinstance(step, expected)
    assert text in step.reason


def test_a_controller_whose_server_still_starts_is_not_back_whatever_its_platform_says() -> None:
    # A pod whose port accepts and a voter that fetches, while the agent sees no app-info yet:
    # the controller still replays its metadata log (its start took 14.4 s on a loaded CI).
    starting = AgentUnavailable(CONTROLLER.agent_url or "", 503, "server-starting", "starting")
    step = after_restart(CONTROLLER, view(), starting, before=None, waited=12, timeout=300)
    assert isinstance(step, AwaitReady) and "server-starting" in step.reason
    step = after_restart(CONTROLLER, view(), NO_STATE, before=None, waited=14, timeout=300)
    assert isinstance(step, Back)


@pytest.mark.parametrize(
    ("platform", "settings", "taken", "why"),
    [
        (view(), RollSettings(), True, ""),
        (view(up_to_date=True), RollSettings(), False, "already runs the desired revision"),
        (view(up_to_date=True), RollSettings(all_nodes=True), True, ""),
        (view(up_to_date=True, stuck="CrashLoopBackOff"), RollSettings(), True, ""),
        (view(), RollSettings(skip=frozenset({"kafka-1"})), False, "skipped with --skip"),
        (view(opted_out=True), RollSettings(all_nodes=True), False, "opted out by annotation"),
        (view(up_to_date=True), RollSettings(only=frozenset({"kafka-1"})), True, ""),
        (view(), RollSettings(only=frozenset({"kafka-2"})), False, "not named by --only"),
        # --skip wins over --only
        (
            view(),
            RollSettings(only=frozenset({"kafka-1"}), skip=frozenset({"kafka-1"})),
            False,
            "skipped with --skip",
        ),
    ],
)
def test_which_nodes_a_roll_takes(
    platform: PlatformView, settings: RollSettings, taken: bool, why: str
) -> None:
    got, reason = wanted(NODE, platform, settings)
    assert got is taken
    assert taken or reason == why


def test_a_broker_on_its_way_back_holds_every_other_restart_as_a_recovery_does() -> None:
    # STARTING or RECOVERY after its logs are loaded: fenced, out of its ISRs (a pod roll on a
    # fresh machine restarted a controller 1.1 s after a crashed broker's recovery, 23 s before
    # that broker was unfenced)
    action = decide(NODE, view(ready=False), HEALTHY, agent=STARTING)
    assert isinstance(action, AwaitReady) and action.starting
    # (RECOVERY counts as a recovery already, with or without the agent's figures)
    for agent in (DOWN, NO_JMX, None):  # unknown: waited for as before, holding nothing
        action = decide(NODE, view(ready=False), HEALTHY, agent=agent)
        assert isinstance(action, AwaitReady) and not action.starting
    held = held_by_recovery(["kafka-2"], ["kafka-1", "kafka-3"])
    assert held.kind is DeferKind.RECOVERING_PEER
    assert held.reason == (
        "kafka-2 is in log recovery and kafka-1, kafka-3 are starting: no other node is "
        "restarted until it is back"
    )
    assert held_by_recovery(["kafka-2"]).reason == (
        "kafka-2 is in log recovery: no other node is restarted until it is back"
    )


ON_OLD = AgentReport(
    NODE.agent_url or "", BrokerStateReport(BrokerState.RUNNING, kafka=KafkaBuild("4.0.0"))
)
ON_NEW = AgentReport(
    NODE.agent_url or "", BrokerStateReport(BrokerState.RUNNING, kafka=KafkaBuild("4.4.0"))
)
UPGRADE = RollSettings(kafka_version="4.4.0")


@pytest.mark.parametrize(
    ("platform", "revisions", "settings", "running", "taken", "why"),
    [
        # An inventory (no revisions): what the node runs decides.
        (view(), False, UPGRADE, "4.0.0", True, "runs Kafka 4.0.0; the target is 4.4.0"),
        (view(), False, UPGRADE, "4.4.0", False, "already runs Kafka 4.4.0"),
        (view(), False, UPGRADE, None, True, "its Kafka version is not known; the target is"),
        (view(), False, replace(UPGRADE, all_nodes=True), "4.4.0", True, "--all"),
        # Kubernetes: an outdated pod is taken whatever it runs (its template is the change) ...
        (view(), True, UPGRADE, "4.4.0", True, "outdated pod revision"),
        # ... an up-to-date one on the wrong version too: its restart shows what it runs.
        (view(up_to_date=True), True, UPGRADE, "4.0.0", True, "runs Kafka 4.0.0"),
        (view(up_to_date=True), True, UPGRADE, "4.4.0", False, "already runs Kafka 4.4.0"),
        # --skip and --only come first, a target or not
        (view(), False, replace(UPGRADE, skip=frozenset({"kafka-1"})), "4.0.0", False,
         "skipped with --skip"),
        (view(), False, replace(UPGRADE, only=frozenset({"kafka-1"})), "4.4.0", True,
         "named by --only"),
        # Without a target, the version plays no part.
        (view(), False, RollSettings(), "4.4.0", True, "inventory (no revision to compare)"),
    ],
)  # fmt: skip
def test_a_target_version_decides_which_nodes_a_roll_takes(
    platform: PlatformView,
    revisions: bool,
    settings: RollSettings,
    running: str | None,
    taken: bool,
    why: str,
) -> None:
    build = KafkaBuild(running) if running is not None else None
    got, reason = wanted(NODE, platform, settings, revisions=revisions, running=build)
    assert got is taken
    assert why in reason


@pytest.mark.parametrize(
    ("agent", "waited", "expected", "text"),
    [
        (ON_NEW, 0, Back, "kafka-1 is ready again on Kafka 4.4.0"),
        (ON_OLD, 0, Fail, "kafka-1 came back on Kafka 4.0.0, not on the target 4.4.0"),
        # Ready but its version not said yet (a report without it): waited for, then a failure.
        (RUNNING, 10, AwaitReady, "waiting for its agent to say which Kafka it runs"),
        (RUNNING, LATE, Fail, "has not said which Kafka it runs 5m00s after its restart"),
    ],
)
def test_a_restarted_node_is_back_only_on_the_target_version(
    agent: AgentReport, waited: float, expected: type, text: str
) -> None:
    step = after_restart(
        NODE, view(instance="b"), agent, before="a", waited=waited, timeout=300, target="4.4.0"
    )
    assert isinstance(step, expected)
    assert text in step.reason
    # Back on the old version: failed on record, so a resumed roll takes it again.
    assert (isinstance(step, Fail) and step.again) is (agent is ON_OLD)


def test_a_controller_on_another_version_is_waited_for_first_its_old_answer_may_linger() -> None:
    # A controller-only node has no identity to tell its new process by: right after its
    # restart its agent may still say what the old process ran (seen on real Kafka: the roll
    # failed on the old process's 4.0.0 half a second after the restart).
    old = AgentUnavailable(
        CONTROLLER.agent_url or "", 503, "broker-state-missing", "no broker", KafkaBuild("4.0.0")
    )
    new = AgentUnavailable(
        CONTROLLER.agent_url or "", 503, "broker-state-missing", "no broker", KafkaBuild("4.4.0")
    )

    def after(agent: AgentUnavailable, waited: float) -> object:
        return after_restart(
            CONTROLLER, view(), agent, before=None, waited=waited, timeout=300, target="4.4.0"
        )

    step = after(old, 1)
    assert isinstance(step, AwaitReady) and "not yet the target 4.4.0" in step.reason
    assert isinstance(after(new, 2), Back)
    late = after(old, LATE)
    assert isinstance(late, Fail) and late.again and "came back on Kafka 4.0.0" in late.reason

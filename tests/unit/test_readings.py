"""From JMX values to a report: sums, absences and malformed values (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rollguard.agent.readings import (
    APP_COMMIT,
    APP_INFO,
    APP_START_TIME,
    APP_VERSION,
    BROKER_STATE,
    REMAINING_LOGS,
    REMAINING_SEGMENTS,
    RUNTIME,
    START_TIME,
    FailureReason,
    MBeanValue,
    SampleError,
    interpret,
    object_name_key,
)
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import KafkaBuild, RecoveryPhase, RecoveryProgress

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def state(value: object) -> MBeanValue:
    return MBeanValue(BROKER_STATE, "Value", value)


def logs(directory: str, value: object) -> MBeanValue:
    return MBeanValue(f"{REMAINING_LOGS},dir={directory}", "Value", value)


def segments(directory: str, thread: int, value: object) -> MBeanValue:
    return MBeanValue(f"{REMAINING_SEGMENTS},dir={directory},threadNum={thread}", "Value", value)


def test_recovery_sums_every_dir_and_every_thread() -> None:
    readings = [
        state("2"),
        logs("/data-0", 10), logs("/data-1", 7),
        segments("/data-0", 0, 100), segments("/data-0", 1, 90),
        segments("/data-1", 0, 80), segments("/data-1", 1, 3),
    ]  # fmt: skip
    report = interpret(readings, NOW)
    assert report.broker_state is BrokerState.RECOVERY
    assert report.recovery == RecoveryProgress(17, 273)
    assert report.sampled_at == NOW


def test_running_ignores_leftover_gauges() -> None:
    report = interpret([state("3"), logs("/d", 0), segments("/d", 0, 0)], NOW)
    assert report.broker_state is BrokerState.RUNNING and report.recovery is None


def test_recovery_before_kafka_registers_its_gauges_has_no_figures() -> None:
    assert interpret([state("2")], NOW).recovery is None
    assert interpret([state("1")], NOW).recovery is None


def test_a_recovery_in_starting_is_reported_as_one_in_recovery() -> None:
    # Kafka 4.x: the state depends on whether the registration was acked before loading began
    for value in ("1", "2"):
        readings = [state(value), logs("/d", 14), segments("/d", 0, 52), segments("/d", 1, 7)]
        report = interpret(readings, NOW)
        assert report.recovery == RecoveryProgress(14, 59, RecoveryPhase.RECOVERING)
        assert report.to_wire()["recovery"]["phase"] == "recovering"


def test_a_thread_that_has_recovered_nothing_yet_has_a_null_gauge() -> None:
    readings = [state("1"), logs("/d", 14), segments("/d", 0, None), segments("/d", 1, 39)]
    assert interpret(readings, NOW).recovery == RecoveryProgress(14, 39, RecoveryPhase.RECOVERING)


def test_the_loading_of_a_clean_start_is_told_from_a_recovery() -> None:
    # after a clean stop nothing is replayed: every thread's segment gauge stays null
    readings = [state("1"), logs("/d", 13), segments("/d", 0, None), segments("/d", 1, None)]
    report = interpret(readings, NOW)
    assert report.recovery == RecoveryProgress(13, 0, RecoveryPhase.LOADING)
    assert report.describe() == "STARTING (1): 13 logs left to load"


def test_a_real_brokers_quoted_dirs_are_summed_per_dir() -> None:
    readings = [
        state("2"),
        MBeanValue(f'{REMAINING_LOGS},dir="/var/kafka/a,b"', "Value", 3),
        MBeanValue(f'{REMAINING_LOGS},dir="/var/kafka/c"', "Value", 4),
        MBeanValue(f'{REMAINING_SEGMENTS},dir="/var/kafka/a,b",threadNum=0', "Value", 5),
    ]
    assert interpret(readings, NOW).recovery == RecoveryProgress(7, 5)


def test_missing_broker_state_before_the_server_has_started_is_server_starting() -> None:
    with pytest.raises(SampleError) as raised:
        interpret([logs("/d", 3)], NOW)
    assert raised.value.reason is FailureReason.SERVER_STARTING
    assert "app-info" in raised.value.message


@pytest.mark.parametrize(
    "readings",
    [[state("banana")], [state("42")], [state("2"), logs("/d", "many")],
     [state("2"), logs("/d", 1), segments("/d", 0, -4)], [state("2"), logs("/d", True)]],
)  # fmt: skip
def test_malformed_values_are_refused_with_the_mbean_named(readings: list[MBeanValue]) -> None:
    with pytest.raises(SampleError) as raised:
        interpret(readings, NOW)
    assert raised.value.reason is FailureReason.MALFORMED_VALUE
    assert "kafka." in raised.value.message


def test_the_jvm_start_time_and_the_agents_boot_id_are_reported() -> None:
    for value in (1_795_433_430_043, "1795433430043"):  # a Long, as a number or as text
        report = interpret([state("3"), MBeanValue(RUNTIME, START_TIME, value)], NOW, boot_id="b")
        assert report.broker_started_at == datetime(2026, 11, 23, 11, 30, 30, 43000, tzinfo=UTC)
        assert report.agent_boot_id == "b"
        assert report.to_wire()["brokerStartedAt"] == "2026-11-23T11:30:30.043Z"
    # without the Runtime MBean (not a JVM's JMX?) the report simply has no start time
    assert interpret([state("3")], NOW).broker_started_at is None


@pytest.mark.parametrize(
    "value",
    [
        "soon",
        -1,
        0,
        True,
        1.5e12,
        "\u0661\u0667\u0669\u0665\u0664\u0663\u0663\u0664\u0663\u0660\u0660\u0664\u0663",
        10**20,
    ],
)
def test_a_start_time_that_is_not_epoch_milliseconds_is_malformed(value: object) -> None:
    with pytest.raises(SampleError) as raised:
        interpret([state("3"), MBeanValue(RUNTIME, START_TIME, value)], NOW)
    assert raised.value.reason is FailureReason.MALFORMED_VALUE
    assert "StartTime" in raised.value.message


APP_INFO_0 = MBeanValue(f"{APP_INFO},id=0", APP_START_TIME, 1_795_433_431_043)


def test_a_started_controller_without_broker_state_is_broker_state_missing() -> None:
    runtime = MBeanValue(RUNTIME, START_TIME, 1_795_433_430_043)
    with pytest.raises(SampleError) as raised:
        interpret([runtime, APP_INFO_0], NOW)
    assert raised.value.reason is FailureReason.BROKER_STATE_MISSING
    # the same JVM before its server's start is over (a controller replaying its metadata log)
    with pytest.raises(SampleError) as raised:
        interpret([runtime], NOW)
    assert raised.value.reason is FailureReason.SERVER_STARTING
    # a broker reports its state whether or not its start is over
    assert interpret([state("3"), APP_INFO_0], NOW).broker_state is BrokerState.RUNNING


def app_info(version: object, commit: object) -> list[MBeanValue]:
    name = f"{APP_INFO},id=0"
    return [
        APP_INFO_0,
        MBeanValue(name, APP_VERSION, version),
        MBeanValue(name, APP_COMMIT, commit),
    ]


def test_the_kafka_a_started_node_runs_is_reported_a_controllers_too() -> None:
    report = interpret([state("3"), *app_info("4.4.0", "a0f9be8d5fe3bd18")], NOW)
    assert report.kafka == KafkaBuild("4.4.0", "a0f9be8d5fe3bd18")
    assert report.to_wire()["kafkaVersion"] == "4.4.0"
    assert report.to_wire()["kafkaCommitId"] == "a0f9be8d5fe3bd18"
    with pytest.raises(SampleError) as raised:  # a controller-only node: in its 503's body
        interpret(app_info("4.0.0", "985bc99521dd22bb"), NOW)
    assert raised.value.reason is FailureReason.BROKER_STATE_MISSING
    assert raised.value.details == {"kafkaVersion": "4.0.0", "kafkaCommitId": "985bc99521dd22bb"}
    # still starting: no app-info, so nothing said of its version (not guessed)
    assert interpret([state("1")], NOW).kafka is None


@pytest.mark.parametrize(
    ("version", "commit", "expected"),
    [
        (None, None, None),
        ("", "abc", None),
        ("4.4.0; rm -rf /", "abc", None),  # not a version: left out, never passed on
        (440, "abc", None),
        ("4.1.0-rc2", None, KafkaBuild("4.1.0-rc2")),
        ("4.4.0", "x" * 65, KafkaBuild("4.4.0")),  # a commit id that is not one is left out
    ],
)
def test_a_version_that_is_not_one_is_left_out(
    version: object, commit: object, expected: KafkaBuild | None
) -> None:
    assert interpret([state("3"), *app_info(version, commit)], NOW).kafka == expected


def test_the_app_info_of_the_servers_metrics_is_not_its_start() -> None:
    # `kafka.server:type=app-info` (no id) is the metrics registry's, with other attributes
    with pytest.raises(SampleError) as raised:
        interpret([MBeanValue(APP_INFO, "start-time-ms", 1_795_433_431_043)], NOW)
    assert raised.value.reason is FailureReason.SERVER_STARTING


def test_other_attributes_and_mbeans_are_ignored() -> None:
    readings = [state("3"), MBeanValue(BROKER_STATE, "Count", "x"), MBeanValue("a:b=c", "Value", 1)]
    assert interpret(readings, NOW).broker_state is BrokerState.RUNNING


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("kafka.log:type=LogManager,name=remainingLogsToRecover,dir=/d",
         ("kafka.log", "LogManager", "remainingLogsToRecover")),
        ('kafka.log:dir="/a,b=c",name=remainingLogsToRecover,type=LogManager',
         ("kafka.log", "LogManager", "remainingLogsToRecover")),
        ("kafka.server:name=BrokerState,type=KafkaServer",
         ("kafka.server", "KafkaServer", "BrokerState")),
        ("nodomain", ("nodomain", "", "")),
    ],
)  # fmt: skip
def test_object_names_are_matched_on_domain_type_and_name_in_any_order(
    name: str, key: tuple[str, str, str]
) -> None:
    assert object_name_key(name) == key

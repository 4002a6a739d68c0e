from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rollguard.shared.errors import WireFormatError
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, KafkaBuild, RecoveryPhase, RecoveryProgress


def test_running_has_no_recovery_key() -> None:
    assert json.loads(BrokerStateReport(BrokerState.RUNNING).to_json()) == {"brokerState": 3}


def test_recovery_writes_the_proposal_048_keys() -> None:
    report = BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(123, 456))
    assert json.loads(report.to_json()) == {
        "brokerState": 2,
        "recovery": {
            "remainingLogsToRecover": 123,
            "remainingSegmentsToRecover": 456,
            "phase": "recovering",
        },
    }


def test_recovery_in_starting_is_written_and_read_with_its_phase() -> None:
    # a real KRaft broker loads its logs in STARTING as often as in RECOVERY
    for phase in RecoveryPhase:
        report = BrokerStateReport(BrokerState.STARTING, RecoveryProgress(14, 0, phase))
        assert BrokerStateReport.from_json(report.to_json()) == report


def test_a_recovery_without_a_phase_or_with_an_unknown_one_reads_as_recovering() -> None:
    for extra in ({}, {"phase": "tidying"}):
        body = {
            "brokerState": 1,
            "recovery": {"remainingLogsToRecover": 5, "remainingSegmentsToRecover": 9, **extra},
        }
        recovery = BrokerStateReport.from_wire(body).recovery
        assert recovery == RecoveryProgress(5, 9, RecoveryPhase.RECOVERING)


def test_sample_time_is_an_additive_iso_8601_utc_field() -> None:
    moment = datetime(2026, 11, 22, 2, 15, 54, 123000, tzinfo=UTC)
    body = BrokerStateReport(BrokerState.RUNNING, sampled_at=moment).to_wire()
    assert body == {"brokerState": 3, "sampledAt": "2026-11-22T02:15:54.123Z"}
    assert BrokerStateReport.from_wire(body).sampled_at == moment


def test_recovery_outside_the_recovery_state_is_refused() -> None:
    for state in (BrokerState.RUNNING, BrokerState.NOT_RUNNING, BrokerState.SHUTTING_DOWN):
        with pytest.raises(ValueError, match="STARTING or RECOVERY"):
            BrokerStateReport(state, RecoveryProgress(1, 1))


@pytest.mark.parametrize("key", ["recovery", "recoveryState"])
def test_reader_accepts_ours_and_strimzis_recovery_key(key: str) -> None:
    body = {"brokerState": 2, key: {"remainingLogsToRecover": 5, "remainingSegmentsToRecover": 9}}
    report = BrokerStateReport.from_json(json.dumps(body))
    assert report == BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(5, 9))


def test_round_trip() -> None:
    report = BrokerStateReport(BrokerState.RECOVERY, RecoveryProgress(0, 7))
    assert BrokerStateReport.from_json(report.to_json()) == report


def test_the_kafka_a_node_runs_round_trips_and_a_bad_one_is_left_out() -> None:
    report = BrokerStateReport(BrokerState.RUNNING, kafka=KafkaBuild("4.4.0", "a0f9be8d5fe3bd18"))
    assert report.to_wire() == {
        "brokerState": 3,
        "kafkaVersion": "4.4.0",
        "kafkaCommitId": "a0f9be8d5fe3bd18",
    }
    assert BrokerStateReport.from_json(report.to_json()) == report
    odd = {"brokerState": 3, "kafkaVersion": ["4.4.0"], "kafkaCommitId": "a0f9be8d5fe3bd18"}
    assert BrokerStateReport.from_wire(odd).kafka is None  # an unknown build, never guessed


def test_reader_ignores_unknown_fields_and_recovery_outside_recovery() -> None:
    body = {"brokerState": 3, "eta": 12, "recovery": {"remainingLogsToRecover": 1}}
    assert BrokerStateReport.from_wire(body) == BrokerStateReport(BrokerState.RUNNING)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("not json", "not JSON"),
        ("[1]", "JSON object"),
        ("{}", "no 'brokerState'"),
        ('{"brokerState": "x"}', "not a number"),
        ('{"brokerState": 9}', "not one of Kafka"),
        ('{"brokerState": 2, "recovery": 5}', "JSON object"),
        ('{"brokerState": 2, "recovery": {"remainingLogsToRecover": -1}}', "non-negative"),
        ('{"brokerState": 2, "recovery": {"remainingLogsToRecover": 1,'
         ' "remainingSegmentsToRecover": "2"}}', "non-negative"),
        ('{"brokerState": 3, "sampledAt": "yesterday"}', "ISO 8601"),
    ],
)  # fmt: skip
def test_malformed_reports_raise_a_wire_format_error_naming_the_problem(
    document: str, problem: str
) -> None:
    with pytest.raises(WireFormatError, match=problem):
        BrokerStateReport.from_json(document)

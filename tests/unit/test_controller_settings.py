"""A cluster's settings (`controller.settings`): annotations and a ConfigMap's keys through the
roll's own options, a bad value named by its annotation and value; and what a roll says as
Kubernetes Events (`controller.telling`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollguard.roller.controller.settings import (
    ClusterSettings,
    SettingsError,
    cluster_options,
    flag_of,
    gather,
)
from rollguard.roller.controller.telling import CLUSTER, Notice, Teller, ended, recovery_text

ENVIRON = {
    "ROLLGUARD_CERT": "/tls/tls.crt",
    "ROLLGUARD_KEY": "/tls/tls.key",
    "ROLLGUARD_CACERT": "/tls/ca.crt",
    "ROLLGUARD_NAMESPACE": "ignored",
    "ROLLGUARD_KAFKA_VERSION": "4.0.0",
    "HOME": "/root",
}


def options(settings: ClusterSettings, **changes: object):  # type: ignore[no-untyped-def]
    given: dict[str, object] = {
        "namespace": "kafka",
        "selector": "app=prod",
        "state_dir": Path("/var/lib/rollguard"),
        "kafka_version": None,
        "compare_config": True,
        "roll_id": "prod-12345678",
        "resume": False,
    }
    given.update(changes)
    return cluster_options(settings, ENVIRON, **given)  # type: ignore[arg-type]


def test_annotations_over_the_configmap_over_the_environment_make_the_roll_s_options() -> None:
    settings = gather(
        {
            "prod-broker": {
                "rollguard.io/bootstrap": "prod-kafka:9092",
                "rollguard.io/operation-timeout": "20s",
                "rollguard.io/status": "{}",
                "meta.helm.sh/release-name": "prod",
            },
            "prod-controller": {"rollguard.io/operation-timeout": "20s"},
        },
        {"window": "Sat 02:00-05:00 UTC\nSun 02:00-05:00 UTC", "operation-timeout": "1m"},
        "prod-rollguard",
    )
    assert settings.sources["operation-timeout"] == (
        "annotation rollguard.io/operation-timeout (StatefulSet prod-broker)"
    )
    found = options(settings)
    assert found.operation_timeout == 20 and len(found.window) == 2
    assert found.namespace == "kafka" and found.selector == "app=prod"  # the controller's
    assert found.roll_id == "prod-12345678" and found.resume is None
    assert found.kafka_version is None and found.compare_config
    assert str(found.cert) == "/tls/tls.crt"
    resumed = options(settings, resume=True, kafka_version="4.4.0", compare_config=False)
    assert resumed.resume == "prod-12345678" and resumed.roll_id is None
    assert resumed.kafka_version == "4.4.0" and not resumed.compare_config


@pytest.mark.parametrize(
    ("annotations", "said"),
    [
        (
            {"rollguard.io/operation-timeout": "5 minutes"},
            "annotation rollguard.io/operation-timeout (StatefulSet prod-broker)='5 minutes': ",
        ),
        ({}, "rollguard.io/bootstrap is required"),
        (
            {"rollguard.io/gate-query": "up == 0"},
            "annotation rollguard.io/gate-query (StatefulSet prod-broker)='up == 0' needs "
            "rollguard.io/gate-prometheus",
        ),
    ],
)
def test_a_bad_value_is_named_by_its_annotation_and_its_value(
    annotations: dict[str, str], said: str
) -> None:
    given = {"rollguard.io/bootstrap": "prod-kafka:9092"} if annotations else {}
    settings = gather({"prod-broker": {**given, **annotations}})
    with pytest.raises(SettingsError) as refused:
        options(settings)
    assert said in str(refused.value), refused.value
    assert "ROLLGUARD_" not in str(refused.value)


def test_unknown_conflicting_or_controller_s_own_settings_are_refused_naming_them() -> None:
    with pytest.raises(
        SettingsError, match=r"rollguard.io/operation-timout .*'operation-timout' is no setting"
    ):
        gather({"kafka": {"rollguard.io/operation-timout": "20s"}})
    with pytest.raises(
        SettingsError, match=re.escape("pod template's annotation rollguard.io/kafka-version")
    ):
        gather({"kafka": {"rollguard.io/kafka-version": "4.1.1"}})
    with pytest.raises(SettingsError, match="ConfigMap s key namespace: not a cluster's setting"):
        gather({}, {"namespace": "other"}, "s")
    with pytest.raises(
        SettingsError,
        match=r"StatefulSets a and b of one cluster give it two values \('1m', '2m'\)",
    ):
        gather({"a": {"rollguard.io/safety-wait": "1m"}, "b": {"rollguard.io/safety-wait": "2m"}})
    assert flag_of("rollguard.io/paused") is None and flag_of("other.io/x") is None
    assert flag_of("rollguard.io/window") == "window"


def test_a_roll_s_events_become_notices_a_recovery_told_with_its_eta_once_a_minute() -> None:
    now = [0.0]
    teller = Teller("prod-1", "template changed", clock=lambda: now[0])
    assert teller.tell({"action": "roll-start", "reason": "", "kafkaVersion": "4.4.0"}) == [
        Notice(
            CLUSTER,
            "Normal",
            "RollStarted",
            "roll prod-1, every node to Kafka 4.4.0: template changed",
        )
    ]
    recovery = {
        "action": "wait-recovery",
        "node": "kafka-1",
        "reason": "progressing",
        "remainingLogsToRecover": 14,
        "remainingSegmentsToRecover": 1204,
        "eta": 360.0,
    }
    unknown = {**recovery, "eta": None}
    assert teller.tell(unknown) == []  # its ETA not known yet: told when it is
    now[0] = 5.0
    told = teller.tell(recovery)
    assert told == [
        Notice("kafka-1", "Normal", "WaitingForRecovery",
               "kafka-1: waiting for its log recovery, 14 logs (1,204 segments) left, ETA 6m00s")
    ]  # fmt: skip
    now[0] = 30.0
    assert teller.tell(recovery) == []
    now[0] = 66.0
    assert len(teller.tell(recovery)) == 1
    other = {**unknown, "node": "kafka-3"}
    assert teller.tell(other) == []
    now[0] = 81.0  # 15 s on and still no ETA: told without one
    assert teller.tell(other)[0].message.endswith("ETA not known yet")
    assert teller.tell(
        {"action": "ready", "node": "kafka-2", "reason": "restarted, ready and in sync"}
    ) == [
        Notice("kafka-2", "Normal", "Restarted", "kafka-2 restarted: restarted, ready and in sync")
    ]
    assert (
        teller.tell({"action": "defer", "node": "kafka-2", "reason": "x", "repeated": True}) == []
    )
    assert teller.tell({"action": "observe-agent", "node": "kafka-2", "reason": "x"}) == []
    held = teller.tell({"action": "gate-closed", "reason": "pause gate: held", "gate": "pause"})
    assert held == [Notice(CLUSTER, "Normal", "Held", "pause gate: held")]
    assert recovery_text("k", {}) == "k: waiting for its log recovery, ETA not known yet"
    gated = {"action": "defer", "node": "kafka-2", "reason": "pause gate: held", "kind": "gate"}
    assert teller.tell(gated) == []  # the gate's own notice says it, once for the roll
    restart = {"action": "restart", "node": "kafka-2", "reason": "restart"}
    assert teller.tell(restart) == [
        Notice("kafka-2", "Normal", "Restarting", "kafka-2: restarting")
    ]


def test_the_end_of_a_roll_says_what_it_did() -> None:
    assert ended("completed", restarted=3, skipped=0).message == (
        "roll completed: 3 restarted, 0 skipped"
    )
    assert ended("completed", restarted=0, skipped=3, configured=3).message == (
        "roll completed: 0 restarted, 3 skipped, 3 configured live"
    )
    refused = ended("refused", reason="may not: delete pods")
    assert (refused.type, refused.reason) == ("Warning", "RollRefused")

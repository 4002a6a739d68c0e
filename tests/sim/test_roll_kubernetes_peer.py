"""`rollguard roll` on Kubernetes, for what a real control plane cannot be made to show on
demand: a pod whose container crash-loops or whose image does not pull. On the Kubernetes API
peer (rollguard.peers.kube), with the real lightkube client: the broker pods belong to a
StatefulSet there, deleting one stops that broker in the Kafka-protocol peer and its replacement
rejoins when its container runs. Every other Kubernetes case of the roller runs on the real API
server (test_roll_kubernetes.py, test_kube_roll.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_pods import AGENTS, LABELS, PodRoll
from rollguard.peers.kube import KubeSim

from helpers import HttpsPeer, Pki, running_agent

NS = "kafka"


@pytest.fixture
def cluster(tmp_path: Path, pki: Pki) -> Iterator[PodRoll[KubeSim]]:
    """StatefulSet prod-kafka's 3 pods on the API peer, each deleted one stopping its node of
    the Kafka peer until its replacement's container runs; RUNNING agents."""
    with kafka_peer() as kafka:
        kube = KubeSim(
            recreate_after=0.1,
            ready_after=0.3,
            on_delete=lambda name: kafka.stop_node(int(name.rsplit("-", 1)[1])),
            on_start=lambda name: kafka.start_node(int(name.rsplit("-", 1)[1])),
        )
        kube.start()
        kube.add_statefulset(NS, "prod-kafka", 3, lambda ordinal: {**LABELS, "app": "kafka"},
                             revision="rev-1")  # fmt: skip
        try:
            with HttpsPeer(running_agent, pki) as agents:
                yield PodRoll(
                    kafka, NS, kube.kubeconfig(tmp_path, NS), tmp_path, pki, kube,
                    agent_url=agents.url + AGENTS,
                    deleted=lambda: [d.name for d in kube.deletions],
                )  # fmt: skip
        finally:
            kube.stop()


def test_a_stuck_out_of_date_pod_is_force_restarted_first(cluster: PodRoll[KubeSim]) -> None:
    kube = cluster.kube
    kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    kube.set_waiting("prod-kafka-2", "CrashLoopBackOff")
    done = cluster.roll()
    assert done.returncode == 0, done.stderr
    assert cluster.restarted()[0] == "prod-kafka-2"
    assert any("CrashLoopBackOff" in str(e["reason"]) for e in done.of("restart"))


def test_a_stuck_pod_that_is_up_to_date_is_fatal(cluster: PodRoll[KubeSim]) -> None:
    cluster.kube.set_waiting("prod-kafka-1", "ImagePullBackOff")
    done = cluster.roll()
    assert done.returncode == 1
    assert "prod-kafka-1 is stuck (ImagePullBackOff)" in done.stderr
    assert cluster.restarted() == []


def test_an_unschedulable_out_of_date_pod_is_force_restarted_first(
    cluster: PodRoll[KubeSim],
) -> None:
    kube = cluster.kube
    kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    kube.set_unschedulable("prod-kafka-0", True, namespace=NS)
    done = cluster.roll()
    assert done.returncode == 0, done.stderr
    assert cluster.restarted()[0] == "prod-kafka-0"
    assert any("Unschedulable" in str(e["reason"]) for e in done.of("restart"))

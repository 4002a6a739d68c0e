"""`rollguard roll` on Kubernetes, for what a real control plane cannot be made to show on
demand: a pod whose container crash-loops or whose image does not pull. On the Kubernetes API
peer (rollguard.peers.kube), with the real lightkube client: the broker pods belong to a
StatefulSet there, deleting one stops that broker in the Kafka-protocol peer and its replacement
rejoins when its container runs. Every other Kubernetes case of the roller runs on the real API
server (test_roll_kubernetes.py, test_kube_roll.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rollguard.peers.commandline import POD_TIMINGS, rollguard_args
from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.kube import KubeSim

from helpers import HttpsPeer, Pki, running_agent

NS = "kafka"
SELECTOR = "strimzi.io/cluster=prod"


def labels(ordinal: int) -> dict[str, str]:
    return {
        "strimzi.io/cluster": "prod",
        "strimzi.io/broker-role": "true",
        "strimzi.io/controller-role": "true",
        "app": "kafka",
    }


@dataclass
class Cluster:
    kube: KubeSim
    kafka: KafkaClusterSim
    kubeconfig: Path
    folder: Path

    agents: HttpsPeer

    def roll(
        self, pki: Pki, *extra: str, command: str = "roll", agent_url: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The installed roller; its agents are `self.agents` unless `agent_url` says (""
        gives no --agent-url at all: the default template)."""
        if agent_url is None:
            agent_url = self.agents.url + "/agents/{pod}/v1/broker-state"
        args = rollguard_args(
            command,
            namespace=NS,
            selector=SELECTOR,
            bootstrap=self.kafka.bootstrap,
            agent_url=agent_url,
            tls=pki,
            state_dir=self.folder / "state",
            timings=POD_TIMINGS,
            roll_id="k1",
            extra=extra,
        )
        env = {"KUBECONFIG": str(self.kubeconfig), "PATH": "/usr/bin:/bin"}
        return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)

    def deleted(self) -> list[str]:
        return [d.name for d in self.kube.deletions]

    def events(self) -> list[dict[str, object]]:
        path = self.folder / "state" / "events-k1.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def cluster(tmp_path: Path, pki: Pki) -> Iterator[Cluster]:
    kafka = KafkaClusterSim(
        broker_ids=[0, 1, 2], voters=[0, 1, 2], topics={"orders": TopicSpec(3, 3, 2)}
    )
    kafka.start()
    ordinal = lambda name: int(name.rsplit("-", 1)[1])  # noqa: E731
    kube = KubeSim(
        recreate_after=0.1,
        ready_after=0.3,
        on_delete=lambda name: kafka.stop_node(ordinal(name)),
        on_start=lambda name: kafka.start_node(ordinal(name)),
    )
    kube.start()
    kube.add_statefulset(NS, "prod-kafka", 3, labels, revision="rev-1")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": kube.url}}],
        "users": [{"name": "sim", "user": {"token": "test"}}],
        "contexts": [
            {"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": NS}}
        ],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    try:
        with HttpsPeer(running_agent, pki) as agents:
            yield Cluster(kube, kafka, kubeconfig, tmp_path, agents)
    finally:
        kube.stop()
        kafka.stop()


def test_a_stuck_out_of_date_pod_is_force_restarted_first(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_waiting("prod-kafka-2", "CrashLoopBackOff")
    done = cluster.roll(pki)
    assert done.returncode == 0, done.stderr
    assert cluster.deleted()[0] == "prod-kafka-2"
    assert any(
        e["action"] == "restart" and "CrashLoopBackOff" in str(e["reason"])
        for e in cluster.events()
    )


def test_a_stuck_pod_that_is_up_to_date_is_fatal(cluster: Cluster, pki: Pki) -> None:
    cluster.kube.set_waiting("prod-kafka-1", "ImagePullBackOff")
    done = cluster.roll(pki)
    assert done.returncode == 1
    assert "prod-kafka-1 is stuck (ImagePullBackOff)" in done.stderr
    assert cluster.deleted() == []


def test_an_unschedulable_out_of_date_pod_is_force_restarted_first(
    cluster: Cluster, pki: Pki
) -> None:
    cluster.kube.set_update_revision("prod-kafka", "rev-2", namespace=NS)
    cluster.kube.set_unschedulable("prod-kafka-0", True, namespace=NS)
    done = cluster.roll(pki)
    assert done.returncode == 0, done.stderr
    assert cluster.deleted()[0] == "prod-kafka-0"
    assert any(
        e["action"] == "restart" and "Unschedulable" in str(e["reason"]) for e in cluster.events()
    )

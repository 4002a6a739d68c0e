"""docs/library.md's worked example (a kopf handler asking for a plan) run against a real
Kubernetes API server (the shared control plane, `kube`: a StatefulSet's pods, their revisions
as its controller computes them, the roller's documented Role) and the Kafka peer. The library's
names and typing are tests/sim/test_library.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap
from test_library import LIBRARY_DOC

from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.processes import wait_until
from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_objects import load_role
from rollguard.roller import RollSettings
from rollguard.shared.tls import client_context

from helpers import ROOT, Pki


def example_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", LIBRARY_DOC, flags=re.S)
    assert len(blocks) == 1, "docs/library.md has one worked example"
    return blocks[0]


ROLE = ROOT / "deploy" / "kubernetes" / "roller" / "role.yaml"
STS = "prod-kafka"
PODS = ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
LABELS = {
    "strimzi.io/cluster": "prod",
    "strimzi.io/broker-role": "true",
    "strimzi.io/controller-role": "true",
}


@dataclass
class Clusters:
    """A Kafka peer of 3 combined nodes, and their pods on the real API server: StatefulSet
    prod-kafka (pods prod-kafka-0..2, Ready, at its update revision) in `namespace`."""

    kube: ControlPlane
    namespace: str
    kafka: KafkaClusterSim

    def uids(self) -> dict[str, str]:
        pods = self.kube.pods(self.namespace, STS)
        return {p.metadata.name: p.metadata.uid for p in pods if p.metadata}  # type: ignore[misc]

    def revisions(self) -> tuple[str, str]:
        """The StatefulSet's (currentRevision, updateRevision), as its controller computed them."""
        sts = self.kube.client().get(StatefulSet, STS, namespace=self.namespace)
        assert sts.status is not None
        return sts.status.currentRevision or "", sts.status.updateRevision or ""

    def written(self) -> list[str]:
        """The ConfigMaps and Leases of the namespace but its CA bundle: a roll's journal and
        lease would be here."""
        client = self.kube.client()
        maps = client.list(ConfigMap, namespace=self.namespace)
        leases = client.list(Lease, namespace=self.namespace)
        names = [f"ConfigMap/{m.metadata.name}" for m in maps if m.metadata]
        names += [f"Lease/{lease.metadata.name}" for lease in leases if lease.metadata]
        return [n for n in names if n != "ConfigMap/kube-root-ca.crt"]


def roller_kubeconfig(kube: ControlPlane, namespace: str) -> Path:
    """A ServiceAccount bound to the roller's documented Role (it may delete pods and write
    ConfigMaps: a plan's writing nothing is its own doing), once RBAC lets it list pods."""
    role = load_role(ROLE, namespace)
    return kube.role_account(namespace, role, "rollguard-roller", can=("list", "pods", ""))


@pytest.fixture
def clusters(
    kube: ControlPlane, kube_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Clusters]:
    kafka = KafkaClusterSim(
        broker_ids=[0, 1, 2], voters=[0, 1, 2], topics={"orders": TopicSpec(3, 3, 2)}
    )
    kafka.start()
    try:
        ns = kube_namespace
        monkeypatch.setenv("KUBECONFIG", str(roller_kubeconfig(kube, ns)))
        kube.apply_statefulset(ns, STS, 3, pod_labels=LABELS)
        kube.wait_pods_ready(ns, STS, 3)
        clusters = Clusters(kube, ns, kafka)

        def at_update_revision() -> bool:
            update = clusters.revisions()[1]
            hashes = {(p.metadata.labels or {}).get("controller-revision-hash")
                      for p in kube.pods(ns, STS) if p.metadata}  # fmt: skip
            return bool(update) and hashes == {update}

        wait_until(at_update_revision, 30, what="every pod at the StatefulSet's update revision")
        yield clusters
    finally:
        kafka.stop()


def plan_for(clusters: Clusters, pki: Pki, settings: RollSettings) -> list[dict[str, Any]]:
    """docs/library.md's example, run: the plan of cluster prod."""
    namespace: dict[str, Any] = {"__name__": "library_example"}
    exec(compile(example_code(), "docs/library.md", "exec"), namespace)
    assert asyncio.iscoroutinefunction(namespace["roll_plan"])  # registered with kopf.timer
    tls = client_context(pki.ca, pki.client_cert, pki.client_key)
    plan = namespace["plan_for"](
        clusters.namespace, "prod", clusters.kafka.bootstrap, tls, settings
    )
    entries: list[dict[str, Any]] = asyncio.run(plan)
    return entries


def test_the_kopf_example_plans_a_roll_and_changes_nothing(clusters: Clusters, pki: Pki) -> None:
    before = clusters.uids()
    entries = plan_for(clusters, pki, RollSettings(all_nodes=True))
    assert sorted(e["node"] for e in entries) == PODS
    assert {e["action"] for e in entries} == {"restart"}, entries
    # the active controller goes last
    assert entries[-1]["node"] == f"prod-kafka-{clusters.kafka.quorum_state().leader_id}"
    assert clusters.uids() == before  # a plan restarts nothing
    assert clusters.written() == []  # and writes no journal, takes no lease


def test_the_kopf_example_plans_only_the_pods_a_new_template_left_behind(
    clusters: Clusters, pki: Pki
) -> None:
    before = clusters.uids()
    entries = plan_for(clusters, pki, RollSettings())
    assert {e["action"] for e in entries} == {"skip"}, entries  # every pod is up to date
    current, update = clusters.revisions()
    clusters.kube.apply_statefulset(
        clusters.namespace, STS, 3, pod_labels=LABELS, pod_annotations={"example.com/config": "2"}
    )

    def new_revision() -> tuple[str, str] | None:
        revisions = clusters.revisions()
        return revisions if revisions[1] not in ("", update) else None

    # The StatefulSet controller computes the new revision; OnDelete: it replaces no pod.
    current_now, update_now = wait_until(new_revision, 30, what="a new update revision")
    assert current_now == current != update_now  # no pod is at the new revision yet
    entries = plan_for(clusters, pki, RollSettings())
    assert sorted(e["node"] for e in entries) == PODS
    assert {e["action"] for e in entries} == {"restart"}, entries
    assert clusters.uids() == before
    assert clusters.written() == []


def test_without_the_cluster_a_plan_is_refused(clusters: Clusters, pki: Pki) -> None:
    from rollguard.roller import (
        AgentClient,
        KafkaObserver,
        KubernetesPlatform,
        KubernetesSettings,
        RollFailed,
        plan,
    )
    from rollguard.shared.retry import RetryPolicy

    kafka = clusters.kafka
    kafka.stop()
    quick = RetryPolicy(max_retries=1, initial_backoff_ms=10)

    async def attempt() -> None:
        from lightkube import AsyncClient

        ns = clusters.namespace
        platform = KubernetesPlatform(
            AsyncClient(namespace=ns), KubernetesSettings(ns, "strimzi.io/cluster=prod")
        )
        observer = KafkaObserver(kafka.bootstrap, {}, timeout_ms=1000)
        agents = AgentClient(client_context(pki.ca, pki.client_cert, pki.client_key), quick)
        try:
            await plan(platform, observer.observe, agents, policy=quick)
        finally:
            await agents.aclose()
            await platform.close()
            observer.close()

    with pytest.raises(RollFailed, match="Admin API cannot be reached"):
        asyncio.run(attempt())

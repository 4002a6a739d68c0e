"""docs/library.md's worked example (a kopf handler asking for a plan) run against a real
Kubernetes API server (the shared control plane, `kube`: a StatefulSet's pods, their revisions
as its controller computes them, the roller's documented Role) and the Kafka peer. The library's
names and typing are tests/sim/test_library.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_library import LIBRARY_DOC

from rollguard.peers.harness import kafka_peer
from rollguard.peers.harness_pods import LABELS, PodRoll, roller_account
from rollguard.peers.processes import wait_until
from rollguard.peers.realkube import ControlPlane
from rollguard.roller import RollSettings
from rollguard.shared.tls import client_context

from helpers import Pki


def example_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", LIBRARY_DOC, flags=re.S)
    assert len(blocks) == 1, "docs/library.md has one worked example"
    return blocks[0]


STS = "prod-kafka"
PODS = ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
APP = {"app": STS}  # the StatefulSet's pods


@pytest.fixture
def clusters(
    kube: ControlPlane,
    kube_namespace: str,
    pki: Pki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[PodRoll[ControlPlane]]:
    """A Kafka peer of 3 combined nodes, and their pods on the real API server: StatefulSet
    prod-kafka (pods prod-kafka-0..2, Ready, at its update revision) in the namespace; the
    roller's credentials a ServiceAccount bound to its documented Role (it may delete pods and
    write ConfigMaps: a plan's writing nothing is its own doing)."""
    with kafka_peer() as kafka:
        ns = kube_namespace
        kubeconfig = roller_account(kube, ns, can=("list", "pods", ""))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        kube.apply_statefulset(ns, STS, 3, pod_labels=LABELS)
        kube.wait_pods_ready(ns, STS, 3)
        clusters = PodRoll(kafka, ns, kubeconfig, tmp_path, pki, kube)

        def at_update_revision() -> bool:
            update = clusters.revisions(STS)[1]
            hashes = {(p.metadata.labels or {}).get("controller-revision-hash")
                      for p in kube.pods(ns, STS) if p.metadata}  # fmt: skip
            return bool(update) and hashes == {update}

        wait_until(at_update_revision, 30, what="every pod at the StatefulSet's update revision")
        yield clusters


def plan_for(clusters: PodRoll[ControlPlane], settings: RollSettings) -> list[dict[str, Any]]:
    """docs/library.md's example, run: the plan of cluster prod."""
    namespace: dict[str, Any] = {"__name__": "library_example"}
    exec(compile(example_code(), "docs/library.md", "exec"), namespace)
    assert asyncio.iscoroutinefunction(namespace["roll_plan"])  # registered with kopf.timer
    pki = clusters.tls
    tls = client_context(pki.ca, pki.client_cert, pki.client_key)
    plan = namespace["plan_for"](
        clusters.namespace, "prod", clusters.kafka.bootstrap, tls, settings
    )
    entries: list[dict[str, Any]] = asyncio.run(plan)
    return entries


def test_the_kopf_example_plans_a_roll_and_changes_nothing(
    clusters: PodRoll[ControlPlane],
) -> None:
    before = clusters.uids(APP)
    entries = plan_for(clusters, RollSettings(all_nodes=True))
    assert sorted(e["node"] for e in entries) == PODS
    assert {e["action"] for e in entries} == {"restart"}, entries
    # the active controller goes last
    assert entries[-1]["node"] == f"prod-kafka-{clusters.kafka.quorum_state().leader_id}"
    assert clusters.uids(APP) == before  # a plan restarts nothing
    assert clusters.written() == []  # and writes no journal, takes no lease


def test_the_kopf_example_plans_only_the_pods_a_new_template_left_behind(
    clusters: PodRoll[ControlPlane],
) -> None:
    before = clusters.uids(APP)
    entries = plan_for(clusters, RollSettings())
    assert {e["action"] for e in entries} == {"skip"}, entries  # every pod is up to date
    current, update = clusters.revisions(STS)
    clusters.kube.apply_statefulset(
        clusters.namespace, STS, 3, pod_labels=LABELS, pod_annotations={"example.com/config": "2"}
    )

    def new_revision() -> tuple[str, str] | None:
        revisions = clusters.revisions(STS)
        return revisions if revisions[1] not in ("", update) else None

    # The StatefulSet controller computes the new revision; OnDelete: it replaces no pod.
    current_now, update_now = wait_until(new_revision, 30, what="a new update revision")
    assert current_now == current != update_now  # no pod is at the new revision yet
    entries = plan_for(clusters, RollSettings())
    assert sorted(e["node"] for e in entries) == PODS
    assert {e["action"] for e in entries} == {"restart"}, entries
    assert clusters.uids(APP) == before
    assert clusters.written() == []


def test_without_the_cluster_a_plan_is_refused(clusters: PodRoll[ControlPlane], pki: Pki) -> None:
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

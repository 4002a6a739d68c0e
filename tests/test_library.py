"""rollguard.roller as a library: its exported names, its typing marker, and docs/library.md's
worked example (a kopf handler asking for a plan) run against the Kubernetes and Kafka peers."""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import rollguard.roller
from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.kube import KubeSim
from rollguard.roller import RollSettings
from rollguard.shared.tls import client_context

from helpers import ROOT, Pki

LIBRARY_DOC = (ROOT / "docs" / "library.md").read_text()


def test_every_exported_name_resolves_to_its_module() -> None:
    where = rollguard.roller._WHERE  # type: ignore[attr-defined]
    assert sorted(where) == rollguard.roller.__all__
    for name, module in where.items():
        assert getattr(rollguard.roller, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rollguard.roller.Nope  # noqa: B018


def test_importing_the_package_loads_no_network_library_until_a_name_is_used() -> None:
    code = (
        "import sys, rollguard.roller as r\n"
        "before = {m for m in ('httpx', 'kafka', 'lightkube') if m in sys.modules}\n"
        "r.decide\n"
        "print(sorted(before))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("component", ["shared", "agent", "roller", "certs", "spark"])
def test_every_component_is_typed(component: str) -> None:
    assert importlib.resources.files(f"rollguard.{component}").joinpath("py.typed").is_file()


def test_the_operations_docs_link_the_library_page() -> None:
    assert "docs/library.md" in (ROOT / "README.md").read_text()


# ---- the worked example ------------------------------------------------------------------


def example_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", LIBRARY_DOC, flags=re.S)
    assert len(blocks) == 1, "docs/library.md has one worked example"
    return blocks[0]


@pytest.fixture
def clusters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KubeSim, Any]]:
    kafka = KafkaClusterSim(
        broker_ids=[0, 1, 2], voters=[0, 1, 2], topics={"orders": TopicSpec(3, 3, 2)}
    )
    kafka.start()
    kube = KubeSim()
    kube.start()

    def labels(ordinal: int) -> dict[str, str]:
        return {
            "strimzi.io/cluster": "prod",
            "strimzi.io/broker-role": "true",
            "strimzi.io/controller-role": "true",
        }

    kube.add_statefulset("kafka", "prod-kafka", 3, labels, revision="rev-1")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": kube.url}}],
        "users": [{"name": "sim", "user": {"token": "test"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    try:
        yield kube, kafka
    finally:
        kube.stop()
        kafka.stop()


def test_the_kopf_example_plans_a_roll_and_changes_nothing(
    clusters: tuple[KubeSim, KafkaClusterSim], pki: Pki
) -> None:
    kube, kafka = clusters
    namespace: dict[str, Any] = {"__name__": "library_example"}
    exec(compile(example_code(), "docs/library.md", "exec"), namespace)
    assert asyncio.iscoroutinefunction(namespace["roll_plan"])  # registered with kopf.timer
    tls = client_context(pki.ca, pki.client_cert, pki.client_key)
    entries = asyncio.run(
        namespace["plan_for"]("kafka", "prod", kafka.bootstrap, tls, RollSettings(all_nodes=True))
    )
    assert [e["node"] for e in entries][:3] != []
    assert sorted(e["node"] for e in entries) == ["prod-kafka-0", "prod-kafka-1", "prod-kafka-2"]
    assert {e["action"] for e in entries} == {"restart"}, entries
    # the active controller goes last
    assert entries[-1]["node"] == f"prod-kafka-{kafka.quorum_state().leader_id}"
    assert kube.deletions == []  # a plan restarts nothing
    assert kube.configmap("rollguard-roll-plan", "kafka") is None  # and writes no journal


def test_without_the_cluster_a_plan_is_refused(
    clusters: tuple[KubeSim, KafkaClusterSim], pki: Pki
) -> None:
    from rollguard.roller import (
        AgentClient,
        KafkaObserver,
        KubernetesPlatform,
        KubernetesSettings,
        RollFailed,
        plan,
    )
    from rollguard.shared.retry import RetryPolicy

    _, kafka = clusters
    kafka.stop()
    quick = RetryPolicy(max_retries=1, initial_backoff_ms=10)

    async def attempt() -> None:
        from lightkube import AsyncClient

        platform = KubernetesPlatform(
            AsyncClient(namespace="kafka"), KubernetesSettings("kafka", "strimzi.io/cluster=prod")
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

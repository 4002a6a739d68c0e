"""A real Kubernetes control plane (rollguard.peers.realkube) does what the roller's Kubernetes
tests will rely on: it starts, a StatefulSet's pods become Ready, the StatefulSet controller
answers a deleted pod with a new one, kwok holds a pod NotReady on demand, and RBAC is on.

One control plane per Kubernetes version for the whole file (the newest and one minor older,
tests/kube/versions.env), talked to through lightkube as the roller talks to it. Until `make
kube` has built them it fails naming the missing binary under `make test`
(ROLLGUARD_REQUIRE_ALL_TIERS), and skips saying so under a plain pytest.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule
from lightkube.resources.core_v1 import Pod
from lightkube.resources.rbac_authorization_v1 import Role

from rollguard.peers.processes import wait_until
from rollguard.peers.realkube import (
    NEWEST,
    VERSIONS,
    Binaries,
    ControlPlane,
    KubeBinariesMissing,
    pod_ready,
)
from rollguard.roller.kubernetes import HTTP_ERRORS

from helpers import missing_tier

# `make test` runs them; `make test-kube` runs only the tests on the real control plane.
pytestmark = pytest.mark.kube

NAMESPACE = "kafka"
APP = "kafka"


@dataclass
class Cluster:
    plane: ControlPlane
    started_s: float  # start() until every process is healthy and the node Ready
    pods_ready_s: float  # StatefulSet applied until its 3 pods are Ready


@pytest.fixture(scope="module", params=VERSIONS)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    version: str = request.param
    try:
        binaries = Binaries.find(version)
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))
    plane = ControlPlane(tmp_path_factory.mktemp(f"kube-{version}"), version, binaries=binaries)
    began = time.monotonic()
    with plane:
        started = time.monotonic() - began
        plane.create_namespace(NAMESPACE)
        namespace = time.monotonic() - began - started
        plane.apply_statefulset(NAMESPACE, APP, replicas=3)
        plane.wait_pods_ready(NAMESPACE, APP, 3)
        cluster = Cluster(plane, started, time.monotonic() - began - started)
        print(
            f"\nKubernetes {version}: control plane up in {started:.1f} s "
            f"({', '.join(f'{k} {v:.1f} s' for k, v in plane.timings.items())}), "
            f"3 pods Ready {cluster.pods_ready_s:.1f} s later (namespace {namespace:.1f} s); RSS "
            + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in plane.rss().items())
            + f", total {sum(plane.rss().values()) / 2**20:.0f} MiB"
        )
        yield cluster
    assert not [c.name for c in plane.components if c.running()]


def test_the_api_server_reports_the_pinned_version(cluster: Cluster) -> None:
    assert cluster.plane.version_info()["gitVersion"] == cluster.plane.version


def test_the_statefulset_pods_run_ready_each_on_a_loopback_address_of_its_own(
    cluster: Cluster,
) -> None:
    pods = cluster.plane.wait_pods_ready(NAMESPACE, APP, 3)
    assert sorted(p.metadata.name for p in pods if p.metadata) == ["kafka-0", "kafka-1", "kafka-2"]
    addresses = {ipaddress.ip_address(p.status.podIP) for p in pods if p.status and p.status.podIP}
    assert len(addresses) == 3
    assert all(a in ipaddress.ip_network(cluster.plane.cidr) and a.is_loopback for a in addresses)


def test_a_deleted_pod_is_replaced_by_a_new_pod_that_becomes_ready(cluster: Cluster) -> None:
    plane, client = cluster.plane, cluster.plane.client()
    before = client.get(Pod, "kafka-1", namespace=NAMESPACE)
    assert before.metadata is not None
    began = time.monotonic()
    client.delete(Pod, "kafka-1", namespace=NAMESPACE)

    def replaced() -> Pod | None:
        try:
            pod = client.get(Pod, "kafka-1", namespace=NAMESPACE)
        except ApiError:
            return None
        new = pod.metadata is not None and pod.metadata.uid != before.metadata.uid
        return pod if new and pod_ready(pod) else None

    after = wait_until(replaced, 60, 0.05, "kafka-1 replaced and Ready")
    print(
        f"\nKubernetes {plane.version}: deleted pod Ready again in {time.monotonic() - began:.2f} s"
    )
    assert after.metadata is not None and after.metadata.uid != before.metadata.uid
    plane.wait_pods_ready(NAMESPACE, APP, 3)


def test_a_pod_held_not_ready_stays_so_until_the_annotation_goes(cluster: Cluster) -> None:
    plane, client = cluster.plane, cluster.plane.client()

    def ready(name: str) -> bool:
        return pod_ready(client.get(Pod, name, namespace=NAMESPACE))

    plane.hold_not_ready(NAMESPACE, "kafka-2")
    wait_until(lambda: not ready("kafka-2"), 30, 0.05, "kafka-2 NotReady")
    # Held: still NotReady (and running, with its address) a while later.
    until = time.monotonic() + 2
    while time.monotonic() < until:
        pod = client.get(Pod, "kafka-2", namespace=NAMESPACE)
        assert not pod_ready(pod)
        assert pod.status is not None and pod.status.phase == "Running" and pod.status.podIP
        time.sleep(0.2)
    began = time.monotonic()
    plane.clear_not_ready(NAMESPACE, "kafka-2")
    wait_until(lambda: ready("kafka-2"), 30, 0.05, "kafka-2 Ready again")
    print(
        f"\nKubernetes {plane.version}: NotReady pod Ready {time.monotonic() - began:.2f} s after"
    )


def test_rbac_allows_a_user_only_what_a_role_grants(cluster: Cluster) -> None:
    plane = cluster.plane
    role = Role(
        metadata=ObjectMeta(name="pod-reader", namespace=NAMESPACE),
        rules=[PolicyRule(apiGroups=[""], resources=["pods"], verbs=["get", "list"])],
    )
    plane.client().create(role)
    reader = plane.user_kubeconfig("reader", namespace=NAMESPACE, role="pod-reader")
    nobody = plane.user_kubeconfig("nobody", namespace=NAMESPACE)
    with Client(KubeConfig.from_file(reader)) as allowed:
        assert len(list(allowed.list(Pod, namespace=NAMESPACE))) == 3
        with pytest.raises(ApiError) as refused:
            allowed.delete(Pod, "kafka-0", namespace=NAMESPACE)
    assert refused.value.status.code == 403
    with Client(KubeConfig.from_file(nobody)) as unbound, pytest.raises(ApiError) as unknown:
        list(unbound.list(Pod, namespace=NAMESPACE))
    assert unknown.value.status.code == 403
    # A service account's token (as a roller running in a pod has) bound to the same Role.
    account = plane.service_account_kubeconfig(NAMESPACE, "roller", role="pod-reader")
    with Client(KubeConfig.from_file(account)) as roller:
        assert len(list(roller.list(Pod, namespace=NAMESPACE))) == 3
        with pytest.raises(ApiError) as denied:
            roller.delete(Pod, "kafka-0", namespace=NAMESPACE)
    assert denied.value.status.code == 403


def test_the_api_server_alone_stops_and_starts_again(cluster: Cluster) -> None:
    plane = cluster.plane
    plane.stop_apiserver()
    assert plane.etcd.running() and plane.kwok.running()
    with pytest.raises(HTTP_ERRORS):  # refused: what the roller counts as the API unreachable
        plane.client().get(Pod, "kafka-0", namespace=NAMESPACE)
    began = time.monotonic()
    plane.start_apiserver()
    print(
        f"\nKubernetes {plane.version}: API server ready again in {time.monotonic() - began:.1f} s"
    )
    assert len(plane.wait_pods_ready(NAMESPACE, APP, 3)) == 3


def test_a_start_that_fails_half_way_leaves_no_process_behind(tmp_path: Path) -> None:
    try:
        binaries = Binaries.find(NEWEST)
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))
    plane = ControlPlane(tmp_path, NEWEST, binaries=binaries)
    plane.apiserver.command.append("--no-such-flag")
    with pytest.raises(AssertionError, match="kube-apiserver exited"):
        plane.start(timeout=60)
    started = [c for c in plane.components if c.process is not None]
    assert [c.name for c in started] == ["etcd", "kube-apiserver"]
    assert all(c.process is not None and c.process.returncode is not None for c in started)


def test_a_scheduler_that_dies_is_started_again_and_schedules(cluster: Cluster) -> None:
    plane = cluster.plane
    before = plane.restarts["kube-scheduler"]
    assert plane.scheduler.process is not None
    os.kill(plane.scheduler.process.pid, signal.SIGKILL)
    wait_until(
        lambda: plane.restarts["kube-scheduler"] == before + 1 and plane.scheduler.running(),
        10,
        0.05,
        "the scheduler started again",
    )
    old = {p.metadata.uid for p in plane.pods(NAMESPACE, APP) if p.metadata}
    plane.client().delete(Pod, "kafka-0", namespace=NAMESPACE)

    def replaced() -> bool:
        pods = plane.pods(NAMESPACE, APP)
        uids = {p.metadata.uid for p in pods if p.metadata}
        return len(uids - old) == 1 and len(pods) == 3 and all(map(pod_ready, pods))

    wait_until(replaced, 60, 0.05, "kafka-0 scheduled by the new scheduler and Ready")

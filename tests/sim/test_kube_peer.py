"""The fake Kubernetes API (`rollguard.peers.kube.KubeSim`) driven by the real lightkube clients.

The peer is kept for what a real control plane cannot show on demand: pods stuck in
CrashLoopBackOff, ImagePullBackOff or Unschedulable, and a StatefulSet of 1,000 pods. These
tests pin down what `rollguard roll` relies on when it runs against it
(test_roll_kubernetes_peer.py): the paths and label selectors lightkube sends are understood,
what comes back decodes into lightkube's models, errors become `ApiError` with the real `Status`
codes and reasons, pods go through the life cycle of a StatefulSet pod (gone, recreated with a
new uid and the update revision, not ready, Ready) or stay stuck, the roll's journal ConfigMap
and Lease conflict on a stale resourceVersion, and what the roll does not use (watch, patch,
apply, other verbs and query options, SelfSubjectAccessReviews) is refused at once as a real API
server refuses what it does not serve.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import lightkube
import pytest
from lightkube import ApiError, KubeConfig, operators
from lightkube.config.models import Cluster, User
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from rollguard.peers.kube import KubeSim, parse_label_selector

from helpers import wait_until

logger = logging.getLogger(__name__)

NS = "kafka"


def broker_labels(ordinal: int) -> dict[str, str]:
    labels = {"app": "kafka", "broker-id": str(ordinal)}
    if ordinal == 0:
        labels["controller"] = "yes"
    return labels


def kubeconfig(sim: KubeSim) -> KubeConfig:
    """`KubeConfig.from_server(url)` alone does not do: lightkube 1.0.1 asserts that the context
    has a user ("Missing user"). The peer asks for no credentials."""
    return KubeConfig.from_one(cluster=Cluster(server=sim.url), user=User(), namespace=NS)


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(recreate_after=0.2, ready_after=0.3) as sim:
        sim.add_statefulset(NS, "kafka", 3, broker_labels)
        yield sim


@pytest.fixture
def client(sim: KubeSim) -> Iterator[lightkube.Client]:
    with lightkube.Client(config=kubeconfig(sim)) as client:
        yield client


def get_or_none(client: lightkube.Client, name: str) -> Pod | None:
    try:
        return client.get(Pod, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


def ready_pod(client: lightkube.Client, name: str) -> Pod | None:
    pod = get_or_none(client, name)
    return pod if pod is not None and condition(pod, "Ready") == "True" else None


def condition(pod: Pod, kind: str) -> str | None:
    for cond in pod.status.conditions or []:
        if cond.type == kind:
            return cond.status
    return None


def container_state(pod: Pod) -> str:
    """`waiting:<reason>`, `running`, `ready`, or `none` when there is no container status."""
    if not pod.status.containerStatuses:
        return "none"
    status = pod.status.containerStatuses[0]
    if status.state.waiting is not None:
        return f"waiting:{status.state.waiting.reason}"
    return "ready" if status.ready else "running"


def test_list_pods_by_label_selector(client: lightkube.Client) -> None:
    def names(**selector: object) -> list[str]:
        return [p.metadata.name for p in client.list(Pod, **selector)]  # type: ignore[arg-type]

    assert names(labels={"app": "kafka"}) == ["kafka-0", "kafka-1", "kafka-2"]
    assert names(labels={"app": "kafka", "broker-id": "1"}) == ["kafka-1"]
    assert names(labels={"broker-id": operators.not_equal("1")}) == ["kafka-0", "kafka-2"]
    assert names(labels={"controller": None}) == ["kafka-0"]
    assert names(labels={"controller": operators.not_exists()}) == ["kafka-1", "kafka-2"]
    assert names(labels={"broker-id": ["0", "2"]}) == ["kafka-0", "kafka-2"]
    assert names(labels={"broker-id": operators.not_in(["0", "2"])}) == ["kafka-1"]
    assert names(labels={"app": "zookeeper"}) == []
    assert names(labels={"statefulset.kubernetes.io/pod-name": "kafka-2"}) == ["kafka-2"]

    with pytest.raises(ApiError) as bad_label:
        names(labels={"not a key!": "x"})
    assert (bad_label.value.status.code, bad_label.value.status.reason) == (400, "BadRequest")


def test_a_list_sees_its_own_namespace_only(sim: KubeSim, client: lightkube.Client) -> None:
    sim.add_statefulset("other", "kafka", 2, lambda ordinal: {"app": "kafka"})
    assert [p.metadata.name for p in client.list(Pod)] == ["kafka-0", "kafka-1", "kafka-2"]
    other = [(p.metadata.namespace, p.metadata.name) for p in client.list(Pod, namespace="other")]
    assert other == [("other", "kafka-0"), ("other", "kafka-1")]
    assert client.get(Pod, "kafka-1", namespace="other").metadata.namespace == "other"


def test_get_pod_looks_like_a_statefulset_pod(client: lightkube.Client) -> None:
    sts = client.get(StatefulSet, "kafka")
    pod = client.get(Pod, "kafka-2")
    assert (pod.apiVersion, pod.kind, pod.metadata.namespace) == ("v1", "Pod", NS)
    uuid.UUID(pod.metadata.uid)
    assert pod.metadata.labels == {
        "app": "kafka",
        "broker-id": "2",
        "controller-revision-hash": "rev-1",
        "statefulset.kubernetes.io/pod-name": "kafka-2",
        "apps.kubernetes.io/pod-index": "2",
    }
    assert pod.metadata.annotations is None
    [owner] = pod.metadata.ownerReferences
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "StatefulSet",
        "kafka",
        sts.metadata.uid,
        True,
    )
    assert pod.status.phase == "Running"
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(pod, kind) == "True", kind
    [container] = pod.status.containerStatuses
    assert container.name == "kafka" and container.ready and container.started
    assert container.state.running is not None and container.state.running.startedAt is not None
    assert pod.spec.containers[0].name == "kafka"
    assert pod.spec.nodeName


def test_statefulset_get_and_revisions(sim: KubeSim, client: lightkube.Client) -> None:
    sts = client.get(StatefulSet, "kafka")
    assert sts.spec.replicas == 3
    assert sts.spec.selector.matchLabels == {"app": "kafka"}
    assert sts.spec.updateStrategy.type == "OnDelete"
    assert (sts.status.currentRevision, sts.status.updateRevision) == ("rev-1", "rev-1")
    assert (sts.status.readyReplicas, sts.status.updatedReplicas) == (3, 3)

    sim.set_update_revision("kafka", "rev-2")
    sts = client.get(StatefulSet, "kafka")
    assert (sts.status.currentRevision, sts.status.updateRevision) == ("rev-1", "rev-2")
    assert sts.status.updatedReplicas is None  # zero is omitted, as by the real API
    assert sts.metadata.generation == sts.status.observedGeneration == 2
    out_of_date = [
        p.metadata.name
        for p in client.list(Pod, labels={"controller-revision-hash": operators.not_equal("rev-2")})
    ]
    assert out_of_date == ["kafka-0", "kafka-1", "kafka-2"]

    with pytest.raises(ApiError) as missing:
        client.get(StatefulSet, "nope")
    assert missing.value.status.code == 404
    assert missing.value.status.message == 'statefulsets.apps "nope" not found'


def test_delete_recreates_pod_with_new_uid_then_ready(
    sim: KubeSim, client: lightkube.Client
) -> None:
    calls: list[tuple[str, str, float]] = []
    sim.on_delete = lambda name: calls.append(("delete", name, time.monotonic()))
    sim.on_start = lambda name: calls.append(("start", name, time.monotonic()))
    sim.ready_after = 0.8  # running, not ready, long enough to be seen
    sim.set_update_revision("kafka", "rev-2")
    old = client.get(Pod, "kafka-1")

    client.delete(Pod, "kafka-1")
    assert get_or_none(client, "kafka-1") is None
    assert "kafka-1" not in [p.metadata.name for p in client.list(Pod, labels={"app": "kafka"})]
    [deletion] = sim.deletions
    assert (deletion.name, deletion.uid) == ("kafka-1", old.metadata.uid)

    states: list[str] = []

    def back_and_ready() -> Pod | None:
        pod = get_or_none(client, "kafka-1")
        if pod is None:
            return None
        state = container_state(pod)
        if not states or states[-1] != state:
            states.append(state)
            assert condition(pod, "Ready") == ("True" if state == "ready" else "False"), state
        return pod if state == "ready" else None

    wait_until(lambda: get_or_none(client, "kafka-1"), timeout=5, interval=0.01, what="recreation")
    reappeared = time.monotonic()
    assert reappeared - deletion.at >= sim.recreate_after
    new = wait_until(back_and_ready, timeout=5, interval=0.02, what="kafka-1 Ready again")
    # ContainerCreating lasts a moment only: a poll may miss it.
    assert states in (["waiting:ContainerCreating", "running", "ready"], ["running", "ready"])
    assert new.metadata.uid != old.metadata.uid
    assert new.metadata.labels["controller-revision-hash"] == "rev-2"
    assert new.status.phase == "Running"
    assert [(kind, name) for kind, name, _ in calls] == [
        ("delete", "kafka-1"),
        ("start", "kafka-1"),
    ]

    sts = client.get(StatefulSet, "kafka")
    assert (sts.status.updatedReplicas, sts.status.currentReplicas) == (1, 2)
    assert sts.status.currentRevision == "rev-1"  # OnDelete: never promoted (Kubernetes < 1.36)


def test_a_slow_on_delete_holds_the_pod_back_but_not_the_api(
    sim: KubeSim, client: lightkube.Client
) -> None:
    release = threading.Event()
    sim.on_delete = lambda name: release.wait(10)
    client.delete(Pod, "kafka-0")
    held_until = sim.deletions[0].at + 3 * sim.recreate_after
    while time.monotonic() < held_until:
        assert get_or_none(client, "kafka-0") is None
        assert len(list(client.list(Pod, labels={"app": "kafka"}))) == 2
        time.sleep(0.02)
    release.set()
    wait_until(lambda: ready_pod(client, "kafka-0"), timeout=5, what="kafka-0 back and Ready")


def test_async_client_lists_deletes_and_polls(sim: KubeSim) -> None:
    """What the roller does: list by label, delete, then get until the new pod is Ready."""
    sim.set_update_revision("kafka", "rev-2")

    async def scenario() -> None:
        async with lightkube.AsyncClient(config=kubeconfig(sim)) as client:
            names = [p.metadata.name async for p in client.list(Pod, labels={"app": "kafka"})]
            assert names == ["kafka-0", "kafka-1", "kafka-2"]
            old = await client.get(Pod, "kafka-0")
            await client.delete(Pod, "kafka-0")
            with pytest.raises(ApiError) as gone:
                await client.get(Pod, "kafka-0")
            assert gone.value.status.code == 404
            deadline = time.monotonic() + 5
            while True:
                try:
                    new = await client.get(Pod, "kafka-0")
                    if condition(new, "Ready") == "True":
                        break
                except ApiError as exc:
                    assert exc.status.code == 404
                assert time.monotonic() < deadline, "kafka-0 not Ready again within 5 s"
                await asyncio.sleep(0.02)
            assert new.metadata.uid != old.metadata.uid
            assert new.metadata.labels["controller-revision-hash"] == "rev-2"

    asyncio.run(scenario())


@pytest.mark.parametrize("reason", ["CrashLoopBackOff", "ImagePullBackOff"])
def test_a_stuck_pod_stays_stuck_until_it_is_deleted(
    sim: KubeSim, client: lightkube.Client, reason: str
) -> None:
    """What the roll sees of a stuck pod, and does to it: deleted, it comes back healthy."""
    started: list[str] = []
    sim.on_start = started.append
    before = client.get(Pod, "kafka-1")
    sim.set_waiting("kafka-1", reason)
    stuck = client.get(Pod, "kafka-1")
    assert int(stuck.metadata.resourceVersion) > int(before.metadata.resourceVersion)
    assert client.get(StatefulSet, "kafka").status.readyReplicas == 2

    watched_until = time.monotonic() + 2 * sim.ready_after
    while time.monotonic() < watched_until:
        pod = client.get(Pod, "kafka-1")
        assert container_state(pod) == f"waiting:{reason}"
        assert condition(pod, "Ready") == condition(pod, "ContainersReady") == "False"
        assert pod.status.phase == "Running"  # it ran before
        time.sleep(0.05)
    [container] = pod.status.containerStatuses
    assert container.state.waiting.message
    if reason == "CrashLoopBackOff":
        assert container.restartCount == 1
        assert container.lastState.terminated.exitCode == 1
    else:
        assert container.restartCount == 0 and container.lastState is None
    assert started == []

    client.delete(Pod, "kafka-1")
    back = wait_until(lambda: ready_pod(client, "kafka-1"), timeout=5, what="kafka-1 Ready")
    assert back.metadata.uid != pod.metadata.uid
    assert back.status.containerStatuses[0].restartCount == 0
    assert started == ["kafka-1"]


def test_a_stuck_pod_may_also_start_again_by_itself(sim: KubeSim, client: lightkube.Client) -> None:
    sim.set_waiting("kafka-0", "CrashLoopBackOff")
    uid = client.get(Pod, "kafka-0").metadata.uid
    sim.set_waiting("kafka-0", None)
    again = wait_until(lambda: ready_pod(client, "kafka-0"), timeout=5, what="kafka-0 Ready")
    assert again.metadata.uid == uid
    assert again.status.containerStatuses[0].restartCount == 1
    assert client.get(StatefulSet, "kafka").status.readyReplicas == 3
    with pytest.raises(KeyError):
        sim.set_waiting("kafka-9", "CrashLoopBackOff")


def test_an_unschedulable_pod_stays_pending(sim: KubeSim, client: lightkube.Client) -> None:
    uid = client.get(Pod, "kafka-2").metadata.uid
    sim.set_unschedulable("kafka-2", True)
    pod = client.get(Pod, "kafka-2")
    assert pod.status.phase == "Pending"
    assert pod.spec.nodeName is None and pod.status.containerStatuses is None
    [scheduled] = pod.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert client.get(StatefulSet, "kafka").status.readyReplicas == 2

    sim.set_unschedulable("kafka-2", False)
    ready = wait_until(lambda: ready_pod(client, "kafka-2"), timeout=5, what="kafka-2 Ready")
    assert ready.spec.nodeName and ready.status.phase == "Running"
    assert ready.metadata.uid == uid


def test_a_thousand_pods_are_listed_by_label_selector_completely_and_quickly(
    sim: KubeSim, client: lightkube.Client
) -> None:
    """Holding many pods is one of the reasons the peer is kept: a real control plane on a test
    machine cannot be made to hold 1,000 of them at will."""

    def shard(ordinal: int) -> dict[str, str]:
        return {"app": "big", "shard": str(ordinal % 4)}

    started = time.monotonic()
    names = sim.add_statefulset(NS, "big", 1000, shard)
    assert len(names) == 1000
    created = time.monotonic() - started

    started = time.monotonic()
    listed = [p.metadata.name for p in client.list(Pod, labels={"app": "big"})]
    took = time.monotonic() - started
    assert sorted(listed) == sorted(names) and len(set(listed)) == 1000
    quarter = list(client.list(Pod, labels={"app": "big", "shard": "3"}))
    assert len(quarter) == 250
    assert {p.metadata.labels["apps.kubernetes.io/pod-index"] for p in quarter} == {
        str(ordinal) for ordinal in range(3, 1000, 4)
    }
    assert [p.metadata.name for p in client.list(Pod, labels={"app": "kafka"})] == [
        "kafka-0",
        "kafka-1",
        "kafka-2",
    ]
    status = client.get(StatefulSet, "big").status
    assert (status.replicas, status.readyReplicas, status.updatedReplicas) == (1000, 1000, 1000)
    logger.info("1,000 pods: created in %.2f s, listed in %.2f s", created, took)
    # Each well under a second here; generous bounds, for a loaded machine.
    assert created < 5 and took < 5


def test_configmap_create_get_replace(client: lightkube.Client) -> None:
    """The roll journal's ConfigMap as the roller writes it: created, then replaced with its
    resourceVersion; a stale replace is a 409 Conflict, never a lost update."""
    labels = {"app.kubernetes.io/managed-by": "rollguard"}
    meta = ObjectMeta(name="journal", labels=labels)
    created = client.create(ConfigMap(metadata=meta, data={"step": "1"}))
    assert created.metadata.namespace == NS and created.metadata.uid
    got = client.get(ConfigMap, "journal")
    assert (got.data, got.metadata.labels) == ({"step": "1"}, labels)
    with pytest.raises(ApiError) as twice:
        client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={}))
    assert (twice.value.status.code, twice.value.status.reason) == (409, "AlreadyExists")

    stale = client.get(ConfigMap, "journal")
    fresh = client.get(ConfigMap, "journal")
    fresh.data["step"] = "2"
    replaced = client.replace(fresh)
    assert int(replaced.metadata.resourceVersion) > int(stale.metadata.resourceVersion)
    assert replaced.metadata.uid == created.metadata.uid
    assert client.replace(replaced).metadata.resourceVersion == replaced.metadata.resourceVersion

    stale.data["step"] = "lost update"
    with pytest.raises(ApiError) as lost:
        client.replace(stale)
    assert (lost.value.status.code, lost.value.status.reason) == (409, "Conflict")
    assert "the object has been modified" in lost.value.status.message
    assert client.get(ConfigMap, "journal").data == {"step": "2"}

    with pytest.raises(ApiError) as missing:
        client.replace(ConfigMap(metadata=ObjectMeta(name="nope", resourceVersion="1"), data={}))
    assert (missing.value.status.code, missing.value.status.reason) == (404, "NotFound")


def test_what_the_peer_does_not_model_of_a_configmap_is_refused(client: lightkube.Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={"step": "1"}))
    blind = client.get(ConfigMap, "journal")
    blind.metadata.resourceVersion = None  # the roller always sends it
    for unmodelled, call in (
        (ConfigMap(metadata=ObjectMeta(generateName="journal-")), client.create),
        (
            ConfigMap(metadata=ObjectMeta(name="locked"), data={"a": "1"}, immutable=True),
            client.create,
        ),
        (ConfigMap(metadata=ObjectMeta(name="binary"), binaryData={"a": "AA=="}), client.create),
        (blind, client.replace),
    ):
        with pytest.raises(ApiError) as refused:
            call(unmodelled)
        assert (refused.value.status.code, refused.value.status.reason) == (400, "BadRequest")
    assert client.get(ConfigMap, "journal").data == {"step": "1"}


def test_errors_are_status_json(sim: KubeSim, client: lightkube.Client) -> None:
    with pytest.raises(ApiError) as missing:
        client.get(Pod, "kafka-7")
    status = missing.value.status
    assert (status.code, status.reason, status.status) == (404, "NotFound", "Failure")
    assert status.message == 'pods "kafka-7" not found'
    assert (status.details.name, status.details.kind) == ("kafka-7", "pods")

    raw = httpx.get(f"{sim.url}/api/v1/namespaces/{NS}/pods/kafka-7")
    assert raw.headers["content-type"] == "application/json"
    assert raw.json()["kind"] == "Status" and raw.json()["code"] == 404
    unknown = httpx.get(f"{sim.url}/api/v1/namespaces/{NS}/pods/kafka-0/log")
    assert unknown.status_code == 404 and unknown.json()["reason"] == "NotFound"
    refused = httpx.post(f"{sim.url}/api/v1/namespaces/{NS}/pods", json={})
    assert refused.status_code == 405 and refused.json()["reason"] == "MethodNotAllowed"


def test_what_the_roller_does_not_use_is_refused_at_once(
    sim: KubeSim, client: lightkube.Client
) -> None:
    """Watch, every PATCH (merge, strategic, JSON patch, server-side apply), the verbs and query
    options the roller never sends: answered at once with the Status a real API server gives
    for what it does not serve, so a test that needs them fails clearly instead of hanging."""

    def refusal(call: Callable[..., object], *args: Any, **kwargs: Any) -> tuple[int, str]:
        with pytest.raises(ApiError) as refused:
            answer = call(*args, **kwargs)
            if call == client.list:  # a list is sent when it is iterated
                list(answer)  # type: ignore[call-overload]
        return refused.value.status.code, refused.value.status.reason

    client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={"step": "1"}))
    not_allowed = (405, "MethodNotAllowed")
    change = {"data": {"step": "2"}}
    json_patch = [{"op": "replace", "path": "/data/step", "value": "2"}]
    applied = ConfigMap(metadata=ObjectMeta(name="journal"), data={"step": "2"})
    for call, args, kwargs in [
        (client.patch, (ConfigMap, "journal", change), {"patch_type": PatchType.MERGE}),
        (client.patch, (ConfigMap, "journal", change), {"patch_type": PatchType.STRATEGIC}),
        (client.patch, (ConfigMap, "journal", json_patch), {"patch_type": PatchType.JSON}),
        (client.apply, (applied,), {"field_manager": "rg"}),
        (client.patch, (Pod, "kafka-0", {"metadata": {"labels": {"a": "b"}}}), {}),
        (client.delete, (ConfigMap, "journal"), {}),
        (client.list, (ConfigMap,), {}),
        (client.list, (Pod,), {"namespace": "*"}),
    ]:
        assert refusal(call, *args, **kwargs) == not_allowed, (call, args, kwargs)
    assert client.get(ConfigMap, "journal").data == {"step": "1"}  # nothing was changed

    bad_request = (400, "BadRequest")
    assert refusal(client.list, Pod, fields={"metadata.name": "kafka-0"}) == bad_request
    assert refusal(client.list, Pod, chunk_size=2) == bad_request
    assert refusal(client.delete, Pod, "kafka-0", grace_period=0) == bad_request
    dry = ConfigMap(metadata=ObjectMeta(name="dry"), data={})
    assert refusal(client.create, dry, dry_run=True) == bad_request
    assert sim.deletions == [] and refusal(client.get, ConfigMap, "dry") == (404, "NotFound")

    # The roller checks its permissions with SelfSubjectAccessReviews; the peer has none (as an
    # API server without the authorization.k8s.io group), and the roller warns it cannot check.
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(namespace=NS, verb="delete", resource="pods")
        )
    )
    assert refusal(client.create, review) == (404, "NotFound")

    with httpx.Client(base_url=sim.url, timeout=5) as raw:
        watch = raw.get(f"/api/v1/namespaces/{NS}/pods", params={"watch": "true"})
        assert (watch.status_code, watch.json()["reason"]) == not_allowed
        assert watch.headers["content-type"] == "application/json"
        yaml_body = raw.post(
            f"/api/v1/namespaces/{NS}/configmaps",
            content=b"metadata: {name: y}",
            headers={"content-type": "application/yaml"},
        )
        assert (yaml_body.status_code, yaml_body.json()["reason"]) == (415, "UnsupportedMediaType")
        for method, path in [
            ("PUT", f"/api/v1/namespaces/{NS}/configmaps"),
            ("POST", f"/api/v1/namespaces/{NS}/configmaps/journal"),
            ("DELETE", f"/api/v1/namespaces/{NS}/pods"),
        ]:
            answer = raw.request(method, path, json={"metadata": {"name": "journal"}})
            assert (answer.status_code, answer.json()["reason"]) == not_allowed, (method, path)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app==kafka", {"app": "kafka"}, True),
        ("app = kafka , tier!=web", {"app": "kafka"}, True),
        ("tier!=web", {"tier": "web"}, False),
        ("env in ( a, b ),!canary", {"env": "b"}, True),
        ("env in (a,b)", {}, False),
        ("env notin (a,b)", {}, True),
        ("env notin (a,b)", {"env": "a"}, False),
        ("controller", {"controller": ""}, True),
        ("", {}, True),
    ],
)
def test_label_selector_grammar(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector)(labels) is expected


@pytest.mark.parametrize("selector", ["a,,b", "env in ()", "env in (a", "a b", "=x", "a=b c"])
def test_malformed_label_selectors_are_refused(selector: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_label_selector(selector)


def micro(second: int, microsecond: int = 123456) -> datetime:
    return datetime(2026, 11, 23, 11, 0, second, microsecond, tzinfo=UTC)


def lease_object(name: str, holder: str, **meta: Any) -> Lease:
    spec = LeaseSpec(
        holderIdentity=holder,
        leaseDurationSeconds=30,
        acquireTime=micro(2),
        renewTime=micro(2),
        leaseTransitions=0,
    )
    return Lease(metadata=ObjectMeta(name=name, **meta), spec=spec)


def test_lease_create_get_replace_and_its_conflicts(client: lightkube.Client) -> None:
    with pytest.raises(ApiError) as missing:
        client.get(Lease, "rollguard")
    status = missing.value.status
    assert (status.code, status.reason) == (404, "NotFound")
    assert status.message == 'leases.coordination.k8s.io "rollguard" not found'
    assert (status.details.group, status.details.kind) == ("coordination.k8s.io", "leases")

    created = client.create(lease_object("rollguard", "host-a:1"))
    assert created.metadata.namespace == NS and created.metadata.uid
    got = client.get(Lease, "rollguard")
    assert got.spec.holderIdentity == "host-a:1" and got.spec.renewTime == micro(2)
    with pytest.raises(ApiError) as twice:
        client.create(lease_object("rollguard", "host-b:2"))
    assert (twice.value.status.code, twice.value.status.reason) == (409, "AlreadyExists")

    stale, fresh = client.get(Lease, "rollguard"), client.get(Lease, "rollguard")
    fresh.spec.renewTime = micro(12)
    renewed = client.replace(fresh)
    assert int(renewed.metadata.resourceVersion) > int(stale.metadata.resourceVersion)
    stale.spec.holderIdentity = "host-b:2"
    with pytest.raises(ApiError) as lost:
        client.replace(stale)
    assert (lost.value.status.code, lost.value.status.reason) == (409, "Conflict")
    assert client.get(Lease, "rollguard").spec.holderIdentity == "host-a:1"

    # The roll's annotation comes and goes with its holder.
    held = client.get(Lease, "rollguard")
    held.metadata.annotations = {"rollguard.io/roll-id": "k1"}
    assert client.replace(held).metadata.annotations == {"rollguard.io/roll-id": "k1"}
    released = client.get(Lease, "rollguard")
    released.metadata.annotations, released.spec.holderIdentity = None, ""
    client.replace(released)
    got = client.get(Lease, "rollguard")
    assert (got.metadata.annotations, got.spec.holderIdentity) == (None, "")

    # What the roll does not do is refused: an update without a resourceVersion (400), and a
    # PUT of a Lease that does not exist (404: the roll creates its Lease with POST; a real
    # API server would create it).
    blind = client.get(Lease, "rollguard")
    blind.metadata.resourceVersion = None
    with pytest.raises(ApiError) as unconditional:
        client.replace(blind)
    assert (unconditional.value.status.code, unconditional.value.status.reason) == (
        400,
        "BadRequest",
    )
    with pytest.raises(ApiError) as absent:
        client.replace(lease_object("other", "host-b:2", resourceVersion="5"))
    assert (absent.value.status.code, absent.value.status.reason) == (404, "NotFound")


def test_two_async_clients_racing_for_a_lease_one_wins(sim: KubeSim) -> None:
    async def scenario() -> list[str]:
        config = kubeconfig(sim)
        async with (
            lightkube.AsyncClient(config=config) as a,
            lightkube.AsyncClient(config=config) as b,
        ):
            await a.create(lease_object("race", ""))
            first, second = await a.get(Lease, "race"), await b.get(Lease, "race")
            first.spec.holderIdentity, second.spec.holderIdentity = "a:1", "b:2"
            outcomes = await asyncio.gather(
                a.replace(first), b.replace(second), return_exceptions=True
            )
            return [
                f"{o.status.code}" if isinstance(o, ApiError) else o.spec.holderIdentity
                for o in outcomes
            ]

    outcome = asyncio.run(scenario())
    assert outcome in (["a:1", "409"], ["409", "b:2"])
    with lightkube.Client(config=kubeconfig(sim)) as client:
        [winner] = [o for o in outcome if o != "409"]
        assert client.get(Lease, "race").spec.holderIdentity == winner

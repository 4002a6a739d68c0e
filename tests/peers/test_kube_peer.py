"""The fake Kubernetes API (`rollguard.peers.kube.KubeSim`) driven by the real lightkube clients.

These tests pin down what rollguard's Kubernetes code relies on: the paths and selectors
lightkube sends are understood, what comes back decodes into lightkube's models, errors become
`ApiError` with the real `Status` codes and reasons, pods go through the life cycle of a
StatefulSet pod (gone, recreated with a new uid and the update revision, not ready, Ready), and
what the roller does not use (watch, patch, apply, other verbs and query options) is refused at
once as a real API server refuses what it does not serve.
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
from lightkube import ApiError, operators
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from rollguard.peers.kube import KubeSim, SeenRequest, parse_label_selector

from helpers import wait_until

logger = logging.getLogger(__name__)

NS = "kafka"


def broker_labels(ordinal: int) -> dict[str, str]:
    labels = {"app": "kafka", "broker-id": str(ordinal)}
    if ordinal == 0:
        labels["controller"] = "yes"
    return labels


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(recreate_after=0.2, ready_after=0.3) as sim:
        sim.add_statefulset(
            NS, "kafka", 3, broker_labels, lambda ordinal: {"rollguard/ordinal": str(ordinal)}
        )
        yield sim


@pytest.fixture
def client(sim: KubeSim) -> Iterator[lightkube.Client]:
    with lightkube.Client(config=sim.kubeconfig(namespace=NS)) as client:
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


def test_lightkube_1_0_1_needs_a_user_in_the_kubeconfig() -> None:
    """Why `KubeSim.kubeconfig()` exists: `KubeConfig.from_server(url)` has no user, and
    lightkube 1.0.1 refuses to build a client from it."""
    with pytest.raises(AssertionError, match="Missing user"):
        lightkube.Client(config=lightkube.KubeConfig.from_server("http://127.0.0.1:1"))


def test_list_pods_by_label_selector(sim: KubeSim, client: lightkube.Client) -> None:
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

    sent = [r.query for r in sim.requests if r.path == f"/api/v1/namespaces/{NS}/pods"]
    assert {"labelSelector": "broker-id in (0,2)"} in sent
    assert {"labelSelector": "broker-id notin (0,2)"} in sent
    assert {"labelSelector": "!controller"} in sent

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
    assert pod.metadata.annotations == {"rollguard/ordinal": "2"}
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
    sim.container_creating = 0.3
    sim.set_next_start("kafka-1", ready_after=0.8)
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
    assert states == ["waiting:ContainerCreating", "running", "ready"]
    assert new.metadata.uid != old.metadata.uid
    assert new.metadata.labels["controller-revision-hash"] == "rev-2"
    assert new.metadata.annotations == {"rollguard/ordinal": "1"}
    assert new.status.phase == "Running"
    assert [(kind, name) for kind, name, _ in calls] == [
        ("delete", "kafka-1"),
        ("start", "kafka-1"),
    ]

    sts = client.get(StatefulSet, "kafka")
    assert (sts.status.updatedReplicas, sts.status.currentReplicas) == (1, 2)
    assert sts.status.currentRevision == "rev-1"  # OnDelete: never promoted (Kubernetes < 1.36)
    assert sim.callback_errors == []


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
    assert sim.callback_errors == []


def test_async_client_lists_deletes_and_polls(sim: KubeSim) -> None:
    """What the roller does: list by label, delete, then get until the new pod is Ready."""
    sim.set_update_revision("kafka", "rev-2")

    async def scenario() -> None:
        async with lightkube.AsyncClient(config=sim.kubeconfig(namespace=NS)) as client:
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


def test_terminating_pod_stays_visible_until_its_grace_is_over(
    sim: KubeSim, client: lightkube.Client
) -> None:
    sim.terminate_after = 0.4
    client.delete(Pod, "kafka-0")
    pod = client.get(Pod, "kafka-0")
    assert pod.metadata.deletionTimestamp is not None
    assert condition(pod, "Ready") == "False"
    wait_until(lambda: get_or_none(client, "kafka-0") is None, timeout=5, what="kafka-0 gone")
    assert time.monotonic() - sim.deletions[0].at >= 0.4
    back = wait_until(lambda: get_or_none(client, "kafka-0"), timeout=5, what="kafka-0 back")
    assert back.metadata.uid != pod.metadata.uid and back.metadata.deletionTimestamp is None


@pytest.mark.parametrize(
    ("reason", "phase"),
    [
        ("CrashLoopBackOff", "Running"),
        ("ImagePullBackOff", "Pending"),
        ("InvalidImageName", "Pending"),
        ("ContainerCreating", "Pending"),
    ],
)
def test_a_stuck_start_never_gets_ready(
    sim: KubeSim, client: lightkube.Client, reason: str, phase: str
) -> None:
    started: list[str] = []
    sim.on_start = started.append
    sim.set_next_start("kafka-1", waiting_reason=reason)
    client.delete(Pod, "kafka-1")
    pod = wait_until(lambda: get_or_none(client, "kafka-1"), timeout=5, what="kafka-1 back")

    watched_until = time.monotonic() + 2 * sim.ready_after
    while time.monotonic() < watched_until:
        pod = client.get(Pod, "kafka-1")
        assert container_state(pod) == f"waiting:{reason}"
        assert condition(pod, "Ready") == "False"
        assert pod.status.phase == phase
        time.sleep(0.05)
    assert (pod.status.containerStatuses[0].restartCount > 0) == (reason == "CrashLoopBackOff")
    assert started == []

    sim.set_waiting("kafka-1", None)
    wait_until(
        lambda: container_state(client.get(Pod, "kafka-1")) == "ready", timeout=5, what="Ready"
    )
    assert started == ["kafka-1"]
    assert sim.pod("kafka-1")["metadata"]["uid"] == pod.metadata.uid


def test_an_unschedulable_pod_stays_pending(sim: KubeSim, client: lightkube.Client) -> None:
    sim.set_next_start("kafka-2", unschedulable=True)
    client.delete(Pod, "kafka-2")
    pod = wait_until(lambda: get_or_none(client, "kafka-2"), timeout=5, what="kafka-2 back")
    assert pod.status.phase == "Pending"
    assert pod.spec.nodeName is None and pod.status.containerStatuses is None
    [scheduled] = pod.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )

    sim.set_unschedulable("kafka-2", False)
    ready = wait_until(lambda: ready_pod(client, "kafka-2"), timeout=5, what="kafka-2 Ready")
    assert ready.spec.nodeName and ready.status.phase == "Running"


def test_direct_mutators_show_through_the_api(sim: KubeSim, client: lightkube.Client) -> None:
    before = int(client.get(Pod, "kafka-0").metadata.resourceVersion)
    sim.set_ready("kafka-0", False)
    pod = client.get(Pod, "kafka-0")
    assert condition(pod, "Ready") == "False" and container_state(pod) == "running"
    assert int(pod.metadata.resourceVersion) > before
    assert client.get(StatefulSet, "kafka").status.readyReplicas == 2

    sim.set_waiting("kafka-0", "CrashLoopBackOff")
    assert container_state(client.get(Pod, "kafka-0")) == "waiting:CrashLoopBackOff"
    sim.set_ready("kafka-0", True)
    assert container_state(client.get(Pod, "kafka-0")) == "ready"

    sim.annotate("kafka-0", "rollguard/restarted-by", "test")
    assert client.get(Pod, "kafka-0").metadata.annotations["rollguard/restarted-by"] == "test"
    assert sim.pod("kafka-0")["metadata"]["annotations"]["rollguard/restarted-by"] == "test"
    sim.annotate("kafka-0", "rollguard/restarted-by", None)
    assert client.get(Pod, "kafka-0").metadata.annotations == {"rollguard/ordinal": "0"}


def test_configmap_create_get_replace(client: lightkube.Client) -> None:
    created = client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={"step": "1"}))
    assert created.metadata.namespace == NS and created.metadata.uid
    assert client.get(ConfigMap, "journal").data == {"step": "1"}
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
        client.replace(ConfigMap(metadata=ObjectMeta(name="nope"), data={}))
    assert (missing.value.status.code, missing.value.status.reason) == (404, "NotFound")
    unconditional = client.get(ConfigMap, "journal")
    unconditional.metadata.resourceVersion = None  # a ConfigMap may be updated blindly
    unconditional.data["step"] = "3"
    assert client.replace(unconditional).data == {"step": "3"}


def test_configmap_validation_is_422_invalid(client: lightkube.Client) -> None:
    with pytest.raises(ApiError) as bad:
        client.create(ConfigMap(metadata=ObjectMeta(name="Not_Valid"), data={"bad key": "x"}))
    status = bad.value.status
    assert (status.code, status.reason, status.details.kind) == (422, "Invalid", "ConfigMap")
    assert {cause.field for cause in status.details.causes} == {"metadata.name", "data[bad key]"}
    with pytest.raises(ApiError) as unnamed:
        client.create(ConfigMap(metadata=ObjectMeta(), data={}))
    assert unnamed.value.status.code == 422

    # What the peer does not model is refused (400), never stored without its meaning.
    for unmodelled in (
        ConfigMap(metadata=ObjectMeta(generateName="journal-")),
        ConfigMap(metadata=ObjectMeta(name="locked"), data={"a": "1"}, immutable=True),
        ConfigMap(metadata=ObjectMeta(name="binary"), binaryData={"a": "AA=="}),
    ):
        with pytest.raises(ApiError) as refused:
            client.create(unmodelled)
        assert (refused.value.status.code, refused.value.status.reason) == (400, "BadRequest")


def test_configmap_with_the_async_client(sim: KubeSim) -> None:
    async def scenario() -> None:
        async with lightkube.AsyncClient(config=sim.kubeconfig(namespace=NS)) as client:
            await client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={"n": "1"}))
            first = await client.get(ConfigMap, "journal")
            second = await client.get(ConfigMap, "journal")
            first.data["n"] = "2"
            await client.replace(first)
            second.data["n"] = "3"
            with pytest.raises(ApiError) as lost:
                await client.replace(second)
            assert lost.value.status.code == 409
            assert (await client.get(ConfigMap, "journal")).data == {"n": "2"}

    asyncio.run(scenario())


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
    assert sim.deletions == [] and sim.configmap("dry", NS) is None

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

    # RBAC answers before the handler, as on a real API server.
    sim.forbidden.add(("patch", "configmaps"))
    assert refusal(client.patch, ConfigMap, "journal", change) == (403, "Forbidden")


def test_a_token_is_required_when_set() -> None:
    with KubeSim(token="s3cret") as sim:
        sim.add_statefulset(NS, "kafka", 1, broker_labels)
        with lightkube.Client(config=sim.kubeconfig(namespace=NS)) as client:
            assert client.get(Pod, "kafka-0").metadata.name == "kafka-0"
        sim.token = "rotated"
        with lightkube.Client(config=sim.kubeconfig(namespace=NS)) as client:
            sim.token = "rotated-again"
            with pytest.raises(ApiError) as refused:
                client.get(Pod, "kafka-0")
            assert refused.value.status.code == 401


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

    # Unlike a ConfigMap, a Lease is never updated without its resourceVersion.
    blind = client.get(Lease, "rollguard")
    blind.metadata.resourceVersion = None
    with pytest.raises(ApiError) as unconditional:
        client.replace(blind)
    status = unconditional.value.status
    assert (status.code, status.reason) == (422, "Invalid")
    assert status.message == (
        'leases.coordination.k8s.io "rollguard" is invalid: metadata.resourceVersion: '
        "Invalid value: 0x0: must be specified for an update"
    )

    # ... and a PUT creates a Lease that does not exist, unless it names an old one's uid.
    with pytest.raises(ApiError) as gone:
        client.replace(lease_object("other", "host-b:2", uid=created.metadata.uid))
    assert gone.value.status.code == 409 and "Precondition failed" in gone.value.status.message
    other = client.replace(lease_object("other", "host-b:2", resourceVersion="5"))
    assert other.metadata.uid != created.metadata.uid
    assert client.get(Lease, "other").spec.holderIdentity == "host-b:2"


def test_lease_spec_is_decoded_as_the_api_server_decodes_it(
    sim: KubeSim, client: lightkube.Client
) -> None:
    url = f"{sim.url}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"

    def post(spec: dict[str, Any]) -> httpx.Response:
        return httpx.post(url, json={"metadata": {"name": "l"}, "spec": spec})

    whole_second = post({"renewTime": "2026-11-23T11:00:02Z"})
    assert whole_second.status_code == 400
    assert 'cannot parse "Z" as ".000000"' in whole_second.json()["message"]
    assert post({"leaseDurationSeconds": "30"}).status_code == 400
    assert post({"holderIdentity": 7}).status_code == 400
    for spec, field_ in (
        ({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds"),
        ({"leaseTransitions": -1}, "spec.leaseTransitions"),
    ):
        refused = post(spec)
        assert refused.status_code == 422
        assert [c["field"] for c in refused.json()["details"]["causes"]] == [field_]
        assert refused.json()["message"].startswith('Lease.coordination.k8s.io "l" is invalid')
    offset = post({"renewTime": "2026-11-23T12:00:02.000001+01:00", "unknownField": 1})
    assert offset.status_code == 201
    assert offset.json()["spec"] == {"renewTime": "2026-11-23T11:00:02.000001Z"}

    # lightkube (msgspec) writes a datetime whose microsecond is 0 without a fraction, which
    # the API server refuses for a MicroTime: rollguard's lease avoids that microsecond.
    lease = lease_object("whole", "h")
    lease.spec.renewTime = micro(2, 0)
    with pytest.raises(ApiError) as refused_time:
        client.create(lease)
    assert refused_time.value.status.code == 400
    assert sim.lease("whole", NS) is None and sim.lease("l", NS) is not None


def test_two_async_clients_racing_for_a_lease_one_wins(sim: KubeSim) -> None:
    async def scenario() -> list[str]:
        config = sim.kubeconfig(namespace=NS)
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

    assert asyncio.run(scenario()) in (["a:1", "409"], ["409", "b:2"])
    assert sim.lease("race", NS)["spec"]["holderIdentity"] in ("a:1", "b:2")  # type: ignore[index]


def test_an_edit_on_request_puts_a_write_between_a_read_and_an_update(
    sim: KubeSim, client: lightkube.Client
) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="journal"), data={"n": "1"}))
    seen: list[str] = []

    def concurrent_writer(request: SeenRequest) -> None:
        seen.append(request.method)
        if request.method == "PUT":
            sim.on_request = None
            sim.edit("configmaps", "journal", NS, lambda obj: obj["data"].update(n="other"))

    read = client.get(ConfigMap, "journal")
    sim.on_request = concurrent_writer
    read.data["n"] = "2"
    with pytest.raises(ApiError) as lost:
        client.replace(read)
    assert lost.value.status.code == 409 and seen == ["PUT"]
    assert client.get(ConfigMap, "journal").data == {"n": "other"}

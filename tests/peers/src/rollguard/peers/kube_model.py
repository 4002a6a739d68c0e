"""What the peer's pods and StatefulSets are, and the JSON the API serves for them.

A pod here is one of a StatefulSet's pods, as the roller sees it through `GET pods`: its
labels (with `controller-revision-hash`, `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index`), owner reference, phase, the conditions the kubelet and the
scheduler set (PodScheduled, Initialized, ContainersReady, Ready, PodReadyToStartContainers,
each with its lastTransitionTime), and one container (`kafka`) running or waiting with a reason:
ContainerCreating, or stuck as a real control plane cannot be made to show on demand
(CrashLoopBackOff with a restart count and a last terminated state, ImagePullBackOff, ...), or
a pod Pending and Unschedulable. A StatefulSet's status is recomputed from its pods (ready,
current and updated replicas, the current and update revisions; zero counts left out, as the
real API's `omitempty` does).

Not modelled: annotations, init containers, more than one container, volumes, probes' own
timing (readiness is set by the lifecycle in `kube_pods`), a Terminating pod (a deleted pod is
gone at once), the pods of anything but a StatefulSet, and any update strategy but `OnDelete`
(the roller's StatefulSets use it; it is the roller that deletes pods). The real API server
(`rollguard.peers.realkube`) shows all of that.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from rollguard.peers.kube_api import STATEFULSETS, Json, Key
from rollguard.peers.kube_objects import timestamp

CONTAINER = "kafka"
IMAGE = "docker.io/rollguard/kafka-sim:1"
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
WAITING_MESSAGES = {
    "CrashLoopBackOff": "back-off 10s restarting failed container={container} pod={pod}",
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "ErrImagePull": 'failed to pull and unpack image "{image}"',
    "InvalidImageName": 'Failed to apply default image tag "{image}": couldn\'t parse image name',
}
GRACE_SECONDS = 30  # terminationGracePeriodSeconds, the deletion grace of every pod
UNSCHEDULABLE_MESSAGE = (
    "0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: "
    "3 No preemption victims found for incoming pod."
)


class Deletion(NamedTuple):
    """One DELETE of a pod that existed: its name, the uid it had, and `time.monotonic()`."""

    name: str
    uid: str
    at: float


@dataclass
class StatefulSet:
    """A StatefulSet as the simulator keeps it; `labels_for` gives a new pod's labels."""

    namespace: str
    name: str
    replicas: int
    labels_for: Callable[[int], Mapping[str, str]]
    selector: dict[str, str]
    current_revision: str
    update_revision: str
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: str = field(default_factory=timestamp)
    generation: int = 1


@dataclass
class Pod:
    """One incarnation of a StatefulSet's pod. `token` is bumped by every change from outside
    (a test's mutator), so that a timed step planned before it is dropped (a deleted pod's
    steps are dropped because it is no longer the pod of its name)."""

    sts: StatefulSet
    ordinal: int
    labels: dict[str, str]
    incarnation: int
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: str = field(default_factory=timestamp)
    scheduled: bool = True
    waiting: str | None = None
    running: bool = False
    ready: bool = False
    ever_ran: bool = False
    restart_count: int = 0
    started_at: str | None = None
    last_finished_at: str | None = None
    container_id: str | None = None
    token: int = 0
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.sts.name}-{self.ordinal}"

    @property
    def key(self) -> Key:
        return (self.sts.namespace, self.name)


def render_pod(pod: Pod) -> Json:
    """The pod as the API serves it; remembers when each condition last changed."""
    sts = pod.sts
    ready = pod.running and pod.ready
    not_ready = f"containers with unready status: [{CONTAINER}]"
    if pod.scheduled:
        sandbox = pod.running or pod.ever_ran or pod.waiting != "ContainerCreating"
        wanted = [
            ("PodReadyToStartContainers", sandbox, None, None),
            ("Initialized", True, None, None),
            ("Ready", ready, None if ready else "ContainersNotReady", not_ready),
            ("ContainersReady", ready, None if ready else "ContainersNotReady", not_ready),
            ("PodScheduled", True, None, None),
        ]
    else:
        wanted = [("PodScheduled", False, "Unschedulable", UNSCHEDULABLE_MESSAGE)]
    now = timestamp()
    conditions = []
    for kind, holds, reason, message in wanted:
        text = "True" if holds else "False"
        previous = pod.conditions.get(kind)
        since = previous[1] if previous and previous[0] == text else now
        pod.conditions[kind] = (text, since)
        condition: Json = {"type": kind, "status": text, "lastTransitionTime": since}
        if not holds and reason:
            condition.update(reason=reason, message=message)
        conditions.append(condition)
    metadata: Json = {
        "name": pod.name,
        "generateName": f"{sts.name}-",
        "namespace": sts.namespace,
        "uid": pod.uid,
        "creationTimestamp": pod.created,
        "labels": dict(pod.labels),
        "ownerReferences": [
            {
                "apiVersion": STATEFULSETS.api_version,
                "kind": STATEFULSETS.kind,
                "name": sts.name,
                "uid": sts.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    spec: Json = {
        "containers": [_container()],
        "hostname": pod.name,
        "subdomain": sts.name,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": GRACE_SECONDS,
    }
    status: Json = {"phase": "Pending", "conditions": conditions, "qosClass": "BestEffort"}
    if pod.scheduled:
        node = f"sim-node-{pod.ordinal % 3}"
        spec["nodeName"] = node
        status["hostIP"] = f"10.0.0.{pod.ordinal % 3 + 10}"
        status["startTime"] = pod.created
        if pod.running or pod.ever_ran:
            status["phase"] = "Running"
            status["podIP"] = f"10.244.{pod.ordinal % 250}.{pod.incarnation % 250 + 2}"
        status["containerStatuses"] = [_container_status(pod, ready)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def _container_status(pod: Pod, ready: bool) -> Json:
    image = IMAGE
    status: Json = {
        "name": CONTAINER,
        "image": image,
        "imageID": "",
        "ready": ready,
        "restartCount": pod.restart_count,
        "started": pod.running,
    }
    if pod.running:
        status["state"] = {"running": {"startedAt": pod.started_at}}
    else:
        waiting: Json = {"reason": pod.waiting or "ContainerCreating"}
        template = WAITING_MESSAGES.get(waiting["reason"])
        if template:
            waiting["message"] = template.format(
                image=image, container=CONTAINER, pod=f"{pod.name}_{pod.sts.namespace}"
            )
        status["state"] = {"waiting": waiting}
    if pod.running or pod.ever_ran:
        status["imageID"] = f"{image.rsplit(':', 1)[0]}@sha256:{'0' * 64}"
        if pod.container_id:
            status["containerID"] = pod.container_id
    if pod.restart_count and pod.last_finished_at:
        status["lastState"] = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": pod.started_at or pod.last_finished_at,
                "finishedAt": pod.last_finished_at,
            }
        }
    return status


def render_statefulset(sts: StatefulSet, pods: list[Pod]) -> Json:
    """The StatefulSet with its status recomputed from its pods."""
    return {
        "apiVersion": STATEFULSETS.api_version,
        "kind": STATEFULSETS.kind,
        "metadata": {
            "name": sts.name,
            "namespace": sts.namespace,
            "uid": sts.uid,
            "generation": sts.generation,
            "creationTimestamp": sts.created,
            "labels": dict(sts.selector),
        },
        "spec": {
            "replicas": sts.replicas,
            "selector": {"matchLabels": dict(sts.selector)},
            "serviceName": sts.name,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "revisionHistoryLimit": 10,
            "template": {
                "metadata": {"labels": dict(sts.selector)},
                "spec": {"containers": [_container()]},
            },
        },
        "status": _statefulset_status(sts, pods),
    }


def _statefulset_status(sts: StatefulSet, pods: list[Pod]) -> Json:
    ready = sum(1 for p in pods if p.running and p.ready)
    updated = sum(1 for p in pods if p.labels.get(REVISION_LABEL) == sts.update_revision)
    current = sum(1 for p in pods if p.labels.get(REVISION_LABEL) == sts.current_revision)
    status: Json = {
        "observedGeneration": sts.generation,
        "replicas": len(pods),
        "availableReplicas": ready,
        "currentRevision": sts.current_revision,
        "updateRevision": sts.update_revision,
        "collisionCount": 0,
    }
    # Like the real API (omitempty), zero counts are left out rather than sent as 0.
    for name, count in (
        ("readyReplicas", ready),
        ("currentReplicas", current),
        ("updatedReplicas", updated),
    ):
        if count:
            status[name] = count
    return status


def _container() -> Json:
    return {
        "name": CONTAINER,
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "kafka", "containerPort": 9092, "protocol": "TCP"}],
        "resources": {},
    }


def container_id() -> str:
    return f"containerd://{secrets.token_hex(32)}"

"""The Kubernetes objects tests make on the real control plane, through lightkube as the roller
talks to the API: kwok's node, namespaces, a Kafka-like StatefulSet and its pods, RBAC bindings
and service-account tokens.

No kubelet runs and no container: kwok plays the kubelet of one node (`NODE`), driven by the
stages in tests/kube/kwok-stages.yaml: a scheduled pod becomes Running and Ready at once, a
deleted pod goes at once, and a pod annotated `rollguard.test/ready: "false"` runs but stays
NotReady until the annotation goes (`set_ready_annotation`).

A wait is the caller's (`Wait`): the control plane's fails at once if one of its processes exits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from lightkube import Client, KubeConfig, codecs
from lightkube.core.exceptions import ApiError
from lightkube.models.apps_v1 import (
    StatefulSetOrdinals,
    StatefulSetSpec,
    StatefulSetUpdateStrategy,
)
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.authorization_v1 import (
    ResourceAttributes,
    SelfSubjectAccessReviewSpec,
)
from lightkube.models.core_v1 import Container, PodSpec, PodTemplateSpec, Volume, VolumeMount
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import Namespace, Node, Pod, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, Role, RoleBinding
from lightkube.types import PatchType

T = TypeVar("T")
NODE = "kwok-node-0"
# The annotation kwok's stages key on: "false" holds a pod NotReady.
READY_ANNOTATION = "rollguard.test/ready"


class Wait(Protocol):
    """Poll `probe` until it returns something truthy, failing at `deadline` (monotonic)."""

    def __call__(self, probe: Callable[[], T | None], deadline: float, what: str) -> T: ...


def pod_ready(pod: Pod) -> bool:
    """Running, not being deleted, and its Ready condition True: what `kubectl get` shows 1/1."""
    if pod.metadata is None or pod.metadata.deletionTimestamp is not None or pod.status is None:
        return False
    conditions = pod.status.conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return pod.status.phase == "Running" and ready


# ---- kwok's node


def create_node(client: Client) -> None:
    node = Node(
        metadata=ObjectMeta(
            name=NODE,
            labels={"kubernetes.io/hostname": NODE, "type": "kwok"},
            annotations={"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        )
    )
    client.create(node)


def node_ready(client: Client) -> bool:
    node = client.get(Node, NODE)
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


# ---- namespaces, StatefulSets, pods


def create_namespace(client: Client, wait: Wait, name: str, timeout: float = 30) -> None:
    """The namespace, once its `default` ServiceAccount exists (until the controller manager
    makes it, admission refuses every pod, and the StatefulSet controller would back off)."""
    client.create(Namespace(metadata=ObjectMeta(name=name)))

    def has_account() -> bool:
        try:
            client.get(ServiceAccount, "default", namespace=name)
        except ApiError:
            return False
        return True

    wait(has_account, time.monotonic() + timeout, f"namespace {name}'s ServiceAccount")


def apply_statefulset(
    client: Client,
    namespace: str,
    name: str,
    replicas: int = 3,
    *,
    image: str = "rollguard.test/kafka:never-pulled",
    pod_annotations: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
    first_ordinal: int = 0,
    volumes: Sequence[Volume] = (),
    mounts: Sequence[VolumeMount] = (),
) -> StatefulSet:
    """A StatefulSet `name` (label app=<name>, headless service `name`) restarted only by
    deleting pods (OnDelete), as a Kafka StatefulSet the roller rolls; its pods start in
    parallel, numbered from `first_ordinal` (`spec.ordinals.start`: a controller pool's pods
    named after their node ids), with `volumes`, mounted by its container as `mounts` (kwok
    runs no container: nothing reads them). Applying it again with another template makes a
    new revision."""
    statefulset = StatefulSet(
        apiVersion="apps/v1",
        kind="StatefulSet",
        metadata=ObjectMeta(name=name, namespace=namespace, labels={"app": name}),
        spec=StatefulSetSpec(
            replicas=replicas,
            serviceName=name,
            podManagementPolicy="Parallel",
            selector=LabelSelector(matchLabels={"app": name}),
            updateStrategy=StatefulSetUpdateStrategy(type="OnDelete"),
            ordinals=StatefulSetOrdinals(start=first_ordinal) if first_ordinal else None,
            template=PodTemplateSpec(
                metadata=ObjectMeta(
                    labels={**(pod_labels or {}), "app": name},
                    annotations=dict(pod_annotations or {}),
                ),
                spec=PodSpec(
                    containers=[Container(name="kafka", image=image, volumeMounts=list(mounts))],
                    volumes=list(volumes) or None,
                ),
            ),
        ),
    )
    applied: StatefulSet = client.apply(statefulset, force=True)
    return applied


def pods(client: Client, namespace: str, app: str) -> list[Pod]:
    return list(client.list(Pod, namespace=namespace, labels={"app": app}))


def wait_pods_ready(
    client: Client, wait: Wait, namespace: str, app: str, replicas: int, timeout: float = 60
) -> list[Pod]:
    """Until exactly `replicas` pods of the StatefulSet are Running and Ready."""

    def ready() -> list[Pod] | None:
        found = pods(client, namespace, app)
        if len(found) == replicas and all(pod_ready(p) for p in found):
            return found
        return None

    return wait(ready, time.monotonic() + timeout, f"{replicas} {app} pods Ready")


def set_ready_annotation(client: Client, namespace: str, pod: str, value: str | None) -> None:
    """`READY_ANNOTATION` on the pod: "false" holds it NotReady, None removes it."""
    patch = {"metadata": {"annotations": {READY_ANNOTATION: value}}}
    client.patch(Pod, pod, patch, namespace=namespace, patch_type=PatchType.MERGE)


# ---- RBAC and service accounts


def bind(
    client: Client, subject: str, kind: str, namespace: str | None, ref: str, role: str
) -> None:
    """Bind `subject` (a `kind`: User or ServiceAccount) to the `ref` (Role or ClusterRole)
    `role`: in `namespace`, or cluster-wide without one."""
    who = Subject(kind=kind, name=subject)
    if kind == "ServiceAccount":
        who.namespace = namespace
    else:
        who.apiGroup = "rbac.authorization.k8s.io"
    meta = ObjectMeta(name=f"{subject.replace(':', '-')}-{role}", namespace=namespace)
    ref_ = RoleRef(apiGroup="rbac.authorization.k8s.io", kind=ref, name=role)
    version = "rbac.authorization.k8s.io/v1"
    binding = (
        RoleBinding(
            apiVersion=version, kind="RoleBinding", metadata=meta, roleRef=ref_, subjects=[who]
        )
        if namespace
        else ClusterRoleBinding(
            apiVersion=version, kind="ClusterRoleBinding", metadata=meta, roleRef=ref_,
            subjects=[who],
        )
    )  # fmt: skip
    client.apply(binding, force=True)  # the same binding again is no error


def ensure_service_account(client: Client, namespace: str, name: str) -> None:
    """The ServiceAccount, created unless it exists."""
    with contextlib.suppress(ApiError):
        client.create(ServiceAccount(metadata=ObjectMeta(name=name, namespace=namespace)))


def service_account_token(client: Client, namespace: str, name: str, seconds: int) -> str | None:
    """A token of the ServiceAccount valid `seconds`, as the kubelet mounts in a pod."""
    request = ServiceAccount.Token(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds),
    )
    token = client.create(request, name=name, namespace=namespace)
    assert token.status is not None
    return token.status.token


def load_role(path: Path, namespace: str) -> Role:
    """The first document of a Role manifest (deploy/kubernetes/...), set in `namespace`."""
    role = codecs.load_all_yaml(path.read_text())[0]
    assert isinstance(role, Role) and role.metadata is not None, path
    role.metadata.namespace = namespace
    return role


def may(kubeconfig: Path, namespace: str, verb: str, resource: str, group: str = "") -> bool:
    """Whether RBAC lets the user of `kubeconfig` `verb` `resource` in `namespace` now (a
    SelfSubjectAccessReview, as `kubectl auth can-i`)."""
    attributes = ResourceAttributes(
        namespace=namespace, verb=verb, resource=resource, group=group or None
    )
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(resourceAttributes=attributes)
    )
    with Client(KubeConfig.from_file(kubeconfig), trust_env=False) as client:
        status = client.create(review).status
    return status is not None and bool(status.allowed)

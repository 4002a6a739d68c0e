"""The roll harness on Kubernetes (`harness`): `PodRoll`, rolls of the pods a namespace and a
selector find, on the real control plane (`realkube.ControlPlane`) or on the API peer
(`kube.KubeSim`), and what the Kubernetes tests build alike around them.

    cluster = PodRoll(kafka, namespace, kubeconfig, tmp_path, pki, kube, agent_url=...)
    done = cluster.roll("--skip", "prod-kafka-2")  # the installed `rollguard`, KUBECONFIG set
    assert cluster.restarted() == ["prod-kafka-0"]  # the pods deleted, by the cluster's record
    assert cluster.journal()["state"] == "completed"  # its ConfigMap, read by the test's client

A pod roll's own words: the roll's Lease (`lease`), the namespace's pods (`uids`, `pod_ready`,
`annotate`, `hold_not_ready`), a StatefulSet's revisions (`revisions`, `until_out_of_date`),
what a roll wrote there (`journals`, `leases`, `written`). Built alike: the roller's
documented Role bound to a ServiceAccount (`roller_account`), the Kafka-protocol peer's nodes
(`harness.kafka_peer`) as a pod bridge's containers (`PeerNodes`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from rollguard.peers.commandline import POD_TIMINGS, rollguard_args
from rollguard.peers.harness import OWN, CommandRoll
from rollguard.peers.kafka import KafkaClusterSim
from rollguard.peers.processes import ROOT, Pki, wait_until
from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_bridge import PodBridge
from rollguard.peers.realkube_objects import load_role, pod_ready

__all__ = [
    "AGENTS",
    "LABELS",
    "ROLE",
    "SELECTOR",
    "PeerNodes",
    "PodRoll",
    "roller_account",
]

ROLE = ROOT / "deploy" / "kubernetes" / "roller" / "role.yaml"  # the roller's documented Role
SELECTOR = "strimzi.io/cluster=prod"
LABELS = {  # what the selector finds: Strimzi's labels of combined nodes
    "strimzi.io/cluster": "prod",
    "strimzi.io/broker-role": "true",
    "strimzi.io/controller-role": "true",
}
AGENTS = "/agents/{pod}/v1/broker-state"  # an HTTPS peer serving every pod's agent, its path


class Kubernetes(Protocol):
    """The control plane or the API peer: the test's own client of it."""

    def client(self) -> Client: ...


K = TypeVar("K", bound=Kubernetes)


class Bootstrapped(Protocol):
    """A Kafka the roller is pointed at (the peer, or real nodes)."""

    @property
    def bootstrap(self) -> str: ...


def roller_account(
    kube: ControlPlane, namespace: str, *, can: tuple[str, str, str] = ("delete", "pods", "")
) -> Path:
    """A ServiceAccount bound to the roller's documented Role, as the roll Job runs: its
    kubeconfig, once RBAC lets it do `can` (verb, resource, API group)."""
    return kube.role_account(namespace, load_role(ROLE, namespace), "rollguard-roller", can=can)


def ordinal(pod: str) -> int:
    return int(pod.rsplit("-", 1)[1])


@dataclass
class PeerNodes:
    """A pod bridge's containers (`realkube_bridge.Containers`): each pod is the Kafka peer's
    node of its ordinal. `not_ready` holds pods NotReady (their readiness probe failing) until
    they are replaced."""

    kafka: KafkaClusterSim
    not_ready: set[str] = field(default_factory=set)

    def start(self, pod: str, address: str, uid: str, image: str = "") -> None:
        self.not_ready.discard(pod)  # a new pod: its probe passes
        self.kafka.start_node(ordinal(pod))

    def stop(self, pod: str) -> None:
        self.kafka.stop_node(ordinal(pod))

    def ready(self, pod: str) -> bool:
        return pod not in self.not_ready

    def seen(self, pod: str) -> Mapping[str, Any]:
        return {}


@dataclass(frozen=True)
class PodRoll(CommandRoll, Generic[K]):
    """Rolls of the pods `selector` finds in `namespace`, as the operator types them: the
    installed `rollguard` with `kubeconfig` (and `env`: a bridge's, the pods' names resolved as
    the cluster's DNS would), its Kafka at `kafka`'s bootstrap, its agents at `agent_url` (a
    template; None: the default one). What the roll wrote is read with the test's own client
    of `kube`; the cluster's record of restarts is `deleted` (the bridge's, or the API
    peer's), when it keeps one."""

    kafka: Bootstrapped
    namespace: str
    kubeconfig: Path
    folder: Path
    tls: Pki
    kube: K  # a ControlPlane, or the KubeSim
    agent_url: str | None = None
    selector: str = SELECTOR
    timings: tuple[str, ...] = POD_TIMINGS
    roll_id: str = "k1"
    timeout: float = 120
    bridge: PodBridge | None = None
    deleted: Callable[[], list[str]] | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # more (`bridge.dns_env()`: its DNS)

    def command(self, command: str = "roll", *extra: str, roll_id: str | None = OWN) -> list[str]:
        return rollguard_args(
            command,
            namespace=self.namespace,
            selector=self.selector,
            bootstrap=self.kafka.bootstrap,
            agent_url=self.agent_url,
            tls=self.tls,
            state_dir=self.state,
            timings=self.timings,
            roll_id=self.roll_id if roll_id == OWN else roll_id,
            extra=extra,
        )

    def environment(self) -> Mapping[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig), "PATH": "/usr/bin:/bin", **self.env}

    def where(self) -> list[str]:
        return ["--namespace", self.namespace]

    def restarted(self) -> list[str]:
        """The pods deleted, in order: the bridge's record (or the API peer's)."""
        if self.deleted is None:
            raise AssertionError("this cluster keeps no record of its pods' deletions")
        return self.deleted()

    def client(self) -> Client:
        return self.kube.client()

    def journal(self, roll_id: str | None = None) -> Mapping[str, Any] | None:
        """The roll's journal in its ConfigMap (None: there is none)."""
        name = f"rollguard-roll-{roll_id or self.roll_id}"
        try:
            found = self.client().get(ConfigMap, name, namespace=self.namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return json.loads((found.data or {})["journal.json"])  # type: ignore[no-any-return]

    def lease(self) -> Lease:
        """The roll's Lease, as it is now."""
        return self.client().get(Lease, "rollguard-roll", namespace=self.namespace)

    def leases(self) -> list[str]:
        found = self.client().list(Lease, namespace=self.namespace)
        return [str(lease.metadata.name) for lease in found if lease.metadata]

    def journals(self) -> list[str]:
        """The names of the ConfigMaps holding a roll's journal."""
        return [n for n in self._configmaps() if n.startswith("rollguard-roll-")]

    def written(self) -> list[str]:
        """The ConfigMaps and Leases of the namespace but its CA bundle: a roll's journal and
        lease would be here."""
        names = [f"ConfigMap/{n}" for n in self._configmaps()]
        names += [f"Lease/{n}" for n in self.leases()]
        return [n for n in names if n != "ConfigMap/kube-root-ca.crt"]

    def _configmaps(self) -> list[str]:
        found = self.client().list(ConfigMap, namespace=self.namespace)
        return [str(cm.metadata.name) for cm in found if cm.metadata and cm.metadata.name]

    def uids(self, labels: Mapping[str, str]) -> dict[str, str]:
        """The UID of each pod carrying `labels` (a new one: the pod was made again)."""
        found = self.client().list(Pod, namespace=self.namespace, labels=dict(labels))
        return {str(p.metadata.name): str(p.metadata.uid) for p in found if p.metadata}

    def revisions(self, statefulset: str) -> tuple[str, str]:
        """The StatefulSet's (currentRevision, updateRevision), as its controller computed them."""
        status = self.client().get(StatefulSet, statefulset, namespace=self.namespace).status
        assert status is not None
        return status.currentRevision or "", status.updateRevision or ""

    def until_out_of_date(self, *statefulsets: str, timeout: float = 30) -> None:
        """Until each StatefulSet's controller has a new update revision (OnDelete: its pods
        stay on the old one until deleted)."""

        def out_of_date() -> bool:
            revisions = [self.revisions(name) for name in statefulsets]
            return all(current != update for current, update in revisions)

        wait_until(out_of_date, timeout, what="a new updateRevision")

    def pod_ready(self, pod: str) -> bool:
        return pod_ready(self.client().get(Pod, pod, namespace=self.namespace))

    def annotate(self, pod: str, key: str, value: str) -> None:
        patch = {"metadata": {"annotations": {key: value}}}
        self.client().patch(Pod, pod, patch, namespace=self.namespace, patch_type=PatchType.MERGE)

    def hold_not_ready(self, pod: str) -> None:
        """The pod's readiness probe fails (its `PeerNodes` say so) until it is replaced; once
        it shows NotReady."""
        assert self.bridge is not None and isinstance(self.bridge.containers, PeerNodes)
        self.bridge.containers.not_ready.add(pod)
        self.bridge.wait(lambda: not self.pod_ready(pod), 30, f"{pod} NotReady")

    def clear_not_ready(self, pod: str) -> None:
        """Its readiness probe passes again (the bridge makes it Ready at its next look)."""
        assert self.bridge is not None and isinstance(self.bridge.containers, PeerNodes)
        self.bridge.containers.not_ready.discard(pod)

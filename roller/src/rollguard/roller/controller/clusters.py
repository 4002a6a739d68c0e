"""A Kafka cluster as the controller sees it: its StatefulSets, their pods, the ConfigMaps their
templates mount (pure: the views are built from the API's objects by `observe.py`).

- Grouping: the opted-in StatefulSets of a namespace with the same `rollguard.io/cluster` label
  are one cluster; one without the label is a cluster of its own, named after it.
- The pods of a roll: `rollguard.io/selector` when given, else the labels every StatefulSet's
  pod template shares (a cluster of one StatefulSet: its template's labels).
- What a roll is for (`Trigger`): each StatefulSet's update revision (a template changed: an
  image, an env, a resource, `kubectl rollout restart`), the text of each ConfigMap its template
  mounts the properties file from, and the Kafka version the template names. The roll id is
  the cluster's name and a digest of that: a controller started again finds the same roll, and
  its journal, for the same change.
- The Kafka version of a template: its annotation `rollguard.io/kafka-version`, else the tag of
  its first container's image when the tag is a release (`4.1.1`, `4.1.1-debian-12-r3`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rollguard.roller.controller.names import KAFKA_VERSION, LEASE_PREFIX, SELECTOR

__all__ = [
    "ClusterView",
    "PodView",
    "StatefulSetView",
    "Trigger",
    "cluster_of",
    "group",
    "image_version",
    "lease_name",
    "roll_id",
    "selector",
    "target_version",
    "trigger",
    "unselectable",
    "versions_disagree",
]

_RELEASE_TAG = re.compile(r"(\d+\.\d+\.\d+)(?:[-_+].*)?")
_NOT_NAME = re.compile(r"[^a-z0-9]+")
ROLL_ID_MAX = 40  # the roll's own limit (`--roll-id`)


@dataclass(frozen=True, slots=True)
class StatefulSetView:
    """One opted-in StatefulSet, as far as the controller's decisions need it."""

    name: str
    uid: str = ""
    cluster_label: str | None = None  # its `rollguard.io/cluster`
    strategy: str = "OnDelete"  # spec.updateStrategy.type
    generation: int = 1
    observed_generation: int = 1  # status.observedGeneration: its controller saw this one
    update_revision: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    template_labels: Mapping[str, str] = field(default_factory=dict)
    template_annotations: Mapping[str, str] = field(default_factory=dict)
    image: str = ""  # its template's first container's
    # (ConfigMap, key) its template mounts the properties file from
    configmaps: tuple[tuple[str, str], ...] = ()

    @property
    def cluster(self) -> str:
        return cluster_of(self.name, self.cluster_label)

    @property
    def kafka_version(self) -> str | None:
        named = self.template_annotations.get(KAFKA_VERSION, "").strip()
        return named or image_version(self.image)


@dataclass(frozen=True, slots=True)
class PodView:
    name: str
    owner: str  # the StatefulSet that made it
    revision: str  # its controller-revision-hash label
    deleting: bool = False


@dataclass(frozen=True)
class ClusterView:
    """A cluster's StatefulSets (in name order), the pods they own, and the properties text of
    each ConfigMap their templates mount (None: it does not exist, or has no such key)."""

    namespace: str
    name: str
    statefulsets: tuple[StatefulSetView, ...]
    pods: tuple[PodView, ...] = ()
    configs: Mapping[str, str | None] = field(default_factory=dict)

    def annotations(self) -> dict[str, str]:
        """Every StatefulSet's annotations, merged (what `settings` checks for conflicts)."""
        merged: dict[str, str] = {}
        for statefulset in self.statefulsets:
            merged.update(statefulset.annotations)
        return merged

    def out_of_date(self) -> list[str]:
        """The pods not made from their StatefulSet's current template."""
        revisions = {s.name: s.update_revision for s in self.statefulsets}
        return sorted(p.name for p in self.pods if p.revision != revisions.get(p.owner, p.revision))

    def not_observed(self) -> list[str]:
        """StatefulSets whose controller has not yet computed the revision of their last change
        (their update revision is not yet the new template's)."""
        return [s.name for s in self.statefulsets if s.observed_generation < s.generation]

    def rolling_update(self) -> list[str]:
        """StatefulSets Kubernetes itself restarts, without rollguard's checks."""
        return [s.name for s in self.statefulsets if s.strategy != "OnDelete"]

    def versions(self) -> dict[str, str | None]:
        return {s.name: s.kafka_version for s in self.statefulsets}


@dataclass(frozen=True, slots=True)
class Trigger:
    """What a roll brings the cluster to: `key` (a digest: the same change, the same key) and,
    for people, what it is made of."""

    key: str
    revisions: tuple[tuple[str, str], ...]
    configs: tuple[tuple[str, str], ...]
    kafka_version: str | None

    def describe(self) -> str:
        parts = [f"{name} at revision {revision}" for name, revision in self.revisions]
        parts += [f"ConfigMap {name} ({digest})" for name, digest in self.configs]
        if self.kafka_version is not None:
            parts.append(f"Kafka {self.kafka_version}")
        return ", ".join(parts)


def cluster_of(statefulset: str, label: str | None) -> str:
    return (label or "").strip() or statefulset


def group(statefulsets: Iterable[StatefulSetView]) -> dict[str, list[StatefulSetView]]:
    """Cluster name -> its StatefulSets, in name order."""
    found: dict[str, list[StatefulSetView]] = {}
    for statefulset in sorted(statefulsets, key=lambda s: s.name):
        found.setdefault(statefulset.cluster, []).append(statefulset)
    return found


def image_version(image: str) -> str | None:
    """The Kafka release an image's tag names (`apache/kafka:4.1.1`, `bitnami/kafka:4.0.0-debian
    -12-r3`), or None (no tag, `latest`, a digest alone)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon <= slash:
        return None
    found = _RELEASE_TAG.fullmatch(name[colon + 1 :])
    return found.group(1) if found else None


def selector(view: ClusterView) -> str | None:
    """The label selector of the cluster's pods: `rollguard.io/selector`, else the labels every
    StatefulSet's pod template carries with the same value (None: they share none)."""
    given = view.annotations().get(SELECTOR, "").strip()
    if given:
        return given
    shared: dict[str, str] | None = None
    for statefulset in view.statefulsets:
        labels = dict(statefulset.template_labels)
        shared = (
            labels if shared is None else {k: v for k, v in shared.items() if labels.get(k) == v}
        )
    if not shared:
        return None
    return ",".join(f"{k}={v}" for k, v in sorted(shared.items()))


def unselectable(view: ClusterView) -> str | None:
    """Why the cluster's pods cannot be selected (their templates share no label, and no
    `rollguard.io/selector` is given), or None."""
    if selector(view) is not None:
        return None
    names = ", ".join(s.name for s in view.statefulsets)
    return (
        f"the pod templates of {names} share no label to select their pods by: give the "
        f"selector as the annotation {SELECTOR}"
    )


def _digest(*parts: str, size: int = 8) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:size]


def trigger(view: ClusterView, kafka_version: str | None) -> Trigger:
    revisions = tuple((s.name, s.update_revision) for s in view.statefulsets)
    configs = tuple(
        (name, "missing" if text is None else _digest(text))
        for name, text in sorted(view.configs.items())
    )
    parts = [f"{n}={r}" for n, r in revisions] + [f"cm:{n}={d}" for n, d in configs]
    parts.append(f"kafka={kafka_version or ''}")
    return Trigger(_digest(view.namespace, view.name, *parts), revisions, configs, kafka_version)


def _name_part(cluster: str, room: int) -> str:
    return _NOT_NAME.sub("-", cluster.lower()).strip("-")[:room].strip("-") or "cluster"


def roll_id(cluster: str, key: str) -> str:
    """`<cluster>-<key>`: letters, digits and dashes, 40 at most (the roll's own rule)."""
    return f"{_name_part(cluster, ROLL_ID_MAX - len(key) - 1)}-{key}"


def lease_name(cluster: str) -> str:
    """The cluster's own Lease (`rollguard-roll-<cluster>`): one roll per cluster, clusters side
    by side in a namespace. A name cut short gets a digest of the whole, so two stay apart."""
    name = _name_part(cluster, 200)
    if name != cluster:
        name = f"{name[:190]}-{_digest(cluster, size=6)}"
    return LEASE_PREFIX + name


def versions_disagree(view: ClusterView) -> str | None:
    """Why the cluster has no single target version (its StatefulSets' templates name two), or
    None."""
    named = {v for v in view.versions().values() if v is not None}
    if len(named) <= 1:
        return None
    said = ", ".join(f"{n}: {v or 'none'}" for n, v in sorted(view.versions().items()))
    return (
        f"the StatefulSets of cluster {view.name} name different Kafka versions ({said}): "
        "nothing is rolled until their templates agree"
    )


def target_version(view: ClusterView) -> str | None:
    """The one Kafka version the templates name (None: none does)."""
    named = {v for v in view.versions().values() if v is not None}
    return next(iter(named)) if len(named) == 1 else None

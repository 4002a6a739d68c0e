"""What the controller reads of a cluster through the Kubernetes API (lightkube), for its
decisions: the opted-in StatefulSets of a namespace, the pods each owns, the ConfigMaps their
templates mount the properties file from, the cluster's settings ConfigMap, the journal of a
roll. Every API failure is translated here once (`kubernetes.api_error`): a 403 names the
permission the controller lacks; the call's name is in the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod

from rollguard.roller.controller.clusters import (
    ClusterView,
    PodView,
    StatefulSetView,
    group,
)
from rollguard.roller.controller.names import CLUSTER, OPT_IN, SETTINGS, STATUS
from rollguard.roller.controller.status import Status
from rollguard.roller.kubernetes import API_ERRORS, api_error, get_or_none
from rollguard.roller.roll.configs.kubernetes import sources
from rollguard.roller.roll.stores.journal import ConfigMapJournalStore, RollRecord, RollState
from rollguard.shared.errors import ConfigError

__all__ = ["Observed", "journal_state", "observe", "statefulset_view"]


def statefulset_view(found: StatefulSet, config_key: str) -> StatefulSetView:
    meta, spec, status = found.metadata, found.spec, found.status
    assert meta is not None and meta.name is not None and spec is not None
    template = spec.template
    labels = (template.metadata.labels if template.metadata else None) or {}
    annotations = (template.metadata.annotations if template.metadata else None) or {}
    containers = template.spec.containers if template.spec else []
    mounted = sources(template.spec, config_key) if template.spec is not None else []
    strategy = spec.updateStrategy.type if spec.updateStrategy else None
    return StatefulSetView(
        meta.name,
        uid=meta.uid or "",
        cluster_label=(meta.labels or {}).get(CLUSTER),
        # Kubernetes' default, when the field is absent, is RollingUpdate.
        strategy=strategy or "RollingUpdate",
        generation=meta.generation or 0,
        observed_generation=(status.observedGeneration if status else None) or 0,
        update_revision=(status.updateRevision if status else None) or "",
        annotations=dict(meta.annotations or {}),
        template_labels=dict(labels),
        template_annotations=dict(annotations),
        image=(containers[0].image or "") if containers else "",
        configmaps=tuple(dict.fromkeys((s.configmap, s.key) for s in mounted)),
    )


class Observed:
    """A namespace's opted-in StatefulSets, read once per reconcile."""

    def __init__(self, found: Sequence[StatefulSet]) -> None:
        self.objects = {str(s.metadata.name): s for s in found if s.metadata}
        labels = {
            n: (s.metadata.labels if s.metadata else None) or {} for n, s in self.objects.items()
        }
        labelled = (StatefulSetView(n, cluster_label=labels[n].get(CLUSTER)) for n in self.objects)
        self._clusters = {c: [s.name for s in views] for c, views in group(labelled).items()}

    def members(self, cluster: str) -> list[str]:
        """The names of the cluster's StatefulSets, in order."""
        return list(self._clusters.get(cluster, ()))

    def uids(self, cluster: str) -> dict[str, str]:
        return {
            n: str(self.objects[n].metadata.uid or "")  # type: ignore[union-attr]
            for n in self.members(cluster)
        }

    def status(self, cluster: str) -> Status | None:
        """The status the cluster's StatefulSets carry (the first that has one)."""
        for name in self.members(cluster):
            meta = self.objects[name].metadata
            found = Status.from_text(((meta.annotations if meta else None) or {}).get(STATUS))
            if found is not None:
                return found
        return None

    def annotations(self, cluster: str) -> dict[str, dict[str, str]]:
        return {
            name: dict(self.objects[name].metadata.annotations or {})  # type: ignore[union-attr]
            for name in self.members(cluster)
        }


async def statefulsets(client: Any, namespace: str) -> Observed:
    """The namespace's StatefulSets that opted in."""
    try:
        found = [
            s async for s in client.list(StatefulSet, namespace=namespace, labels={OPT_IN: "true"})
        ]
    except API_ERRORS as exc:
        raise api_error(f"list statefulsets in {namespace}", exc) from exc
    return Observed(found)


async def settings_configmap(
    client: Any, namespace: str, annotations: Mapping[str, Mapping[str, str]]
) -> tuple[str, dict[str, str] | None]:
    """The cluster's settings ConfigMap (`rollguard.io/settings`): its name and keys; ConfigError
    when one is named and does not exist."""
    named = sorted({a[SETTINGS].strip() for a in annotations.values() if a.get(SETTINGS)})
    if not named:
        return "", None
    if len(named) > 1:
        raise ConfigError(f"annotation {SETTINGS}: the cluster's StatefulSets name {named}")
    found = await get_or_none(client, ConfigMap, named[0], namespace)
    if found is None:
        raise ConfigError(
            f"annotation {SETTINGS}: ConfigMap {named[0]} does not exist in namespace {namespace}"
        )
    return named[0], dict(found.data or {})


async def observe(
    client: Any, namespace: str, cluster: str, found: Observed, config_key: str
) -> ClusterView:
    """The cluster's view: its StatefulSets, their pods and the properties text of each
    ConfigMap their templates mount it from."""
    views = [statefulset_view(found.objects[n], config_key) for n in found.members(cluster)]
    pods: list[PodView] = []
    for view in views:
        spec = found.objects[view.name].spec
        assert spec is not None
        labels = dict(spec.selector.matchLabels or {})
        try:
            listed = [p async for p in client.list(Pod, namespace=namespace, labels=labels)]
        except API_ERRORS as exc:
            raise api_error(f"list pods of {view.name}", exc) from exc
        for pod in listed:
            meta = pod.metadata
            owners = (meta.ownerReferences or []) if meta else []
            if meta is None or not any(
                o.kind == "StatefulSet" and o.name == view.name for o in owners
            ):
                continue
            revision = (meta.labels or {}).get("controller-revision-hash", "")
            pods.append(
                PodView(str(meta.name), view.name, revision, meta.deletionTimestamp is not None)
            )
    configs: dict[str, str | None] = {}
    for view in views:
        for name, key in view.configmaps:
            found_map = await get_or_none(client, ConfigMap, name, namespace)
            data = (found_map.data if found_map is not None else None) or {}
            configs[name] = data.get(key)
    return ClusterView(namespace, cluster, tuple(views), tuple(pods), configs)


async def journal_state(client: Any, namespace: str, roll_id: str) -> RollState | None:
    """The state of the roll's journal (its ConfigMap), None when there is none."""
    name = ConfigMapJournalStore.name(roll_id)
    found = await get_or_none(client, ConfigMap, name, namespace)
    if found is None:
        return None
    text = (found.data or {}).get(ConfigMapJournalStore.KEY)
    if not text:
        return None
    try:
        return RollRecord.from_json(json.loads(text)).state
    except ValueError as exc:  # ConfigError is one: a journal this release cannot read
        raise ConfigError(f"ConfigMap {name}: {exc}") from None

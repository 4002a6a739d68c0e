"""kopf's side of the controller: what it watches, and its settings. The handlers are a thin
shell: each tells the reconciler which cluster changed (`reconciler.Reconciler`), which looks at
it and decides; kopf brings the watches (listed, then followed, re-established after an API
outage with its backoff), the Events' posting (`kopf.event`) and an orderly stop.

    StatefulSets labelled rollguard.io/roll=true    any event: its cluster changed (a template,
                                                    its status's update revision, an annotation)
    ConfigMaps (but rollguard's own journals)       a cluster's properties or settings changed

kopf runs standalone: one replica acts, by the leadership Lease (`leadership.py`), not by kopf's
peering (which needs its CRDs and pauses every operator of equal priority).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from rollguard.roller.configmap import MANAGED_BY
from rollguard.roller.controller.clusters import cluster_of
from rollguard.roller.controller.names import CLUSTER, COMPONENT, OPT_IN
from rollguard.roller.controller.reconciler import Reconciler

__all__ = ["kopf_poster", "registry", "settings"]


def registry(reconciler: Reconciler) -> kopf.OperatorRegistry:
    found = kopf.OperatorRegistry()

    @kopf.on.login(registry=found)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """The pod's service account, else $KUBECONFIG: what lightkube reads too."""
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.event("apps", "v1", "statefulsets", labels={OPT_IN: "true"}, registry=found)
    async def statefulset_changed(
        *, name: str, namespace: str | None, labels: Mapping[str, str], **_: Any
    ) -> None:
        if namespace:
            reconciler.changed(namespace, cluster_of(name, labels.get(CLUSTER)))

    ((key, ours),) = MANAGED_BY.items()

    def theirs(labels: Mapping[str, str], **_: Any) -> bool:
        """Not one of rollguard's own (a roll's journal, written at every step); a chart's
        (managed-by Helm) is."""
        return labels.get(key) != ours

    @kopf.on.event("v1", "configmaps", when=theirs, registry=found)
    async def configmap_changed(*, name: str, namespace: str | None, **_: Any) -> None:
        if namespace:
            reconciler.configmap_changed(namespace, name)

    @kopf.on.cleanup(registry=found)
    async def stopping(**_: Any) -> None:
        await reconciler.stop()

    return found


def settings(identity: str) -> kopf.OperatorSettings:
    found = kopf.OperatorSettings()
    found.peering.standalone = True
    # The namespaces are given, the resources built in: nothing to discover while running (and
    # no rights to list namespaces or CRDs needed).
    found.scanning.disabled = True
    found.posting.reporting_component = COMPONENT
    found.posting.reporting_instance = identity
    found.posting.event_name_prefix = "rollguard-"
    found.posting.level = logging.INFO
    # A watch is re-established at once after the API server restarts (kopf's own backoff
    # between failed attempts), and a quiet one is renewed every 5 minutes.
    found.watching.server_timeout = 300
    found.watching.client_timeout = 330
    return found


def kopf_poster(obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """`rolls.Poster` by kopf: queued, posted by kopf's own task (with its retries)."""
    kopf.event(dict(obj), type=type, reason=reason, message=message)  # type: ignore[arg-type]

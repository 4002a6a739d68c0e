"""The peer's storage, and the ConfigMaps and Leases that `rollguard roll` writes into it.

`Store` plays etcd: one `resourceVersion` counter for every object (like etcd's revision), bumped
by every change and never by an update that changes nothing (as on Kubernetes). The roll keeps
its journal in a ConfigMap and its one-roll-at-a-time lock in a coordination.k8s.io Lease, both
guarded by that counter, so what is modelled here is what the roll depends on:

- create (POST): 201, or 409 AlreadyExists;
- get: the object, or 404 NotFound;
- replace (PUT) with `metadata.resourceVersion`: 200, 409 Conflict when it is stale, 404
  NotFound when the object does not exist (a real API server creates a Lease there; the roll
  creates its Lease with POST).

The rest of what a real API server does with them is tested there (`rollguard.peers.realkube`:
test_lease.py, test_kube_roll.py). Not modelled, and refused with 400 BadRequest rather than
silently dropped: a replace without a resourceVersion (the roll never sends one), a ConfigMap's
`binaryData` and `immutable`, `metadata.generateName`, `ownerReferences` and `finalizers`, and an
object without a name. The values are stored as the client sent them, unvalidated.
"""

from __future__ import annotations

import copy
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from rollguard.peers.kube_api import (
    KINDS,
    LEASES,
    Json,
    Key,
    ResourceKind,
    already_exists,
    bad_request,
    conflict,
    not_found,
)

UNMODELLED = ("binaryData", "immutable")
UNMODELLED_META = ("generateName", "ownerReferences", "finalizers")


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    """Objects by resource and (namespace, name), under one lock and one revision counter.
    A stored object is never changed in place (a change stores a new one), so that a list may
    share its parts."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._revision = 1000
        self._store: dict[str, dict[Key, Json]] = {k.plural: {} for k in KINDS.values()}

    def _write(self, kind: ResourceKind, key: Key, obj: Json | None) -> None:
        """Store `obj` (None deletes) under the next resourceVersion. Caller holds the lock."""
        self._revision += 1
        if obj is None:
            self._store[kind.plural].pop(key, None)
        else:
            obj["metadata"]["resourceVersion"] = str(self._revision)
            self._store[kind.plural][key] = obj

    # --- POST and PUT ----------------------------------------------------------------------------

    def _create(self, kind: ResourceKind, namespace: str, body: Any) -> Json:
        obj = _clean(kind, body, namespace, None)
        key = (namespace, obj["metadata"]["name"])
        if key in self._store[kind.plural]:
            raise already_exists(kind, key[1])
        obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=timestamp())
        self._write(kind, key, obj)
        return copy.deepcopy(obj)

    def _replace(self, kind: ResourceKind, key: Key, body: Any) -> Json:
        old = self._store[kind.plural].get(key)
        if old is None:
            raise not_found(kind, key[1])
        obj = _clean(kind, body, *key)
        version = body["metadata"].get("resourceVersion")
        if not version:
            raise bad_request(
                "an update without metadata.resourceVersion is not supported by this simulated "
                "API server"
            )
        if version != old["metadata"]["resourceVersion"]:
            raise conflict(kind, key[1])
        obj["metadata"].update(
            uid=old["metadata"]["uid"],
            creationTimestamp=old["metadata"]["creationTimestamp"],
            resourceVersion=old["metadata"]["resourceVersion"],
        )
        if obj != old:
            self._write(kind, key, obj)
        return copy.deepcopy(obj)


def _clean(kind: ResourceKind, body: Any, namespace: str, name: str | None) -> Json:
    """The object to store from what a client sent: its name, namespace, labels, annotations and
    the ConfigMap's `data` or the Lease's `spec`; 400 for what the peer does not model."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    if meta is None or not isinstance(meta, dict):
        raise bad_request("the body of the request was in an unknown format")
    if body.get("apiVersion") not in (None, kind.api_version) or body.get("kind") not in (
        None,
        kind.kind,
    ):
        raise bad_request(f"the body of the request is not a {kind.api_version} {kind.kind}")
    unmodelled = [f"metadata.{part}" for part in UNMODELLED_META if meta.get(part)]
    unmodelled += [part for part in UNMODELLED if body.get(part) is not None]
    if unmodelled:
        raise bad_request(f"{', '.join(unmodelled)}: not supported by this simulated API server")
    final_name = name or meta.get("name")
    if not final_name:
        raise bad_request("metadata.name is required by this simulated API server")
    if meta.get("namespace") not in (None, "", namespace) or meta.get("name") not in (
        None,
        "",
        final_name,
    ):
        raise bad_request("the namespace or name of the object does not match the request's")
    # Empty maps are dropped, as Go's `omitempty` does on the real API server.
    kept = {k: dict(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    content = body.get("spec" if kind is LEASES else "data") or {}
    if kind is LEASES:
        content = {"spec": {k: v for k, v in content.items() if v is not None}}
    else:
        content = {"data": dict(content)} if content else {}
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": final_name, "namespace": namespace, **kept},
        **content,
    }

"""The peer's storage, and the ConfigMaps and Leases that clients write into it.

`Store` plays etcd: one `resourceVersion` counter for every object (like etcd's revision), bumped
by every change and never by an update that changes nothing (as on Kubernetes). The roller keeps
its journal in a ConfigMap and its one-roll-at-a-time lock in a Lease, both guarded by that
counter, so what is modelled here is what those depend on:

- create: 201, 409 AlreadyExists, 422 Invalid (name, ConfigMap keys and size, Lease spec);
- replace (PUT): 409 Conflict on a stale `metadata.resourceVersion` or a wrong `uid`; a ConfigMap
  may be replaced without a resourceVersion (unconditionally), a Lease may not (422), and a PUT
  of a Lease that does not exist creates it (201): the two update strategies of Kubernetes;
- a Lease's spec decoded as the API server's Go types are: a MicroTime needs exactly six
  fractional digits (else 400), integers are int32, durations > 0.

Not modelled, and refused with 400 BadRequest rather than silently dropped: a ConfigMap's
`binaryData` and `immutable`, and `metadata.generateName`, `ownerReferences` and `finalizers`.
Fields no Kubernetes version knows are dropped, as the API server does without strict field
validation.
"""

from __future__ import annotations

import copy
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rollguard.peers.kube_api import (
    CONFIGMAPS,
    KINDS,
    LEASES,
    ApiFailure,
    Json,
    Key,
    ResourceKind,
    already_exists,
    bad_request,
    conflict,
    details,
    invalid,
    not_found,
)

Causes = list[tuple[str, str]]
CONFIGMAP_MAX_BYTES = 1024 * 1024
UNMODELLED = {
    "binaryData": "a ConfigMap's binaryData",
    "immutable": "an immutable ConfigMap",
}
UNMODELLED_META = ("generateName", "ownerReferences", "finalizers")
INT32 = (-(2**31), 2**31 - 1)
LEASE_STRINGS = ("holderIdentity", "preferredHolder", "strategy")
LEASE_INTS = ("leaseDurationSeconds", "leaseTransitions")
LEASE_TIMES = ("acquireTime", "renewTime")
# metav1.MicroTime is parsed with the layout "2006-01-02T15:04:05.000000Z07:00": exactly six
# fractional digits, so "2026-01-01T00:00:00Z" is refused (400), as the real API server does.
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    """Objects by resource and (namespace, name), under one lock and one revision counter."""

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

    def _stored(self, plural: str, key: Key) -> Json | None:
        with self._lock:
            obj = self._store[plural].get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def configmap(self, name: str, namespace: str = "default") -> Json | None:
        return self._stored("configmaps", (namespace, name))

    def lease(self, name: str, namespace: str = "default") -> Json | None:
        return self._stored("leases", (namespace, name))

    def edit(
        self, plural: str, name: str, namespace: str, change: Callable[[Json], object]
    ) -> Json:
        """Change a stored ConfigMap or Lease in place as another client's write would (a new
        resourceVersion). `change` gets the object's JSON to modify."""
        with self._lock:
            kind = next(k for k in (CONFIGMAPS, LEASES) if k.plural == plural)
            obj = copy.deepcopy(self._store[plural][(namespace, name)])
            change(obj)
            self._write(kind, (namespace, name), obj)
            return copy.deepcopy(obj)

    # --- POST and PUT ----------------------------------------------------------------------------

    def _create(self, kind: ResourceKind, namespace: str, body: Any) -> Json:
        obj = _clean(kind, body, namespace, None)
        version = ((body.get("metadata") or {}).get("resourceVersion") or "").strip()
        if version.isdigit() and int(version) != 0:
            raise ApiFailure(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        key = (namespace, obj["metadata"]["name"])
        if key in self._store[kind.plural]:
            raise already_exists(kind, key[1])
        obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=timestamp())
        self._write(kind, key, obj)
        return copy.deepcopy(obj)

    def _replace(self, kind: ResourceKind, key: Key, body: Any) -> tuple[int, Json]:
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        old = self._store[kind.plural].get(key)
        if old is None:
            if kind is not LEASES:
                raise not_found(kind, key[1])
            # A PUT creates a Lease that does not exist (AllowCreateOnUpdate); the storage's
            # precondition on the uid, if the client sent one, fails against "nothing".
            if meta.get("uid"):
                why = f"Precondition failed: UID in precondition: {meta['uid']}, UID in object "
                raise conflict(kind, key[1], why + "meta: ")
            fresh = {**body, "metadata": {**meta, "name": key[1], "resourceVersion": None}}
            return 201, self._create(kind, key[0], fresh)
        version = meta.get("resourceVersion")
        if not version and kind is LEASES:
            # A Lease's strategy refuses unconditional updates (AllowUnconditionalUpdate false),
            # with the resource, not the kind, in the message.
            why = "Invalid value: 0x0: must be specified for an update"
            cause = {
                "reason": "FieldValueInvalid",
                "message": why,
                "field": "metadata.resourceVersion",
            }
            raise ApiFailure(
                422,
                "Invalid",
                f'{kind.qualified} "{key[1]}" is invalid: metadata.resourceVersion: {why}',
                {**details(kind, key[1]), "causes": [cause]},
            )
        if version and version != old["metadata"]["resourceVersion"]:
            raise conflict(kind, key[1])
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            why = f"Precondition failed: UID in precondition: {meta['uid']}, "
            raise conflict(kind, key[1], why + f"UID in object meta: {old['metadata']['uid']}")
        obj = _clean(kind, body, *key)
        obj["metadata"].update(
            uid=old["metadata"]["uid"],
            creationTimestamp=old["metadata"]["creationTimestamp"],
            resourceVersion=old["metadata"]["resourceVersion"],
        )
        if obj != old:
            self._write(kind, key, obj)
        return 200, copy.deepcopy(obj)


# --- what a client may write ---------------------------------------------------------------------


def _clean(kind: ResourceKind, body: Any, namespace: str, name: str | None) -> Json:
    """Check an object from a client (400 for wrong shapes, 422 for invalid values) and keep only
    the fields a client may set."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request was in an unknown format")
    if body.get("apiVersion") not in (None, kind.api_version):
        raise bad_request(
            f"the API version in the data ({body['apiVersion']}) does not match the expected "
            f"API version ({kind.api_version})"
        )
    if body.get("kind") not in (None, kind.kind):
        raise bad_request(f"the kind in the data ({body['kind']}) does not match {kind.kind}")
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    for part in UNMODELLED_META:
        if meta.get(part):
            raise bad_request(f"metadata.{part} is not supported by this simulated API server")
    if meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if name is not None and meta.get("name") not in (None, "", name):
        raise bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    content, causes = _lease_content(body) if kind is LEASES else _configmap_content(body)
    for part in ("labels", "annotations"):
        value = meta.get(part)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise bad_request(f"metadata.{part} must map strings to strings")
    final_name = name or meta.get("name") or ""
    if not final_name:
        causes.insert(0, ("metadata.name", "Required value: name or generateName is required"))
    elif len(final_name) > 253 or not _DNS_SUBDOMAIN.match(final_name):
        message = (
            f'Invalid value: "{final_name}": a lowercase RFC 1123 subdomain must consist of lower '
            "case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character"
        )
        causes.insert(0, ("metadata.name", message))
    if causes:
        raise invalid(kind, final_name, causes)
    # Empty maps are dropped, as Go's `omitempty` does on the real API server.
    kept = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": final_name, "namespace": namespace, **kept},
        **content,
    }


def _configmap_content(body: Json) -> tuple[Json, Causes]:
    """A ConfigMap's `data` (400 for a wrong type or an unmodelled field), with the causes of a
    422 for invalid keys and sizes."""
    for part, what in UNMODELLED.items():
        if body.get(part) is not None:
            raise bad_request(f"{what} is not supported by this simulated API server")
    data = body.get("data")
    if data is not None and not (
        isinstance(data, dict) and all(isinstance(v, str) for v in data.values())
    ):
        raise bad_request(
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
            "unmarshal into Go struct field ConfigMap.data of type map[string]string"
        )
    data = data or {}
    causes: Causes = [
        (
            f"data[{key}]",
            f'Invalid value: "{key}": a valid config key must consist of alphanumeric '
            "characters, '-', '_' or '.'",
        )
        for key in data
        if len(key) > 253 or not _CONFIGMAP_KEY.match(key)
    ]
    if sum(len(k) + len(v.encode()) for k, v in data.items()) > CONFIGMAP_MAX_BYTES:
        causes.append(("[]", f"Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes"))
    return ({"data": copy.deepcopy(data)} if data else {}), causes


def _lease_unreadable(why: str) -> ApiFailure:
    return bad_request(f'Lease in version "v1" cannot be handled as a Lease: {why}')


def _lease_content(body: Json) -> tuple[Json, Causes]:
    """A Lease's `spec` decoded as the API server's Go types would (400 for a wrong type or a
    time that is not a MicroTime), times normalised to UTC, unknown fields dropped; with the
    causes of a 422 from Kubernetes' ValidateLeaseSpec."""
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise _lease_unreadable(
            "json: cannot unmarshal into Go struct field Lease.spec of type v1.LeaseSpec"
        )
    clean: Json = {}
    for key, value in spec.items():
        if value is None:
            continue
        if key in LEASE_STRINGS and not isinstance(value, str):
            raise _lease_unreadable(
                f"json: cannot unmarshal into Go struct field LeaseSpec.spec.{key} of type string"
            )
        if key in LEASE_INTS and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not INT32[0] <= value <= INT32[1]
        ):
            raise _lease_unreadable(
                f"json: cannot unmarshal into Go struct field LeaseSpec.spec.{key} of type int32"
            )
        if key in LEASE_TIMES:
            if not isinstance(value, str) or not _MICRO_TIME.match(value):
                rest = value[19:] if isinstance(value, str) else value
                raise _lease_unreadable(
                    f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse '
                    f'"{rest}" as ".000000"'
                )
            moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
            value = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if key in (*LEASE_STRINGS, *LEASE_INTS, *LEASE_TIMES):
            clean[key] = value
    causes: Causes = []
    duration, transitions = clean.get("leaseDurationSeconds"), clean.get("leaseTransitions")
    if duration is not None and duration <= 0:
        causes.append(
            ("spec.leaseDurationSeconds", f"Invalid value: {duration}: must be greater than 0")
        )
    if transitions is not None and transitions < 0:
        causes.append(
            (
                "spec.leaseTransitions",
                f"Invalid value: {transitions}: must be greater than or equal to 0",
            )
        )
    if clean.get("preferredHolder") and not clean.get("strategy"):
        causes.append(
            ("spec.preferredHolder", "Forbidden: may only be specified if `strategy` is defined")
        )
    return {"spec": clean}, causes

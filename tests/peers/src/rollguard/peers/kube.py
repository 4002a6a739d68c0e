"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, real paths, real JSON.

Kubernetes cannot run where rollguard's tests run, yet the roller talks to it through lightkube:
it lists a StatefulSet's pods by label, deletes one, and waits until the pod comes back with a new
uid, the StatefulSet's update revision and a Ready condition; it keeps its journal in a ConfigMap
guarded by resourceVersion. Mocking lightkube would test rollguard against our idea of
lightkube. Instead `KubeSim` serves the API paths, query parameters, content types and JSON that
lightkube sends and decodes (lightkube decodes with msgspec, strictly typed), so the real
`lightkube.Client` and `lightkube.AsyncClient` run unmodified against it.

What is simulated, and how it mirrors a cluster:

- Pods of a StatefulSet (`add_statefulset`): list (label and field selectors, `limit`/`continue`),
  get, watch, delete, and patch of labels/annotations. A deleted pod disappears (optionally after
  `terminate_after` seconds Terminating), is recreated `recreate_after` seconds later with the
  same name, a new uid and the StatefulSet's current `updateRevision` as its
  `controller-revision-hash`, starts (ContainerCreating, then running but not ready) and becomes
  Ready `ready_after` seconds after it reappeared. `set_next_start` makes the next start get stuck
  (CrashLoopBackOff, ImagePullBackOff, ... or Unschedulable).
- StatefulSets: get, list, watch; `status` is recomputed from the pods. As on Kubernetes before
  kubernetes/kubernetes#136833, an `OnDelete` StatefulSet never promotes `currentRevision` to
  `updateRevision`; `promote_current_revision=True` gives the newer behaviour.
- ConfigMaps: create (409 AlreadyExists), get, list, watch, replace (409 Conflict on a stale
  `metadata.resourceVersion`), patch (merge, strategic merge as a plain merge, JSON patch, and
  server-side apply as create-or-merge without field ownership), delete, validation (422 Invalid).
- Leases (`coordination.k8s.io/v1`): the same verbs, with a Lease's own update strategy: a
  replace without `metadata.resourceVersion` is 422 Invalid (no unconditional updates), a replace
  of a Lease that does not exist creates it (201), and the spec is decoded as the API server's
  Go types are (a MicroTime needs exactly six fractional digits, else 400; durations > 0).
- `on_request` sees each request before it is answered and `edit` changes a stored object as a
  concurrent writer would, so a test can put a write between a client's read and its update.
- Errors are `Status` objects with `code`/`reason`/`details`, served as exactly
  `application/json`: lightkube only turns an error into `ApiError` for that exact content type.
- `resourceVersion` is one counter for all objects, like etcd's revision; every change bumps it
  and is recorded for watches. An update that changes nothing does not bump it (as on Kubernetes).

Timed steps (recreation, container start, readiness) and the `on_delete`/`on_start` callbacks run
one at a time on the simulator's own "lifecycle" thread, never on the HTTP server's event loop, so
a callback may block (stop or start a real process) without stalling API requests.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import heapq
import itertools
import json
import logging
import math
import re
import secrets
import socket
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import uvicorn
import yaml
from lightkube import KubeConfig
from lightkube.config.models import Cluster, User
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from rollguard.peers.processes import wait_until

logger = logging.getLogger(__name__)

Json = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)

CONTAINER = "kafka"
DEFAULT_IMAGE = "docker.io/rollguard/kafka-sim:1"
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
WAITING_MESSAGES = {
    "CrashLoopBackOff": "back-off 10s restarting failed container={container} pod={pod}",
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "ErrImagePull": 'failed to pull and unpack image "{image}"',
    "InvalidImageName": 'Failed to apply default image tag "{image}": couldn\'t parse image name',
}
UNSCHEDULABLE_MESSAGE = (
    "0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: "
    "3 No preemption victims found for incoming pod."
)
CONFIGMAP_MAX_BYTES = 1024 * 1024
WATCH_POLL = 0.02
EVENTS_KEPT = 20_000
VERSION_INFO = {"major": "1", "minor": "33", "gitVersion": "v1.33.0-rollguard-sim"}


class Deletion(NamedTuple):
    """One DELETE of a pod that existed: its name, the uid it had, and `time.monotonic()`."""

    name: str
    uid: str
    at: float


class SeenRequest(NamedTuple):
    """One request the simulator answered, for assertions on what a client really sent."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None


@dataclass(frozen=True)
class ResourceKind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced_fields: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How Kubernetes names the resource in messages: `configmaps`, `statefulsets.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = ResourceKind(
    "",
    "v1",
    "pods",
    "Pod",
    (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
)
CONFIGMAPS = ResourceKind("", "v1", "configmaps", "ConfigMap")
STATEFULSETS = ResourceKind("apps", "v1", "statefulsets", "StatefulSet")
LEASES = ResourceKind("coordination.k8s.io", "v1", "leases", "Lease")
KINDS = {(k.group, k.version, k.plural): k for k in (PODS, CONFIGMAPS, STATEFULSETS, LEASES)}
STORED = (CONFIGMAPS, LEASES)  # created, replaced, patched and deleted as clients write them
# The update strategies of Kubernetes: a Lease needs the resourceVersion on every update
# (AllowUnconditionalUpdate false) and may be created by a PUT (AllowCreateOnUpdate true); a
# ConfigMap is the other way round.
UPDATE_NEEDS_VERSION = (LEASES,)
CREATE_ON_UPDATE = (LEASES,)

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?$"
)
_LABEL_KEY = re.compile(
    r"^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_REQUIREMENT = re.compile(r"^(?P<key>[^\s=!()]+)\s+(?P<op>in|notin)\s*\((?P<values>.*)\)$")
_COMPARE_REQUIREMENT = re.compile(r"^(?P<key>[^\s=!()]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^\s]*)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


# --- errors --------------------------------------------------------------------------------------


_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class ApiFailure(Exception):
    """An error answered as a Kubernetes `Status` object."""

    def __init__(self, code: int, reason: str, message: str, details: Json | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Json:
        body: Json = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(kind: ResourceKind, name: str) -> Json:
    details: Json = {"name": name, "kind": kind.plural}
    if kind.group:
        details["group"] = kind.group
    return details


def not_found(kind: ResourceKind, name: str) -> ApiFailure:
    return ApiFailure(404, "NotFound", f'{kind.qualified} "{name}" not found', _details(kind, name))


def already_exists(kind: ResourceKind, name: str) -> ApiFailure:
    message = f'{kind.qualified} "{name}" already exists'
    return ApiFailure(409, "AlreadyExists", message, _details(kind, name))


def conflict(kind: ResourceKind, name: str, why: str | None = None) -> ApiFailure:
    why = why or (
        "the object has been modified; please apply your changes to the latest version and try "
        "again"
    )
    message = f'Operation cannot be fulfilled on {kind.qualified} "{name}": {why}'
    return ApiFailure(409, "Conflict", message, _details(kind, name))


def invalid(kind: ResourceKind, name: str, causes: list[tuple[str, str]]) -> ApiFailure:
    """422 Invalid; `causes` are (field, message) pairs, as in Kubernetes' field errors."""
    text = ", ".join(f"{field_}: {message}" for field_, message in causes)
    details = {
        "name": name,
        "kind": kind.kind,
        "causes": [
            {"reason": "FieldValueInvalid", "message": message, "field": field_}
            for field_, message in causes
        ],
    }
    qualified = kind.kind
    if kind.group:
        details["group"] = kind.group
        qualified = f"{kind.kind}.{kind.group}"  # a GroupKind as Go prints it
    return ApiFailure(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiFailure:
    return ApiFailure(400, "BadRequest", message)


def no_such_path() -> ApiFailure:
    return ApiFailure(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiFailure:
    return ApiFailure(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


# --- selectors -----------------------------------------------------------------------------------

Predicate = Callable[[Mapping[str, str]], bool]


def _split_requirements(text: str) -> list[str]:
    """Split a selector on the commas that are not inside `in (...)` value sets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def _check_key(key: str) -> str:
    if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise ValueError(f"invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if not _LABEL_VALUE.match(value) or len(value) > 63:
        raise ValueError(f"invalid label value {value!r}")
    return value


def _label_requirement(part: str) -> Predicate:
    if match := _SET_REQUIREMENT.match(part):
        key = _check_key(match["key"])
        inner = match["values"].strip()
        if not inner:
            raise ValueError(f"for 'in', 'notin' operators, values set can't be empty: {part!r}")
        values = frozenset(_check_value(v.strip()) for v in inner.split(","))
        if match["op"] == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: labels.get(key) not in values
    if part.startswith("!"):
        key = _check_key(part[1:].strip())
        return lambda labels: key not in labels
    if match := _COMPARE_REQUIREMENT.match(part):
        key, value = _check_key(match["key"]), _check_value(match["value"])
        if match["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    key = _check_key(part)
    return lambda labels: key in labels


def parse_label_selector(text: str) -> Predicate:
    """Compile a label selector (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
    `k notin (a,b)`, comma = AND) into a predicate on a labels mapping; ValueError if malformed."""
    if not text.strip():
        return lambda labels: True
    requirements = []
    for raw in _split_requirements(text):
        part = raw.strip()
        if not part:
            raise ValueError(f"empty requirement in {text!r}")
        requirements.append(_label_requirement(part))
    return lambda labels: all(requirement(labels) for requirement in requirements)


def _field(obj: Json, path: str) -> str:
    value: Any = obj
    for step in path.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return "" if value is None else str(value)


class FieldNotSupported(ValueError):
    pass


def parse_field_selector(text: str, supported: tuple[str, ...]) -> Callable[[Json], bool]:
    """Compile a field selector (`f=v`, `f==v`, `f!=v`, comma = AND) over `supported` fields."""
    if not text.strip():
        return lambda obj: True
    requirements: list[tuple[str, bool, str]] = []
    for raw in text.split(","):
        match = re.match(r"^\s*(?P<key>[^\s=!]+)\s*(?P<op>==|!=|=)\s*(?P<value>.*?)\s*$", raw)
        if not match:
            raise ValueError(f"invalid field selector requirement {raw!r}")
        if match["key"] not in supported:
            raise FieldNotSupported(match["key"])
        requirements.append((match["key"], match["op"] != "!=", match["value"]))
    return lambda obj: all((_field(obj, k) == v) == equal for k, equal, v in requirements)


# --- patches -------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {path!r}")
    return [step.replace("~1", "/").replace("~0", "~") for step in path[1:].split("/")]


def _locate(doc: Any, steps: list[str]) -> Any:
    for step in steps:
        if isinstance(doc, list):
            doc = doc[int(step)]
        elif isinstance(doc, dict):
            doc = doc[step]
        else:
            raise KeyError(step)
    return doc


def json_patch(doc: Json, operations: Any) -> Json:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test); ValueError when it fails."""
    if not isinstance(operations, list):
        raise ValueError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    try:
        for operation in operations:
            op, steps = operation["op"], _pointer(operation["path"])
            if not steps:
                raise ValueError("replacing the whole document is not supported")
            parent, last = _locate(doc, steps[:-1]), steps[-1]
            if op == "test":
                if _locate(doc, steps) != operation["value"]:
                    raise ValueError(f"testing value {operation['path']} failed")
                continue
            if op in ("move", "copy"):
                source = _pointer(operation["from"])
                value = copy.deepcopy(_locate(doc, source))
                if op == "move":
                    holder = _locate(doc, source[:-1])
                    del holder[int(source[-1]) if isinstance(holder, list) else source[-1]]
                    parent = _locate(doc, steps[:-1])
                op, operation = "add", {**operation, "value": value}
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if op == "add":
                    parent.insert(index, copy.deepcopy(operation["value"]))
                elif op == "remove":
                    del parent[index]
                elif op == "replace":
                    parent[index] = copy.deepcopy(operation["value"])
                else:
                    raise ValueError(f"unknown JSON patch operation {op!r}")
            elif isinstance(parent, dict):
                if op in ("remove", "replace") and last not in parent:
                    raise ValueError(f"path {operation['path']} does not exist")
                if op == "remove":
                    del parent[last]
                elif op in ("add", "replace"):
                    parent[last] = copy.deepcopy(operation["value"])
                else:
                    raise ValueError(f"unknown JSON patch operation {op!r}")
            else:
                raise ValueError(f"path {operation['path']} does not exist")
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"JSON patch failed: {exc!r}") from exc
    return doc


# --- simulated state -----------------------------------------------------------------------------


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _StatefulSet:
    namespace: str
    name: str
    replicas: int
    labels_for: Callable[[int], Mapping[str, str]]
    annotations_for: Callable[[int], Mapping[str, str]] | None
    selector: dict[str, str]
    image: str
    update_strategy: str
    promote_current_revision: bool
    current_revision: str
    update_revision: str
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: str = field(default_factory=_timestamp)
    generation: int = 1


@dataclass
class _Pod:
    sts: _StatefulSet
    ordinal: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ready_after: float
    incarnation: int
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: str = field(default_factory=_timestamp)
    scheduled: bool = True
    waiting: str | None = None
    running: bool = False
    ready: bool = False
    ever_ran: bool = False
    restart_count: int = 0
    started_at: str | None = None
    last_finished_at: str | None = None
    container_id: str | None = None
    deletion: str | None = None
    grace: int = 30
    token: int = 0
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.sts.name}-{self.ordinal}"

    @property
    def key(self) -> Key:
        return (self.sts.namespace, self.name)


@dataclass
class _StartPlan:
    ready_after: float | None = None
    waiting_reason: str | None = None
    unschedulable: bool = False


@dataclass
class _Event:
    resource_version: int
    plural: str
    type: str
    obj: Json
    old: Json | None


class KubeSim:
    """A fake Kubernetes API server; see the module docstring for what it simulates.

    `ready_after` and `recreate_after` are seconds; `ready_after=math.inf` means a recreated pod
    never becomes Ready by itself (call `set_ready`). `on_delete(name)` is called when a pod is
    deleted (the "kubelet" stops it), `on_start(name)` when a recreated pod's container starts
    running; both run on the lifecycle thread. A pod reappears no earlier than `on_delete`
    returns. With `token` set, requests must carry `Authorization: Bearer <token>` (else 401).
    """

    def __init__(
        self,
        *,
        recreate_after: float = 0.2,
        ready_after: float = 0.3,
        container_creating: float = 0.05,
        terminate_after: float = 0.0,
        on_delete: Callable[[str], object] | None = None,
        on_start: Callable[[str], object] | None = None,
        token: str | None = None,
    ) -> None:
        self.recreate_after = recreate_after
        self.ready_after = ready_after
        self.container_creating = container_creating
        self.terminate_after = terminate_after
        self.on_delete = on_delete
        self.on_start = on_start
        self.token = token
        self.deletions: list[Deletion] = []
        self.requests: list[SeenRequest] = []
        self.callback_errors: list[BaseException] = []
        # Called on the HTTP thread before a request is answered, e.g. to `edit` an object
        # between a client's read and its write: a race that must not be left to timing.
        self.on_request: Callable[[SeenRequest], object] | None = None
        # (verb, plural) pairs the client's account may not use: answered 403 as RBAC does.
        self.forbidden: set[tuple[str, str]] = set()
        self.url = ""
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        self._revision = 1000
        self._store: dict[str, dict[Key, Json]] = {k.plural: {} for k in KINDS.values()}
        self._sets: dict[Key, _StatefulSet] = {}
        self._owned: dict[Key, tuple[_StatefulSet, int]] = {}
        self._pods: dict[Key, _Pod] = {}
        self._next_start: dict[Key, _StartPlan] = {}
        self._events: list[_Event] = []
        self._event_versions: list[int] = []
        self._jobs: list[tuple[float, int, Callable[[], object]]] = []
        self._sequence = itertools.count()
        self._incarnations = itertools.count(1)
        self._stopping = False
        self._server: uvicorn.Server | None = None
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []

    # --- running ---------------------------------------------------------------------------------

    def start(self) -> KubeSim:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
        # and without it every keep-alive request waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._asgi,
            log_config=None,
            access_log=False,
            lifespan="off",
            loop="asyncio",
            ws="none",
            interface="asgi3",
            timeout_graceful_shutdown=2,
        )
        server = self._server = uvicorn.Server(config)
        self._sock = sock
        self._threads = [
            threading.Thread(
                target=lambda: asyncio.run(server.serve(sockets=[sock])),
                name="kube-sim-http",
                daemon=True,
            ),
            threading.Thread(target=self._run_jobs, name="kube-sim-lifecycle", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        wait_until(
            lambda: server.started, timeout=10, interval=0.01, what="the fake Kubernetes API"
        )
        logger.info("fake Kubernetes API serving on %s", self.url)
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._server is not None:
            self._server.should_exit = True
        for thread in self._threads:
            thread.join(10)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> KubeSim:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, namespace: str = "default") -> KubeConfig:
        """A KubeConfig for lightkube. `KubeConfig.from_server(url)` alone does not do: lightkube
        1.0.1 asserts that the context has a user ("Missing user"), so this adds one."""
        user = User(token=self.token) if self.token is not None else User()
        return KubeConfig.from_one(cluster=Cluster(server=self.url), user=user, namespace=namespace)

    # --- what tests set up and inspect -----------------------------------------------------------

    def add_statefulset(
        self,
        namespace: str,
        name: str,
        replicas: int,
        labels_for: Callable[[int], Mapping[str, str]],
        annotations_for: Callable[[int], Mapping[str, str]] | None = None,
        revision: str = "rev-1",
        *,
        image: str = DEFAULT_IMAGE,
        update_strategy: str = "OnDelete",
        promote_current_revision: bool = False,
        selector: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Create a StatefulSet and its pods `{name}-{ordinal}`, all Running and Ready.

        The selector defaults to the labels that `labels_for` gives every ordinal. Returns the
        pod names. No `on_start` call is made for these pods: they exist already. `labels_for`
        and `annotations_for` are asked again whenever a pod is recreated. The simulator never
        deletes pods by itself: `update_strategy="RollingUpdate"` only changes the status
        bookkeeping (currentRevision is promoted once every pod is updated and Ready).
        """
        if update_strategy not in ("OnDelete", "RollingUpdate"):
            raise ValueError(f"unknown update strategy {update_strategy!r}")
        per_pod = [dict(labels_for(ordinal)) for ordinal in range(replicas)]
        if selector is None:
            common = set(per_pod[0].items()) if per_pod else set()
            for labels in per_pod[1:]:
                common &= set(labels.items())
            selector = dict(sorted(common))
        if not selector or not all(set(selector.items()) <= set(lb.items()) for lb in per_pod):
            raise ValueError(f"selector {selector!r} must be non-empty and match every pod")
        sts = _StatefulSet(
            namespace=namespace,
            name=name,
            replicas=replicas,
            labels_for=labels_for,
            annotations_for=annotations_for,
            selector=dict(selector),
            image=image,
            update_strategy=update_strategy,
            promote_current_revision=promote_current_revision,
            current_revision=revision,
            update_revision=revision,
        )
        with self._lock:
            if (namespace, name) in self._sets:
                raise ValueError(f"statefulset {namespace}/{name} exists already")
            self._sets[(namespace, name)] = sts
            self._write(STATEFULSETS, (namespace, name), self._render_statefulset(sts))
            for ordinal in range(replicas):
                pod = self._new_pod(sts, ordinal, per_pod[ordinal], self._annotations(sts, ordinal))
                self._owned[pod.key] = (sts, ordinal)
                pod.waiting, pod.running, pod.ready, pod.ever_ran = None, True, True, True
                pod.started_at, pod.container_id = pod.created, _container_id()
                self._commit_pod(pod)
        return [f"{name}-{ordinal}" for ordinal in range(replicas)]

    def set_update_revision(self, sts: str, revision: str, namespace: str | None = None) -> None:
        """Simulate a change of the StatefulSet's pod template: a new `updateRevision`, so the
        existing pods are out of date until they are deleted and recreated."""
        with self._lock:
            statefulset = self._statefulset(sts, namespace)
            statefulset.update_revision = revision
            statefulset.generation += 1
            self._refresh_statefulset(statefulset, force=True)

    def statefulset(self, name: str, namespace: str | None = None) -> Json:
        with self._lock:
            s = self._statefulset(name, namespace)
            return copy.deepcopy(self._store["statefulsets"][(s.namespace, s.name)])

    def pod(self, name: str, namespace: str | None = None) -> Json | None:
        """The pod's current JSON as the API serves it, or None while it does not exist."""
        with self._lock:
            key = self._pod_key(name, namespace)
            obj = self._store["pods"].get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def configmap(self, name: str, namespace: str = "default") -> Json | None:
        with self._lock:
            obj = self._store["configmaps"].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def lease(self, name: str, namespace: str = "default") -> Json | None:
        with self._lock:
            obj = self._store["leases"].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def edit(
        self, plural: str, name: str, namespace: str, change: Callable[[Json], object]
    ) -> Json:
        """Change a stored ConfigMap or Lease in place as another client's write would: a new
        resourceVersion and a watch event. `change` gets the object's JSON to modify."""
        with self._lock:
            kind = next(k for k in STORED if k.plural == plural)
            obj = copy.deepcopy(self._store[plural][(namespace, name)])
            change(obj)
            self._write(kind, (namespace, name), obj)
            return copy.deepcopy(obj)

    def set_next_start(
        self,
        name: str,
        *,
        ready_after: float | None = None,
        waiting_reason: str | None = None,
        unschedulable: bool = False,
        namespace: str | None = None,
    ) -> None:
        """Decide how the pod's next recreation goes (one-shot; a later call replaces it).

        `ready_after` overrides the simulator's (None keeps it; `math.inf` = never by itself).
        `waiting_reason` (CrashLoopBackOff, ImagePullBackOff, InvalidImageName,
        ContainerCreating, ...) keeps the container waiting, never ready, until `set_waiting` or
        `set_ready`. `unschedulable` keeps the pod Pending with PodScheduled False/Unschedulable
        until `set_unschedulable(name, False)`.
        """
        with self._lock:
            key = self._pod_key(name, namespace)
            self._next_start[key] = _StartPlan(ready_after, waiting_reason, unschedulable)

    def set_ready(self, name: str, ready: bool, namespace: str | None = None) -> None:
        """Pass or fail the readiness probe now. Ready on a container that is not running
        starts it (and calls `on_start`)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            if ready and not pod.running:
                self._start(pod)
            pod.ready = ready
            self._commit_pod(pod)

    def set_waiting(self, name: str, reason: str | None, namespace: str | None = None) -> None:
        """Put the container in waiting state `reason` (never ready while there); None lets it
        start again (ContainerCreating, running, Ready after the pod's `ready_after`)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            if reason is None:
                pod.waiting, pod.running, pod.ready = "ContainerCreating", False, False
                self._commit_pod(pod)
                self._plan_start(pod)
            else:
                self._enter_waiting(pod, reason)
                self._commit_pod(pod)

    def set_unschedulable(
        self, name: str, unschedulable: bool, namespace: str | None = None
    ) -> None:
        """Make the pod Pending/Unschedulable now, or let the scheduler place it (then it
        starts like a recreated pod)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            pod.running = pod.ready = False
            if unschedulable:
                pod.scheduled, pod.waiting = False, None
                self._commit_pod(pod)
            else:
                pod.scheduled, pod.waiting = True, "ContainerCreating"
                self._commit_pod(pod)
                self._plan_start(pod)

    def annotate(
        self, name: str, key: str, value: str | None, namespace: str | None = None
    ) -> None:
        """Set (or, with None, remove) an annotation on the live pod."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            if value is None:
                pod.annotations.pop(key, None)
            else:
                pod.annotations[key] = value
            self._commit_pod(pod)

    # --- pods ------------------------------------------------------------------------------------

    def _statefulset(self, name: str, namespace: str | None) -> _StatefulSet:
        matches = [s for (ns, n), s in self._sets.items() if n == name and namespace in (None, ns)]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} statefulsets named {name!r} (namespace {namespace})")
        return matches[0]

    def _pod_key(self, name: str, namespace: str | None) -> Key:
        keys = [key for key in self._owned if key[1] == name and namespace in (None, key[0])]
        if len(keys) != 1:
            raise KeyError(f"{len(keys)} simulated pods named {name!r} (namespace {namespace})")
        return keys[0]

    def _live_pod(self, name: str, namespace: str | None) -> _Pod:
        key = self._pod_key(name, namespace)
        if key not in self._pods:
            raise KeyError(f"pod {key[0]}/{key[1]} does not exist right now (being recreated)")
        return self._pods[key]

    def _annotations(self, sts: _StatefulSet, ordinal: int) -> dict[str, str]:
        return dict(sts.annotations_for(ordinal)) if sts.annotations_for else {}

    def _new_pod(
        self,
        sts: _StatefulSet,
        ordinal: int,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        ready_after: float | None = None,
    ) -> _Pod:
        name = f"{sts.name}-{ordinal}"
        pod = _Pod(
            sts=sts,
            ordinal=ordinal,
            labels={
                **labels,
                REVISION_LABEL: sts.update_revision,
                POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(ordinal),
            },
            annotations=dict(annotations),
            ready_after=self.ready_after if ready_after is None else ready_after,
            incarnation=next(self._incarnations),
        )
        self._pods[pod.key] = pod
        return pod

    def _start(self, pod: _Pod) -> None:
        """The container starts running (not ready yet); `on_start` follows on the lifecycle
        thread. Caller holds the lock and commits."""
        pod.scheduled, pod.waiting, pod.running, pod.ever_ran = True, None, True, True
        pod.started_at, pod.container_id = _timestamp(), _container_id()
        self._after(0, self._call, "on_start", pod.name)

    def _enter_waiting(self, pod: _Pod, reason: str) -> None:
        if reason == "CrashLoopBackOff":
            pod.restart_count += 1
            pod.ever_ran = True
            pod.last_finished_at = _timestamp()
            pod.started_at = pod.started_at or pod.last_finished_at
        pod.scheduled, pod.waiting, pod.running, pod.ready = True, reason, False, False

    def _current(self, pod: _Pod, token: int) -> bool:
        return self._pods.get(pod.key) is pod and pod.token == token and pod.deletion is None

    def _plan_start(self, pod: _Pod) -> None:
        """ContainerCreating now; running after `container_creating`; Ready `ready_after` from
        now. Caller holds the lock."""
        starts_in = min(self.container_creating, pod.ready_after)
        self._after(starts_in, self._start_container, pod, pod.token, pod.ready_after - starts_in)

    def _start_container(self, pod: _Pod, token: int, ready_in: float) -> None:
        with self._lock:
            if not self._current(pod, token):
                return
            pod.scheduled, pod.waiting, pod.running, pod.ever_ran = True, None, True, True
            pod.started_at, pod.container_id = _timestamp(), _container_id()
            self._commit_pod(pod)
            if math.isfinite(ready_in):
                self._after(ready_in, self._become_ready, pod, token)
        self._call("on_start", pod.name)

    def _become_ready(self, pod: _Pod, token: int) -> None:
        with self._lock:
            if self._current(pod, token) and pod.running:
                pod.ready = True
                self._commit_pod(pod)

    def _delete_pod(self, key: Key, query: Mapping[str, str], dry_run: bool) -> Json:
        pod = self._pods.get(key)
        if pod is None:
            raise not_found(PODS, key[1])
        if dry_run or pod.deletion is not None:
            return copy.deepcopy(self._store["pods"][key])
        now = time.monotonic()
        self.deletions.append(Deletion(pod.name, pod.uid, now))
        grace = int(query["gracePeriodSeconds"]) if query.get("gracePeriodSeconds") else None
        wait = self.terminate_after if grace is None else min(float(grace), self.terminate_after)
        pod.token += 1
        pod.deletion = _timestamp()
        pod.grace = 30 if grace is None else grace
        pod.ready = False
        if wait > 0:
            self._commit_pod(pod)
            body = copy.deepcopy(self._store["pods"][key])
        else:
            body = self._render_pod(pod)
            body["metadata"]["resourceVersion"] = self._store["pods"][key]["metadata"][
                "resourceVersion"
            ]
            del self._pods[key]
            self._write(PODS, key, None, final=body)
        self._after(0, self._pod_killed, pod, now, wait)
        return body

    def _pod_killed(self, pod: _Pod, deleted_at: float, wait: float) -> None:
        self._call("on_delete", pod.name)
        if wait > 0:
            self._after(max(0.0, deleted_at + wait - time.monotonic()), self._pod_gone, pod)
        else:
            delay = max(0.0, deleted_at + self.recreate_after - time.monotonic())
            self._after(delay, self._recreate, pod.sts, pod.ordinal)

    def _pod_gone(self, pod: _Pod) -> None:
        with self._lock:
            if self._pods.get(pod.key) is pod:
                del self._pods[pod.key]
                self._write(PODS, pod.key, None, final=self._render_pod(pod))
        self._after(self.recreate_after, self._recreate, pod.sts, pod.ordinal)

    def _recreate(self, sts: _StatefulSet, ordinal: int) -> None:
        labels, annotations = dict(sts.labels_for(ordinal)), self._annotations(sts, ordinal)
        with self._lock:
            key = (sts.namespace, f"{sts.name}-{ordinal}")
            if self._stopping or key in self._pods:
                return
            plan = self._next_start.pop(key, None) or _StartPlan()
            pod = self._new_pod(sts, ordinal, labels, annotations, plan.ready_after)
            if plan.unschedulable:
                pod.scheduled = False
            elif plan.waiting_reason is not None:
                self._enter_waiting(pod, plan.waiting_reason)
            else:
                pod.waiting = "ContainerCreating"
            self._commit_pod(pod)
            if pod.scheduled and plan.waiting_reason is None:
                self._plan_start(pod)
            logger.info("fake Kubernetes: recreated pod %s/%s uid %s", *key, pod.uid)

    def _commit_pod(self, pod: _Pod) -> None:
        """Store the pod's new state under a new resourceVersion. Caller holds the lock."""
        if self._pods.get(pod.key) is not pod:
            return
        self._write(PODS, pod.key, self._render_pod(pod))

    def _render_pod(self, pod: _Pod) -> Json:
        sts, image = pod.sts, pod.sts.image
        ready = pod.running and pod.ready and pod.deletion is None
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
        now = _timestamp()
        conditions = []
        for kind, status, reason, message in wanted:
            text = "True" if status else "False"
            previous = pod.conditions.get(kind)
            since = previous[1] if previous and previous[0] == text else now
            pod.conditions[kind] = (text, since)
            condition: Json = {"type": kind, "status": text, "lastTransitionTime": since}
            if not status and reason:
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
        if pod.annotations:
            metadata["annotations"] = dict(pod.annotations)
        if pod.deletion is not None:
            metadata["deletionTimestamp"] = pod.deletion
            metadata["deletionGracePeriodSeconds"] = pod.grace
        spec: Json = {
            "containers": [_container(image)],
            "hostname": pod.name,
            "subdomain": sts.name,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
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
            status["containerStatuses"] = [self._container_status(pod, ready)]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        }

    def _container_status(self, pod: _Pod, ready: bool) -> Json:
        image = pod.sts.image
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

    # --- statefulsets ----------------------------------------------------------------------------

    def _render_statefulset(self, sts: _StatefulSet) -> Json:
        strategy: Json = {"type": sts.update_strategy}
        if sts.update_strategy == "RollingUpdate":
            strategy["rollingUpdate"] = {"partition": 0}
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
                "updateStrategy": strategy,
                "revisionHistoryLimit": 10,
                "template": {
                    "metadata": {"labels": dict(sts.selector)},
                    "spec": {"containers": [_container(sts.image)]},
                },
            },
            "status": self._statefulset_status(sts),
        }

    def _statefulset_status(self, sts: _StatefulSet) -> Json:
        pods = [pod for pod in self._pods.values() if pod.sts is sts]
        ready = sum(1 for p in pods if p.running and p.ready and p.deletion is None)
        updated = sum(1 for p in pods if p.labels.get(REVISION_LABEL) == sts.update_revision)
        if (
            sts.promote_current_revision or sts.update_strategy == "RollingUpdate"
        ) and updated == ready == sts.replicas:
            sts.current_revision = sts.update_revision
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

    def _refresh_statefulset(self, sts: _StatefulSet, force: bool = False) -> None:
        key = (sts.namespace, sts.name)
        stored = self._store["statefulsets"].get(key)
        rendered = self._render_statefulset(sts)
        if force or stored is None or stored["status"] != rendered["status"]:
            self._write(STATEFULSETS, key, rendered)

    # --- the store and watch events --------------------------------------------------------------

    def _write(
        self, kind: ResourceKind, key: Key, obj: Json | None, final: Json | None = None
    ) -> Json | None:
        """Store `obj` (None deletes) under the next resourceVersion and record the watch event.
        Caller holds the lock."""
        store = self._store[kind.plural]
        old = store.get(key)
        self._revision += 1
        version = str(self._revision)
        if obj is None:
            if old is None:
                return None
            del store[key]
            gone = copy.deepcopy(final if final is not None else old)
            gone["metadata"]["resourceVersion"] = version
            self._record(kind, "DELETED", gone, old)
        else:
            obj["metadata"]["resourceVersion"] = version
            store[key] = obj
            self._record(kind, "ADDED" if old is None else "MODIFIED", copy.deepcopy(obj), old)
        if kind is PODS:
            owner = self._owned.get(key)
            if owner is not None:
                self._refresh_statefulset(owner[0])
        return obj

    def _record(self, kind: ResourceKind, type_: str, obj: Json, old: Json | None) -> None:
        self._events.append(_Event(self._revision, kind.plural, type_, obj, old))
        self._event_versions.append(self._revision)
        if len(self._events) > EVENTS_KEPT:
            del self._events[: EVENTS_KEPT // 2]
            del self._event_versions[: EVENTS_KEPT // 2]

    # --- lifecycle thread ------------------------------------------------------------------------

    def _after(self, delay: float, fn: Callable[..., object], *args: Any) -> None:
        with self._cv:
            due = time.monotonic() + max(0.0, delay)
            heapq.heappush(self._jobs, (due, next(self._sequence), lambda: fn(*args)))
            self._cv.notify_all()

    def _run_jobs(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    if self._jobs and self._jobs[0][0] <= now:
                        job = heapq.heappop(self._jobs)[2]
                        break
                    self._cv.wait(self._jobs[0][0] - now if self._jobs else None)
            try:
                job()
            except Exception:
                logger.exception("fake Kubernetes: a lifecycle step failed")

    def _call(self, which: str, name: str) -> None:
        """Call `self.on_delete` or `self.on_start` as set now; a failure is logged and kept in
        `callback_errors` (the simulation goes on, as a cluster would)."""
        callback = getattr(self, which)
        if callback is None:
            return
        try:
            callback(name)
        except Exception as exc:
            logger.exception("fake Kubernetes: %s(%r) failed", which, name)
            self.callback_errors.append(exc)

    # --- HTTP ------------------------------------------------------------------------------------

    async def _asgi(self, scope: Json, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        method, path = request.method, request.url.path
        query = dict(request.query_params)
        content_type = request.headers.get("content-type")
        seen = SeenRequest(method, path, query, content_type)
        with self._lock:
            self.requests.append(seen)
        if self.on_request is not None:
            self.on_request(seen)
        try:
            if self.token is not None and (
                request.headers.get("authorization") != f"Bearer {self.token}"
            ):
                raise ApiFailure(401, "Unauthorized", "Unauthorized")
            if path == "/version" and method == "GET":
                return _json(200, VERSION_INFO)
            match = _PATH.match(path)
            if not match:
                raise no_such_path()
            group, version = ("", "v1") if match["core"] else (match["group"], match["version"])
            kind = KINDS.get((group, version, match["plural"]))
            namespace, name = match["ns"], match["name"]
            if kind is None or (namespace is None and name is not None):
                raise no_such_path()
            verb = _VERBS.get(method, method.lower())
            if method == "GET" and name is None:
                verb = "watch" if query.get("watch") in ("true", "1") else "list"
            if (verb, kind.plural) in self.forbidden:
                raise ApiFailure(
                    403,
                    "Forbidden",
                    f'{kind.plural} "{name or ""}" is forbidden: User '
                    f'"system:serviceaccount:{namespace}:rollguard" cannot {verb} resource '
                    f'"{kind.plural}" in API group "{kind.group}" in the namespace "{namespace}"',
                    {"name": name or "", "kind": kind.plural},
                )
            body = await request.body()
            if method == "GET" and name is None and query.get("watch") in ("true", "1"):
                return self._watch(kind, namespace, query)
            with self._lock:
                code, answer = self._dispatch(
                    method, kind, namespace, name, query, content_type, body
                )
            return _json(code, answer)
        except ApiFailure as failure:
            return _json(failure.code, failure.status())
        except Exception as exc:
            logger.exception("fake Kubernetes: %s %s failed", method, path)
            return _json(500, ApiFailure(500, "InternalError", repr(exc)).status())

    def _dispatch(
        self,
        method: str,
        kind: ResourceKind,
        namespace: str | None,
        name: str | None,
        query: Mapping[str, str],
        content_type: str | None,
        body: bytes,
    ) -> tuple[int, Json]:
        dry_run = query.get("dryRun") == "All"
        if name is None:
            if method == "GET":
                return 200, self._list(kind, namespace, query)
            if method == "POST" and kind in STORED and namespace is not None:
                return 201, self._create(kind, namespace, _parse(body), dry_run)
            raise method_not_allowed()
        assert namespace is not None
        key = (namespace, name)
        if method == "GET":
            obj = self._store[kind.plural].get(key)
            if obj is None:
                raise not_found(kind, name)
            return 200, copy.deepcopy(obj)
        if kind is PODS and method == "DELETE":
            self._check_delete_preconditions(kind, key, body)
            return 200, self._delete_pod(key, query, dry_run)
        if kind is PODS and method == "PATCH":
            return 200, self._patch_pod(key, content_type, body, dry_run)
        if kind not in STORED:
            raise method_not_allowed()
        if method == "PUT":
            return self._replace(kind, key, _parse(body), dry_run)
        if method == "PATCH":
            return self._patch(kind, key, content_type, body, dry_run)
        if method == "DELETE":
            self._check_delete_preconditions(kind, key, body)
            return 200, self._delete(kind, key, dry_run)
        raise method_not_allowed()

    def _selection(
        self, kind: ResourceKind, namespace: str | None, query: Mapping[str, str]
    ) -> Callable[[Json], bool]:
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
        except ValueError as exc:
            raise bad_request(f"unable to parse requirement: {exc}") from exc
        supported = ("metadata.name", "metadata.namespace", *kind.namespaced_fields)
        try:
            fields = parse_field_selector(query.get("fieldSelector", ""), supported)
        except FieldNotSupported as exc:
            raise bad_request(f'field label not supported: "{exc}"') from exc
        except ValueError as exc:
            raise bad_request(f"invalid field selector: {exc}") from exc
        return lambda obj: (
            (namespace is None or obj["metadata"].get("namespace") == namespace)
            and labels(obj["metadata"].get("labels") or {})
            and fields(obj)
        )

    def _list(self, kind: ResourceKind, namespace: str | None, query: Mapping[str, str]) -> Json:
        selected = self._selection(kind, namespace, query)
        store = self._store[kind.plural]
        keys = sorted(key for key, obj in store.items() if selected(obj))
        metadata: Json = {"resourceVersion": str(self._revision)}
        if token := query.get("continue"):
            try:
                after = tuple(json.loads(base64.urlsafe_b64decode(token)))
            except ValueError as exc:
                raise bad_request(f"continue key is not valid: {exc}") from exc
            keys = [key for key in keys if key > after]
        limit = int(query.get("limit") or 0)
        if 0 < limit < len(keys):
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(keys[limit - 1]).encode())
            metadata["continue"] = metadata["continue"].decode()
            metadata["remainingItemCount"] = len(keys) - limit
            keys = keys[:limit]
        items = []
        for key in keys:
            item = copy.deepcopy(store[key])
            # Like the real API, list items carry no apiVersion/kind of their own.
            item.pop("apiVersion", None)
            item.pop("kind", None)
            items.append(item)
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": metadata,
            "items": items,
        }

    def _watch(
        self, kind: ResourceKind, namespace: str | None, query: Mapping[str, str]
    ) -> Response:
        with self._lock:
            selected = self._selection(kind, namespace, query)
            since = query.get("resourceVersion") or "0"
            initial: list[Json] = []
            expired = False
            if since == "0":
                store = self._store[kind.plural]
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(store[key])}
                    for key in sorted(store)
                    if selected(store[key])
                ]
                last = self._revision
            else:
                try:
                    last = int(since)
                except ValueError as exc:
                    raise bad_request(f"invalid resourceVersion {since!r}") from exc
                oldest = self._event_versions[0] if self._event_versions else self._revision + 1
                if last < oldest - 1:
                    # As on Kubernetes: HTTP 200, one ERROR event carrying a 410 Status, the end.
                    gone = ApiFailure(
                        410, "Expired", f"too old resource version: {last} ({oldest - 1})"
                    )
                    initial, expired = [{"type": "ERROR", "object": gone.status()}], True
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None

        async def stream() -> AsyncIterator[bytes]:
            cursor = last
            for event in initial:
                yield json.dumps(event).encode() + b"\n"
            deadline = None if timeout is None else time.monotonic() + timeout
            while not (expired or self._stopping) and (
                deadline is None or time.monotonic() < deadline
            ):
                with self._lock:
                    batch = self._events[bisect_right(self._event_versions, cursor) :]
                for event in batch:
                    cursor = event.resource_version
                    line = _watch_line(event, kind, selected)
                    if line is not None:
                        yield line
                await asyncio.sleep(WATCH_POLL)

        return StreamingResponse(stream(), media_type="application/json")

    # --- configmaps and leases: objects kept as clients write them -----------------------------

    def _check_delete_preconditions(self, kind: ResourceKind, key: Key, body: bytes) -> None:
        if not body.strip():
            return
        options = _parse(body)
        preconditions = options.get("preconditions") or {}
        current = self._store[kind.plural].get(key)
        if current is None:
            raise not_found(kind, key[1])
        meta = current["metadata"]
        if preconditions.get("uid") not in (None, meta["uid"]):
            why = f"Precondition failed: UID in precondition: {preconditions['uid']}, "
            raise conflict(kind, key[1], why + f"UID in object meta: {meta['uid']}")
        version = preconditions.get("resourceVersion")
        if version not in (None, meta["resourceVersion"]):
            why = f"Precondition failed: ResourceVersion in precondition: {version}, "
            raise conflict(
                kind, key[1], why + f"ResourceVersion in object meta: {meta['resourceVersion']}"
            )

    def _clean(self, kind: ResourceKind, body: Any, namespace: str, name: str | None) -> Json:
        """Check an object from a client (400 for wrong shapes, 422 for invalid values) and
        keep only the fields a client may set."""
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
        if meta.get("namespace") not in (None, "", namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        if name is not None and meta.get("name") not in (None, "", name):
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        content, content_causes = (
            _lease_content(body) if kind is LEASES else _configmap_content(body)
        )
        for part in ("labels", "annotations"):
            value = meta.get(part)
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            ):
                raise bad_request(f"metadata.{part} must map strings to strings")
        final_name = name or meta.get("name")
        if not final_name and meta.get("generateName"):
            final_name = f"{meta['generateName']}{secrets.token_hex(3)[:5]}"
        causes: list[tuple[str, str]] = []
        if not final_name:
            causes.append(("metadata.name", "Required value: name or generateName is required"))
        elif len(final_name) > 253 or not _DNS_SUBDOMAIN.match(final_name):
            causes.append(
                (
                    "metadata.name",
                    f'Invalid value: "{final_name}": a lowercase RFC 1123 subdomain must consist '
                    "of lower case alphanumeric characters, '-' or '.', and must start and end "
                    "with an alphanumeric character",
                )
            )
        causes += content_causes
        if causes:
            raise invalid(kind, final_name or "", causes)
        # Empty maps and lists are dropped, as Go's `omitempty` does on the real API server.
        cleaned_meta = {
            k: copy.deepcopy(meta[k])
            for k in ("labels", "annotations", "ownerReferences", "finalizers", "generateName")
            if meta.get(k)
        }
        return {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "metadata": {"name": final_name, "namespace": namespace, **cleaned_meta},
            **content,
        }

    def _create(self, kind: ResourceKind, namespace: str, body: Any, dry_run: bool) -> Json:
        obj = self._clean(kind, body, namespace, None)
        version = ((body.get("metadata") or {}).get("resourceVersion") or "").strip()
        if version.isdigit() and int(version) != 0:
            raise ApiFailure(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        key = (namespace, obj["metadata"]["name"])
        if key in self._store[kind.plural]:
            raise already_exists(kind, key[1])
        obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=_timestamp())
        if dry_run:
            obj["metadata"]["resourceVersion"] = ""
            return obj
        self._write(kind, key, obj)
        return copy.deepcopy(obj)

    def _update(self, kind: ResourceKind, key: Key, body: Any, dry_run: bool) -> Json:
        old = self._store[kind.plural][key]
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        version = meta.get("resourceVersion")
        if not version and kind in UPDATE_NEEDS_VERSION:
            # Such a kind's strategy refuses unconditional updates (AllowUnconditionalUpdate
            # false), with the resource, not the kind, in the message.
            raise ApiFailure(
                422,
                "Invalid",
                f'{kind.qualified} "{key[1]}" is invalid: metadata.resourceVersion: Invalid '
                "value: 0x0: must be specified for an update",
                {
                    **_details(kind, key[1]),
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: 0x0: must be specified for an update",
                            "field": "metadata.resourceVersion",
                        }
                    ],
                },
            )
        if version and version != old["metadata"]["resourceVersion"]:
            raise conflict(kind, key[1])
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            why = f"Precondition failed: UID in precondition: {meta['uid']}, "
            raise conflict(kind, key[1], why + f"UID in object meta: {old['metadata']['uid']}")
        obj = self._clean(kind, body, *key)
        if old.get("immutable"):
            causes = [
                (part, "Forbidden: field is immutable when `immutable` is set")
                for part in ("data", "binaryData")
                if obj.get(part) != old.get(part)
            ]
            if not obj.get("immutable"):
                causes.append(
                    ("immutable", "Forbidden: field is immutable when `immutable` is set")
                )
            if causes:
                raise invalid(kind, key[1], causes)
        obj["metadata"].update(
            uid=old["metadata"]["uid"],
            creationTimestamp=old["metadata"]["creationTimestamp"],
            resourceVersion=old["metadata"]["resourceVersion"],
        )
        if obj == old or dry_run:
            return copy.deepcopy(obj)
        self._write(kind, key, obj)
        return copy.deepcopy(obj)

    def _replace(self, kind: ResourceKind, key: Key, body: Any, dry_run: bool) -> tuple[int, Json]:
        if key in self._store[kind.plural]:
            return 200, self._update(kind, key, body, dry_run)
        if kind not in CREATE_ON_UPDATE:
            raise not_found(kind, key[1])
        # A PUT creates a Lease that does not exist (AllowCreateOnUpdate); the storage's
        # precondition on the uid, if the client sent one, fails against "nothing".
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        if meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
            raise conflict(kind, key[1], why)
        fresh = {**body, "metadata": {**meta, "name": key[1], "resourceVersion": None}}
        return 201, self._create(kind, key[0], fresh, dry_run)

    def _patch(
        self, kind: ResourceKind, key: Key, content_type: str | None, body: bytes, dry_run: bool
    ) -> tuple[int, Json]:
        patch_type = (content_type or "").split(";")[0].strip()
        old = self._store[kind.plural].get(key)
        if patch_type == "application/apply-patch+yaml":
            # Server-side apply, simplified: create or merge; no field ownership, no conflicts.
            applied = _parse_yaml(body)
            if not isinstance(applied, dict) or not (
                applied.get("apiVersion") and applied.get("kind")
            ):
                raise bad_request("apply patches must set apiVersion and kind")
            if old is None:
                metadata = {**(applied.get("metadata") or {}), "name": key[1]}
                return 201, self._create(kind, key[0], {**applied, "metadata": metadata}, dry_run)
            return 200, self._update(kind, key, merge_patch(old, applied), dry_run)
        if old is None:
            raise not_found(kind, key[1])
        return 200, self._update(kind, key, _apply_patch(old, patch_type, body), dry_run)

    def _delete(self, kind: ResourceKind, key: Key, dry_run: bool) -> Json:
        obj = self._store[kind.plural].get(key)
        if obj is None:
            raise not_found(kind, key[1])
        if not dry_run:
            self._write(kind, key, None)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {**_details(kind, key[1]), "uid": obj["metadata"]["uid"]},
        }

    def _patch_pod(self, key: Key, content_type: str | None, body: bytes, dry_run: bool) -> Json:
        """Pods accept changes to their labels and annotations only (a real pod's spec is
        nearly immutable, and status goes through the status subresource)."""
        pod = self._pods.get(key)
        if pod is None:
            raise not_found(PODS, key[1])
        patch_type = (content_type or "").split(";")[0].strip()
        if patch_type == "application/apply-patch+yaml":
            raise ApiFailure(
                415, "UnsupportedMediaType", "the simulator does not server-side apply pods"
            )
        old = self._store["pods"][key]
        new = _apply_patch(old, patch_type, body)
        meta = new.get("metadata") or {}
        version = meta.get("resourceVersion")
        if version and version != old["metadata"]["resourceVersion"]:
            raise conflict(PODS, key[1])
        untouchable = ("labels", "annotations", "resourceVersion")
        changed_meta = {
            k
            for k in set(meta) | set(old["metadata"])
            if k not in untouchable and meta.get(k) != old["metadata"].get(k)
        }
        if changed_meta or new.get("spec") != old["spec"]:
            raise invalid(
                PODS,
                key[1],
                [
                    (
                        "spec" if not changed_meta else f"metadata.{sorted(changed_meta)[0]}",
                        "Forbidden: the simulator only lets pod labels and annotations change",
                    )
                ],
            )
        for part in ("labels", "annotations"):
            value = meta.get(part) or {}
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise bad_request(f"metadata.{part} must map strings to strings")
        if dry_run:
            return new
        pod.labels = dict(meta.get("labels") or {})
        pod.annotations = dict(meta.get("annotations") or {})
        self._commit_pod(pod)
        return copy.deepcopy(self._store["pods"][key])


# --- what a ConfigMap and a Lease may hold -------------------------------------------------------

Causes = list[tuple[str, str]]
INT32 = (-(2**31), 2**31 - 1)
LEASE_STRINGS = ("holderIdentity", "preferredHolder", "strategy")
LEASE_INTS = ("leaseDurationSeconds", "leaseTransitions")
LEASE_TIMES = ("acquireTime", "renewTime")
# metav1.MicroTime is parsed with the layout "2006-01-02T15:04:05.000000Z07:00": exactly six
# fractional digits, so "2026-01-01T00:00:00Z" is refused (400), as the real API server does.
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


def _configmap_content(body: Json) -> tuple[Json, Causes]:
    """`data`, `binaryData` and `immutable` of a ConfigMap (400 for wrong types), with the
    causes of a 422 for invalid keys and sizes."""
    for part in ("data", "binaryData"):
        value = body.get(part)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise bad_request(
                'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
                f"unmarshal into Go struct field ConfigMap.{part} of type map[string]string"
            )
    data, binary = body.get("data") or {}, body.get("binaryData") or {}
    causes: Causes = []
    for key in [*data, *binary]:
        if len(key) > 253 or not _CONFIGMAP_KEY.match(key):
            causes.append(
                (
                    f"data[{key}]",
                    f'Invalid value: "{key}": a valid config key must consist of alphanumeric '
                    "characters, '-', '_' or '.'",
                )
            )
    for key in set(data) & set(binary):
        causes.append(
            (f"data[{key}]", f'Invalid value: "{key}": duplicate of key present in binaryData')
        )
    size = sum(len(k) + len(v.encode()) for k, v in data.items()) + sum(
        len(k) + len(v) for k, v in binary.items()
    )
    if size > CONFIGMAP_MAX_BYTES:
        causes.append(("[]", f"Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes"))
    content = {part: copy.deepcopy(body[part]) for part in ("data", "binaryData") if body.get(part)}
    if body.get("immutable") is not None:
        content["immutable"] = body["immutable"]
    return content, causes


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


# --- small helpers -------------------------------------------------------------------------------


def _container(image: str) -> Json:
    return {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "kafka", "containerPort": 9092, "protocol": "TCP"}],
        "resources": {},
    }


def _container_id() -> str:
    return f"containerd://{secrets.token_hex(32)}"


def _json(code: int, obj: Json) -> Response:
    # Exactly "application/json": lightkube 1.0.1 compares the header verbatim before it turns
    # an error response into ApiError.
    return Response(json.dumps(obj).encode(), status_code=code, media_type="application/json")


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request(f"the body of the request was not valid JSON: {exc}") from exc


def _parse_yaml(body: bytes) -> Any:
    try:
        return yaml.safe_load(body)
    except yaml.YAMLError as exc:
        raise bad_request(f"the body of the request was not valid YAML: {exc}") from exc


def _apply_patch(old: Json, patch_type: str, body: bytes) -> Json:
    if patch_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        patch = _parse(body)
        if not isinstance(patch, dict):
            raise bad_request("a merge patch must be a JSON object")
        return merge_patch(old, patch)
    if patch_type == "application/json-patch+json":
        try:
            return json_patch(old, _parse(body))
        except ValueError as exc:
            raise ApiFailure(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: {exc}",
            ) from exc
    raise ApiFailure(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, "
        f"application/apply-patch+yaml (got {patch_type!r})",
    )


def _watch_line(
    event: _Event, kind: ResourceKind, selected: Callable[[Json], bool]
) -> bytes | None:
    """The watch event as the selector sees it: an object entering the selection is ADDED,
    one leaving it is DELETED."""
    if event.plural != kind.plural:
        return None
    now = selected(event.obj)
    before = event.old is not None and selected(event.old)
    if event.type == "MODIFIED":
        type_ = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else None
    else:
        type_ = event.type if now else None
    if type_ is None:
        return None
    return json.dumps({"type": type_, "object": event.obj}).encode() + b"\n"

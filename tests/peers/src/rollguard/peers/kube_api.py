"""The vocabulary of the Kubernetes API peer: its resources, the verbs it serves, its errors.

The peer (`rollguard.peers.kube.KubeSim`) is kept for what a real control plane cannot show on
demand (pods stuck in CrashLoopBackOff, ImagePullBackOff or Unschedulable; a StatefulSet of
1,000 pods); everything else runs on the real API server (`rollguard.peers.realkube`). It
serves the four resources `rollguard roll` touches, and on each only the verbs the roll uses:

    pods          get, list, delete
    statefulsets  get
    configmaps    get, create, update
    leases        get, create, update

Anything else that exists on a real API server (watch, every PATCH, server-side apply, delete of
a ConfigMap or Lease, list of anything but pods, list across namespaces, deletecollection) is
answered as a real API server answers a verb a resource does not serve: 405 MethodNotAllowed;
a resource it does not have (a SelfSubjectAccessReview: the roller then warns that it cannot
check its permissions) is 404 NotFound. Errors are `Status` objects with the `code`, `reason`,
`message` and `details` the real API server gives, because lightkube turns exactly those into
`ApiError` and the roller reads them.

Label selectors keep the whole grammar of the real API (`k=v`, `k==v`, `k!=v`, `k`, `!k`,
`k in (a,b)`, `k notin (a,b)`): a half grammar would answer a valid selector with a wrong 400
instead of an honest refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class ResourceKind:
    group: str
    version: str
    plural: str
    kind: str
    verbs: frozenset[str]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How Kubernetes names the resource in messages: `configmaps`, `statefulsets.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = ResourceKind("", "v1", "pods", "Pod", frozenset({"get", "list", "delete"}))
STATEFULSETS = ResourceKind("apps", "v1", "statefulsets", "StatefulSet", frozenset({"get"}))
CONFIGMAPS = ResourceKind(
    "", "v1", "configmaps", "ConfigMap", frozenset({"get", "create", "update"})
)
LEASES = ResourceKind(
    "coordination.k8s.io", "v1", "leases", "Lease", frozenset({"get", "create", "update"})
)
KINDS = {(k.group, k.version, k.plural): k for k in (PODS, STATEFULSETS, CONFIGMAPS, LEASES)}
STORED = (CONFIGMAPS, LEASES)  # kept as clients write them (pods and statefulsets are simulated)


# --- errors --------------------------------------------------------------------------------------


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
    found: Json = {"name": name, "kind": kind.plural}
    if kind.group:
        found["group"] = kind.group
    return found


def not_found(kind: ResourceKind, name: str) -> ApiFailure:
    return ApiFailure(404, "NotFound", f'{kind.qualified} "{name}" not found', _details(kind, name))


def already_exists(kind: ResourceKind, name: str) -> ApiFailure:
    message = f'{kind.qualified} "{name}" already exists'
    return ApiFailure(409, "AlreadyExists", message, _details(kind, name))


def conflict(kind: ResourceKind, name: str) -> ApiFailure:
    message = (
        f'Operation cannot be fulfilled on {kind.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return ApiFailure(409, "Conflict", message, _details(kind, name))


def bad_request(message: str) -> ApiFailure:
    return ApiFailure(400, "BadRequest", message)


def no_such_path() -> ApiFailure:
    return ApiFailure(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiFailure:
    return ApiFailure(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(content_type: str | None) -> ApiFailure:
    return ApiFailure(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json (got {content_type or 'none'!r})",
    )


# --- label selectors -----------------------------------------------------------------------------

Predicate = Callable[[Mapping[str, str]], bool]

_LABEL_KEY = re.compile(
    r"^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_REQUIREMENT = re.compile(r"^(?P<key>[^\s=!()]+)\s+(?P<op>in|notin)\s*\((?P<values>.*)\)$")
_COMPARE_REQUIREMENT = re.compile(r"^(?P<key>[^\s=!()]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^\s]*)$")


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

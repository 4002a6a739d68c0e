"""Nodes as pods, through the Kubernetes API (lightkube).

- Nodes: the pods matching `--selector` in `--namespace`. The node id comes from a label
  (`--node-id-label`) or, by default, the number at the end of the pod name (Strimzi's
  `<cluster>-<pool>-<id>` and a StatefulSet's `<name>-<ordinal>` both work). Roles come from
  Strimzi's `strimzi.io/broker-role` / `strimzi.io/controller-role` labels ("true"); a pod with
  neither is a broker.
- Agent URL: a template such as `https://{pod}.{service}.{namespace}.svc:8443`; `{service}` is
  --service or, by default, the pod's `spec.subdomain` (its headless service).
- Up to date: the pod's `controller-revision-hash` equals its StatefulSet's `updateRevision`,
  or Strimzi's `strimzi.io/revision` annotation is unchanged when no StatefulSet owns it.
- Ready: the pod's Ready condition. Stuck: a container waiting for a reason that waiting will not
  cure (CrashLoopBackOff, ImagePullBackOff...) or PodScheduled False with reason Unschedulable.
  A pod being deleted (deletionTimestamp) is not ready and has no identity yet: a new one comes.
- Process gone: the Kafka container terminated or crash-looping, or the pod Failed/Succeeded:
  the only proof that lets a node whose agent cannot be read be force-restarted.
- Errors: every `ApiError` and transport error is translated here, naming the call, the object
  and the API's own message (a 403 says which permission is missing): a `KubernetesUnavailable`
  (`RetryLater`) when the API did not answer or answered 429 or 5xx, else a `KubernetesRefused`
  (no category: what it was asked cannot be done, and the command stops).
- Restart: delete the pod; its controller makes a new one with a new UID.
- Opt-out: the annotation `rollguard.io/skip-restart: "true"`.
- The roll journal is kept in a ConfigMap `rollguard-roll-<id>`
  (`rollguard.roller.roll.stores.journal`).
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Any

import httpx
from lightkube import ApiError, AsyncClient
from lightkube import operators as op
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import Pod

from rollguard.roller.model import DEFAULT_AGENT_URL, STUCK_REASONS, Node, PlatformView, Role
from rollguard.roller.platform import PlatformUnavailable, RestartError
from rollguard.shared.errors import ConfigError, RollguardError

SKIP_ANNOTATION = "rollguard.io/skip-restart"
BROKER_ROLE_LABEL = "strimzi.io/broker-role"
CONTROLLER_ROLE_LABEL = "strimzi.io/controller-role"

logger = logging.getLogger(__name__)


def _http_errors() -> tuple[type[Exception], ...]:
    """lightkube 1.x sends its requests through httpx2 (its own dependency), older releases
    through httpx: a transport error of either is the API being unreachable."""
    try:
        import httpx2
    except ImportError:
        return (httpx.HTTPError,)
    return (httpx.HTTPError, httpx2.HTTPError)


HTTP_ERRORS = _http_errors()
API_ERRORS: tuple[type[Exception], ...] = (ApiError, *HTTP_ERRORS)


class KubernetesRefused(RollguardError):
    """The API answered no (403, 404, 409, 422...): asking again would bring the same."""


class KubernetesUnavailable(PlatformUnavailable):
    """The API server did not answer (stopped, restarting, unreachable) or answered 429 or
    5xx: the call may work shortly."""


# The answers that say "not now" rather than "no": throttled, or the server (or a proxy or
# load balancer before it) failing.
UNAVAILABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def prepare_decoders(*kinds: type[Any]) -> None:
    """Decode one object and one list of each resource kind a process uses, in one thread,
    before threads decode them side by side: msgspec (lightkube's decoder) builds a type's
    decoding information on its first use, and two threads doing that at once crashed a process
    (a segmentation fault in `decode_list` beside a first `apply`). The roller decodes in its
    event loop and, for its journal's ConfigMaps, in a worker thread at the same time."""
    from lightkube.core.decoders import decode_list, decode_object
    from lightkube.models.meta_v1 import Status
    from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
    from lightkube.resources.coordination_v1 import Lease
    from lightkube.resources.core_v1 import ConfigMap
    from msgspec import ValidationError

    decode_object(b'{"kind": "Status", "status": "Failure", "code": 404}', Status)
    every: tuple[type[Any], ...] = (Pod, StatefulSet, ConfigMap, Lease, SelfSubjectAccessReview)
    for kind in (*every, *kinds):
        for decode, data in (
            (decode_object, b'{"metadata": {"name": "x"}}'),
            (decode_list, b'{"metadata": {}, "items": [{"metadata": {"name": "x"}}]}'),
        ):
            # The type's information is built before the data is checked against it.
            with contextlib.suppress(ValidationError):
                decode(data, kind)


def api_error(what: str, exc: Exception) -> KubernetesRefused | KubernetesUnavailable:
    if isinstance(exc, ApiError):
        status = exc.status
        kind = KubernetesUnavailable if status.code in UNAVAILABLE_STATUSES else KubernetesRefused
        return kind(f"Kubernetes API: {what}: {status.code} {status.reason}: {status.message}")
    return KubernetesUnavailable(f"Kubernetes API: {what}: {type(exc).__name__}: {exc}")


async def get_or_none(client: Any, kind: Any, name: str, namespace: str) -> Any:
    """The object (`client`: a lightkube AsyncClient), None when it does not exist; any other
    failure as `api_error` says it (`get configmap NAME: ...`)."""
    what = f"get {kind.__name__.lower()} {name}"
    try:
        return await client.get(kind, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise api_error(what, exc) from exc
    except API_ERRORS as exc:
        raise api_error(what, exc) from exc


class AllowedCalls:
    """The kinds of call (`verb resource`) the API server has allowed once. An API server that
    has just started answers 403 until its RBAC authorizer has read the Roles and bindings
    (seen here: for a few seconds after a restart): a 403 on a call allowed before is taken for
    that, `KubernetesUnavailable`, and waited out as an outage is; a 403 on a call never
    allowed is the Role's, a `KubernetesRefused` at once."""

    def __init__(self) -> None:
        self._kinds: set[str] = set()

    def allowed(self, kind: str) -> None:
        self._kinds.add(kind)

    def error(
        self, kind: str, what: str, exc: Exception
    ) -> KubernetesRefused | KubernetesUnavailable:
        error = api_error(what, exc)
        if isinstance(exc, ApiError) and exc.status.code == 403 and kind in self._kinds:
            return KubernetesUnavailable(
                f"{error} (allowed before: an API server that has just started refuses until "
                "its authorizer has read the RBAC objects)"
            )
        return error


def parse_selector(text: str) -> dict[str, Any]:
    """`a=b,c!=d,e,!f` into lightkube selector pairs; ConfigError for what it cannot express."""
    pairs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if " in " in part or " notin " in part or "(" in part:
            raise ConfigError(
                f"--selector: set-based term {part!r} is not supported; use "
                "equality terms (k=v, k!=v, k, !k)"
            )
        if "!=" in part:
            key, value = part.split("!=", 1)
            pairs[key.strip()] = op.not_equal(value.strip())
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            pairs[key.strip()] = op.equal(value.strip())
        elif part.startswith("!"):
            pairs[part[1:].strip()] = op.not_exists()
        else:
            pairs[part] = op.exists()
    if not pairs:
        raise ConfigError("--selector is empty")
    return pairs


@dataclass(frozen=True, slots=True)
class KubernetesSettings:
    namespace: str
    selector: str
    agent_url: str = DEFAULT_AGENT_URL
    service: str = ""
    node_id_label: str | None = None
    broker_role_label: str = BROKER_ROLE_LABEL
    controller_role_label: str = CONTROLLER_ROLE_LABEL


class KubernetesPlatform:
    def __init__(self, client: AsyncClient, settings: KubernetesSettings) -> None:
        self.client = client
        self.settings = settings
        self._selector = parse_selector(settings.selector)
        self._revisions: dict[str, str] = {}
        self._announced = ""  # the service read from the pods, said once
        self._allowed = AllowedCalls()

    def _node(self, pod: Pod) -> Node:
        meta = pod.metadata
        assert meta is not None and meta.name is not None
        labels = meta.labels or {}
        if self.settings.node_id_label:
            raw = labels.get(self.settings.node_id_label)
            if raw is None or not raw.isdigit():
                raise ConfigError(
                    f"pod {meta.name} has no numeric label {self.settings.node_id_label}"
                )
            node_id = int(raw)
        else:
            match = re.search(r"(\d+)$", meta.name)
            if match is None:
                raise ConfigError(
                    f"pod {meta.name}: no node id at the end of its name; set --node-id-label"
                )
            node_id = int(match.group(1))
        roles = set()
        if labels.get(self.settings.broker_role_label) == "true":
            roles.add(Role.BROKER)
        if labels.get(self.settings.controller_role_label) == "true":
            roles.add(Role.CONTROLLER)
        url = self.settings.agent_url.format(
            pod=meta.name, service=self._service(pod), namespace=self.settings.namespace
        )
        return Node(node_id, meta.name, frozenset(roles or {Role.BROKER}), url)

    def _service(self, pod: Pod) -> str:
        """The headless service of `{service}`: --service, else the pod's own `spec.subdomain`
        (a StatefulSet's pods, and Strimzi's, carry it: their DNS names are
        `<pod>.<subdomain>.<namespace>.svc`). Neither, while the template needs it: ConfigError,
        for a URL with an empty label resolves nowhere."""
        if self.settings.service or "{service}" not in self.settings.agent_url:
            return self.settings.service
        assert pod.metadata is not None
        subdomain = pod.spec.subdomain if pod.spec is not None else None
        if not subdomain:
            raise ConfigError(
                f"--agent-url {self.settings.agent_url} needs {{service}}, and pod "
                f"{pod.metadata.name} names no headless service (no spec.subdomain): give "
                "--service NAME (the brokers' headless service) or an --agent-url without "
                "{service}"
            )
        if self._announced != subdomain:
            self._announced = subdomain
            logger.info(
                "agent URLs use the headless service %s (the pods' spec.subdomain; --service "
                "sets another)",
                subdomain,
            )
        return subdomain

    async def nodes(self) -> list[Node]:
        try:
            pods = [
                pod
                async for pod in self.client.list(
                    Pod, namespace=self.settings.namespace, labels=self._selector
                )
            ]
        except API_ERRORS as exc:
            what = f"list pods in {self.settings.namespace}"
            raise self._allowed.error("list pods", what, exc) from exc
        self._allowed.allowed("list pods")
        if not pods:
            raise ConfigError(
                f"no pods match --selector {self.settings.selector!r} in "
                f"namespace {self.settings.namespace}"
            )
        return sorted((self._node(p) for p in pods), key=lambda n: n.node_id)

    async def _desired_revision(self, pod: Pod) -> str | None:
        owners = (pod.metadata.ownerReferences or []) if pod.metadata else []
        owner = next((o for o in owners if o.kind == "StatefulSet"), None)
        if owner is None:
            return None
        try:
            sts = await self.client.get(StatefulSet, owner.name, namespace=self.settings.namespace)
        except API_ERRORS as exc:
            what = f"get statefulset {owner.name}"
            raise self._allowed.error("get statefulsets", what, exc) from exc
        self._allowed.allowed("get statefulsets")
        return sts.status.updateRevision if sts.status else None

    async def observe(self, node: Node) -> PlatformView:
        try:
            pod = await self.client.get(Pod, node.name, namespace=self.settings.namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return PlatformView(exists=False, ready=False, up_to_date=True)
            raise self._allowed.error("get pods", f"get pod {node.name}", exc) from exc
        except HTTP_ERRORS as exc:
            raise api_error(f"get pod {node.name}", exc) from exc
        self._allowed.allowed("get pods")
        meta, status = pod.metadata, pod.status
        assert meta is not None
        labels, annotations = meta.labels or {}, meta.annotations or {}
        ready = any(
            c.type == "Ready" and c.status == "True"
            for c in (status.conditions or [] if status else [])
        )
        stuck = None
        for condition in (status.conditions or []) if status else []:
            if (
                condition.type == "PodScheduled"
                and condition.status == "False"
                and condition.reason == "Unschedulable"
            ):
                stuck = "Unschedulable"
        gone = status is not None and status.phase in ("Failed", "Succeeded")
        for container in (status.containerStatuses or []) if status else []:
            waiting = container.state.waiting if container.state else None
            if waiting is not None and waiting.reason in STUCK_REASONS:
                stuck = waiting.reason
            if waiting is not None and waiting.reason == "CrashLoopBackOff":
                gone = True
            if container.state is not None and container.state.terminated is not None:
                gone = True
        deleting = meta.deletionTimestamp is not None
        desired = await self._desired_revision(pod)
        current = labels.get("controller-revision-hash")
        if desired is not None:
            up_to_date = current == desired
        else:
            revision = annotations.get("strimzi.io/revision", "")
            seen = self._revisions.setdefault(node.name, revision)
            up_to_date = seen == revision and bool(revision)
        return PlatformView(
            exists=True,
            ready=ready and not deleting,
            up_to_date=up_to_date,
            stuck=stuck,
            # A pod being deleted is on its way out: its identity is no longer the node's.
            instance=None if deleting else meta.uid,
            opted_out=annotations.get(SKIP_ANNOTATION, "").lower() == "true",
            process_gone=gone,
        )

    async def restart(self, node: Node, *, kafka_version: str | None = None) -> None:
        """Delete the pod; its controller makes it again from its template (with
        `kafka_version`, the template's image is the change: the roll checks what it runs)."""
        try:
            await self.client.delete(Pod, node.name, namespace=self.settings.namespace)
        except API_ERRORS as exc:
            raise RestartError(str(api_error(f"delete pod {node.name}", exc))) from exc

    async def restart_pending(self, node: Node) -> bool:
        """A pod being deleted has no identity (see `observe`): resume waits for its successor."""
        return False

    async def close(self) -> None:
        await self.client.close()

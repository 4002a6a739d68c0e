"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, real paths, real JSON.

Kubernetes cannot run where rollguard's tests run, yet the roller talks to it through lightkube:
it lists a StatefulSet's pods by label, gets a pod and its StatefulSet, deletes a pod, and waits
until the pod comes back with a new uid, the StatefulSet's update revision and a Ready
condition; it keeps its journal (and the Connect watcher its state) in a ConfigMap and its
one-roll-at-a-time lock in a Lease, both guarded by resourceVersion. Mocking lightkube would
test rollguard against our idea of lightkube. Instead `KubeSim` serves the API paths, content
types and JSON that lightkube sends and decodes (strictly typed, with msgspec), so the real
`lightkube.Client` and `lightkube.AsyncClient` run unmodified against it.

It serves exactly what the roller uses, and no more (the modules beside this one say how):

- `kube_api`: the resources and verbs served (pods get/list/delete, statefulsets get,
  configmaps and leases get/create/update), `Status` errors, label selectors;
- `kube_objects`: the store with its resourceVersion, ConfigMaps and Leases as clients write
  them (409 Conflict on a stale replace, 422 Invalid, a Lease's own update strategy);
- `kube_model` and `kube_pods`: StatefulSet pods and their life (deletion, recreation,
  readiness, waiting reasons, CrashLoopBackOff, Unschedulable), the StatefulSet's status.

What a real API server has and the roller does not use is answered as a real server answers a
request it does not serve, at once: another verb (watch, PATCH of any kind including server-side
apply, DELETE of a ConfigMap or Lease, a list across namespaces) is 405 MethodNotAllowed; a
body that is not `application/json` is 415 UnsupportedMediaType; a query option other than
`labelSelector` on a list (fieldSelector, limit/continue, dryRun, gracePeriodSeconds, ...) and
DeleteOptions in a body are 400 BadRequest, rather than silently ignored.

Tests steer and observe it: `on_request` sees each request before it is answered and `edit`
changes a stored object as a concurrent writer would, so a test can put a write between a
client's read and its update; `forbidden` holds (verb, resource) pairs answered 403 as RBAC
does; with `token` set, requests must carry `Authorization: Bearer <token>` (else 401).
Errors are served as exactly `application/json`: lightkube only turns an error into `ApiError`
for that exact content type.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import uvicorn
from lightkube import KubeConfig
from lightkube.config.models import Cluster, User
from starlette.requests import Request
from starlette.responses import Response

from rollguard.peers.kube_api import (
    KINDS,
    STORED,
    ApiFailure,
    Json,
    ResourceKind,
    bad_request,
    forbidden,
    method_not_allowed,
    no_such_path,
    not_found,
    parse_label_selector,
    unsupported_media_type,
)
from rollguard.peers.kube_model import Deletion
from rollguard.peers.kube_pods import Workloads
from rollguard.peers.processes import wait_until

__all__ = ["Deletion", "KubeSim", "SeenRequest", "parse_label_selector"]

logger = logging.getLogger(__name__)

_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?$"
)


class SeenRequest(NamedTuple):
    """One request the simulator answered, for assertions on what a client really sent."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None


class KubeSim(Workloads):
    """A fake Kubernetes API server; see the module docstring for what it serves.

    `ready_after` and `recreate_after` are seconds; `ready_after=math.inf` means a recreated pod
    never becomes Ready by itself (call `set_ready`). `on_delete(name)` is called when a pod is
    deleted (the "kubelet" stops it), `on_start(name)` when a recreated pod's container starts
    running; both run on the lifecycle thread. A pod reappears no earlier than `on_delete`
    returns.
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
        super().__init__(
            recreate_after=recreate_after,
            ready_after=ready_after,
            container_creating=container_creating,
            terminate_after=terminate_after,
            on_delete=on_delete,
            on_start=on_start,
        )
        self.token = token
        self.requests: list[SeenRequest] = []
        # Called on the HTTP thread before a request is answered, e.g. to `edit` an object
        # between a client's read and its write: a race that must not be left to timing.
        self.on_request: Callable[[SeenRequest], object] | None = None
        # (verb, plural) pairs the client's account may not use: answered 403 as RBAC does.
        self.forbidden: set[tuple[str, str]] = set()
        # While it returns True, every request is answered 503 ServiceUnavailable, as an API
        # server behind a load balancer answers while it restarts or loses etcd.
        self.unavailable: Callable[[], bool] = lambda: False
        self.url = ""
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
            threading.Thread(target=self._lifecycle.run, name="kube-sim-lifecycle", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        wait_until(
            lambda: server.started, timeout=10, interval=0.01, what="the fake Kubernetes API"
        )
        logger.info("fake Kubernetes API serving on %s", self.url)
        return self

    def stop(self) -> None:
        self._lifecycle.stop()
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
            if self.unavailable():
                raise ApiFailure(503, "ServiceUnavailable", "the server is currently unavailable")
            if self.token is not None and (
                request.headers.get("authorization") != f"Bearer {self.token}"
            ):
                raise ApiFailure(401, "Unauthorized", "Unauthorized")
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
            elif method == "DELETE" and name is None:
                verb = "deletecollection"
            # As on Kubernetes, authorization comes before the handler: a verb the peer does
            # not serve is still 403 for an account that may not use it.
            if (verb, kind.plural) in self.forbidden:
                raise forbidden(verb, kind, namespace, name)
            # Only create goes to the collection; update, delete and get name an object.
            named = verb in ("get", "update", "delete")
            if verb not in kind.verbs or namespace is None or named != (name is not None):
                raise method_not_allowed()
            body = await request.body()
            with self._lock:
                code, answer = self._dispatch(
                    verb, kind, (namespace, name), query, content_type, body
                )
            return _json(code, answer)
        except ApiFailure as failure:
            return _json(failure.code, failure.status())
        except Exception as exc:
            logger.exception("fake Kubernetes: %s %s failed", method, path)
            return _json(500, ApiFailure(500, "InternalError", repr(exc)).status())

    def _dispatch(
        self,
        verb: str,
        kind: ResourceKind,
        where: tuple[str, str | None],
        query: Mapping[str, str],
        content_type: str | None,
        body: bytes,
    ) -> tuple[int, Json]:
        """Answer a verb `kind` serves. Caller holds the lock."""
        namespace, name = where
        for option in query:
            if not (verb == "list" and option == "labelSelector"):
                raise bad_request(
                    f"query parameter {option!r} is not supported by this simulated API server"
                )
        if verb == "list":
            return 200, self._list(kind, namespace, query.get("labelSelector", ""))
        if verb in ("create", "update"):
            if (content_type or "").split(";")[0].strip() != "application/json":
                raise unsupported_media_type(content_type)
            assert kind in STORED
            if verb == "create":
                return 201, self._create(kind, namespace, _parse(body))
            assert name is not None
            return self._replace(kind, (namespace, name), _parse(body))
        assert name is not None
        if verb == "delete":
            if body.strip():
                raise bad_request("DeleteOptions are not supported by this simulated API server")
            return 200, self._delete_pod((namespace, name))
        obj = self._store[kind.plural].get((namespace, name))
        if obj is None:
            raise not_found(kind, name)
        return 200, copy.deepcopy(obj)

    def _list(self, kind: ResourceKind, namespace: str, selector: str) -> Json:
        try:
            selected = parse_label_selector(selector)
        except ValueError as exc:
            raise bad_request(f"unable to parse requirement: {exc}") from exc
        store = self._store[kind.plural]
        items = []
        for key in sorted(store):
            obj = store[key]
            if key[0] == namespace and selected(obj["metadata"].get("labels") or {}):
                item = copy.deepcopy(obj)
                # Like the real API, list items carry no apiVersion/kind of their own.
                item.pop("apiVersion", None)
                item.pop("kind", None)
                items.append(item)
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": {"resourceVersion": str(self._revision)},
            "items": items,
        }


def _json(code: int, obj: Json) -> Response:
    # Exactly "application/json": lightkube 1.0.1 compares the header verbatim before it turns
    # an error response into ApiError.
    return Response(json.dumps(obj).encode(), status_code=code, media_type="application/json")


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request(f"the body of the request was not valid JSON: {exc}") from exc

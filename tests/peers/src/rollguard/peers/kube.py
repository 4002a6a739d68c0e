"""A fake Kubernetes API server, for what a real control plane cannot show on demand.

The roller's Kubernetes tests run on a real kube-apiserver (`rollguard.peers.realkube`). This
peer is kept for the few cases a real control plane cannot be made to show when a test wants
them: a pod whose container crash-loops (CrashLoopBackOff), whose image does not pull
(ImagePullBackOff), that cannot be scheduled (Unschedulable), and a StatefulSet of 1,000 pods.
`rollguard roll` runs against it with the real lightkube client (test_roll_kubernetes_peer.py),
so it serves real HTTP on 127.0.0.1 with the API paths, content types and JSON that lightkube
sends and decodes, and everything that roll touches, and no more (the modules beside this one
say how):

- `kube_api`: the resources and verbs served (pods get/list/delete, statefulsets get,
  configmaps and leases get/create/update), `Status` errors, label selectors;
- `kube_objects`: the store with its resourceVersion; the roll journal's ConfigMap and the
  roll's Lease as the roll writes them (409 Conflict on a stale replace);
- `kube_model` and `kube_pods`: StatefulSet pods and their life (deletion, recreation,
  readiness, waiting reasons, Unschedulable), the StatefulSet's status and revisions.

What a real API server has and the roll does not use is answered as a real server answers a
request it does not serve, at once: another verb (watch, PATCH of any kind including server-side
apply, DELETE of a ConfigMap or Lease, a list across namespaces) is 405 MethodNotAllowed; a
resource it does not have (a SelfSubjectAccessReview, with which the roller checks its
permissions: it warns that it cannot) is 404 NotFound; a body that is not `application/json` is
415 UnsupportedMediaType; a query option other than `labelSelector` on a list (fieldSelector,
limit/continue, dryRun, gracePeriodSeconds, ...) and DeleteOptions in a body are 400
BadRequest, rather than silently ignored. Any credentials are accepted, none are required.
Errors are served as exactly `application/json`: lightkube only turns an error into `ApiError`
for that exact content type.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from starlette.requests import Request
from starlette.responses import Response

from rollguard.peers.kube_api import (
    KINDS,
    STORED,
    ApiFailure,
    Json,
    ResourceKind,
    bad_request,
    method_not_allowed,
    no_such_path,
    not_found,
    parse_label_selector,
    unsupported_media_type,
)
from rollguard.peers.kube_model import Deletion
from rollguard.peers.kube_pods import Workloads
from rollguard.peers.served import Served

__all__ = ["Deletion", "KubeSim", "parse_label_selector"]

logger = logging.getLogger(__name__)

_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?$"
)


class KubeSim(Workloads):
    """A fake Kubernetes API server; see the module docstring for what it serves.

    `recreate_after` and `ready_after` are seconds (see `kube_pods`). `on_delete(name)` is
    called when a pod is deleted (the "kubelet" stops it), `on_start(name)` when a recreated
    pod's container starts running; both run on the lifecycle thread. A pod reappears no
    earlier than `on_delete` returns. `deletions` lists the DELETEs of pods, in order.
    """

    def __init__(
        self,
        *,
        recreate_after: float = 0.2,
        ready_after: float = 0.3,
        on_delete: Callable[[str], object] | None = None,
        on_start: Callable[[str], object] | None = None,
    ) -> None:
        super().__init__(
            recreate_after=recreate_after,
            ready_after=ready_after,
            on_delete=on_delete,
            on_start=on_start,
        )
        self.url = ""
        self._served: Served | None = None
        self._lifecycle_thread: threading.Thread | None = None
        self._client: Client | None = None

    # --- running ---------------------------------------------------------------------------------

    def start(self) -> KubeSim:
        self._served = Served(self._asgi, "kube-sim-http")
        self.url = self._served.url
        self._lifecycle_thread = threading.Thread(
            target=self._lifecycle.run, name="kube-sim-lifecycle", daemon=True
        )
        self._lifecycle_thread.start()
        logger.info("fake Kubernetes API serving on %s", self.url)
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        self._lifecycle.stop()
        if self._served is not None:
            self._served.stop()
        if self._lifecycle_thread is not None:
            self._lifecycle_thread.join(10)

    def kubeconfig(self, folder: Path, namespace: str) -> Path:
        """A kubeconfig for this server (any token: none is checked), `namespace` its default:
        `folder/kubeconfig` (JSON being YAML)."""
        path = folder / "kubeconfig"
        path.write_text(json.dumps(self._config(namespace), indent=2))
        return path

    def client(self) -> Client:
        """A lightkube client of this server (the test's own eyes on what the roll wrote), made
        once, closed by `stop`."""
        if self._client is None:
            self._client = Client(KubeConfig.from_dict(self._config("default")))
        return self._client

    def _config(self, namespace: str) -> Json:
        context = {"cluster": "sim", "user": "sim", "namespace": namespace}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": self.url}}],
            "users": [{"name": "sim", "user": {"token": "test"}}],
            "contexts": [{"name": "sim", "context": context}],
        }

    def __enter__(self) -> KubeSim:
        return self if self._served is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
        try:
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
            return 200, self._replace(kind, (namespace, name), _parse(body))
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
        # Like the real API, list items carry no apiVersion/kind of their own. Stored objects
        # are never changed in place, so the items share their parts (a deep copy of 1,000
        # pods would hold the lock for a noticeable time).
        items = [
            {k: v for k, v in store[key].items() if k not in ("apiVersion", "kind")}
            for key in sorted(store)
            if key[0] == namespace and selected(store[key]["metadata"].get("labels") or {})
        ]
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

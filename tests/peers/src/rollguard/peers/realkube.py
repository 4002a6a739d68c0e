"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok as local processes, every port on 127.0.0.1.

The roller restarts brokers through lightkube; only a real API server proves RBAC, admission,
the StatefulSet controller's answer to a deleted pod and what lightkube really receives
(`kube.KubeSim`, the API peer, is left only what this cannot show on demand: stuck pods, scale).
No kubelet runs here and no container: kwok plays the
kubelet of one node (`realkube_objects`: a pod is Ready at once, or held NotReady on demand with
`hold_not_ready` until `clear_not_ready`). Pods get addresses of their own in 127.0.0.0/8
(kwok's `--cidr`, a /16 of its own per control plane), all loopback here, so a local process can
listen on a pod's address.

The binaries come from `make kube` (`realkube_binaries`: the pins, the cache, and
`KubeBinariesMissing` naming the missing one); each process's command line is in
`realkube_processes`.

Security as a cluster has it (`realkube_pki`): the API server serves TLS with a certificate of a
CA made for this control plane, authorizes with `Node,RBAC`, signs service-account tokens with a
key pair of its own; components and users authenticate with client certificates of that CA (the
admin is in `system:masters`). `user_kubeconfig` makes a user with no rights but those a test
binds.

Start-up (`start`) is etcd, then the API server once etcd answers, then the controller manager,
scheduler and kwok side by side once the API server is ready, then the node; each wait polls a
health endpoint against a deadline. Once up, the controller manager, scheduler and kwok are
started again if one exits (`restarts` counts it), as a kubelet restarts static pods.
`stop_apiserver` / `start_apiserver` take the API server alone down and up (2 s, 3 s here).
`stop()` ends every process by its PID, SIGTERM then SIGKILL, also when `start` fails half way;
processes left at interpreter exit are killed.
"""

from __future__ import annotations

import json
import random
import signal
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from lightkube import Client, KubeConfig
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import Namespace, Node, Pod, Secret, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, Role, RoleBinding

from rollguard.peers import realkube_objects as objects
from rollguard.peers.processes import free_port, startup_slot, wait_until
from rollguard.peers.realkube_binaries import (
    NEWEST,
    OLDER,
    VERSIONS,
    Binaries,
    KubeBinariesMissing,
)
from rollguard.peers.realkube_objects import NODE, READY_ANNOTATION, pod_ready
from rollguard.peers.realkube_pki import Issued, issue, write_kubeconfig, write_pki
from rollguard.peers.realkube_processes import Component, build_components
from rollguard.roller.kubernetes import prepare_decoders

# The names tests use, wherever they are defined.
__all__ = [
    "NEWEST",
    "NODE",
    "OLDER",
    "READY_ANNOTATION",
    "VERSIONS",
    "Binaries",
    "Component",
    "ControlPlane",
    "KubeBinariesMissing",
    "pod_ready",
]

T = TypeVar("T")

_CIDRS: set[int] = set()
_CIDR_LOCK = threading.Lock()


def _pod_cidr() -> str:
    """A /16 of 127.0.0.0/8 no other control plane of this process uses (drawn at random, so
    that the pytest workers' control planes rarely share one either)."""
    with _CIDR_LOCK:
        second = random.choice([n for n in range(2, 255) if n not in _CIDRS])
        _CIDRS.add(second)
    return f"127.{second}.0.0/16"


class ControlPlane:
    """etcd, the API server, controller manager, scheduler and kwok in `folder`."""

    def __init__(
        self,
        folder: Path,
        version: str = NEWEST,
        *,
        binaries: Binaries | None = None,
        cidr: str | None = None,
    ) -> None:
        self.folder = folder
        self.version = version
        self.binaries = binaries or Binaries.find(version)
        self.cidr = cidr or _pod_cidr()
        self.pki = folder / "pki"
        self.ports = {
            name: free_port()
            for name in (
                "etcd",
                "etcd-peer",
                "apiserver",
                "controller-manager",
                "scheduler",
                "kwok",
            )
        }
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.admin_kubeconfig = folder / "admin.kubeconfig"
        self.timings: dict[str, float] = {}
        self._ca: Issued | None = None
        self._client: Client | None = None
        self._http: urllib.request.OpenerDirector | None = None
        # How often each supervised process was started again after it exited by itself.
        self.restarts = dict.fromkeys(("kube-controller-manager", "kube-scheduler", "kwok"), 0)
        self._supervisor: threading.Thread | None = None
        self._stopping = threading.Event()
        self.etcd, self.apiserver, self.controller_manager, self.scheduler, self.kwok = (
            build_components(folder, self.pki, self.ports, self.binaries, self.cidr)
        )

    @property
    def components(self) -> tuple[Component, ...]:
        return (self.etcd, self.apiserver, self.controller_manager, self.scheduler, self.kwok)

    # ---- start and stop

    def start(self, timeout: float = 120) -> ControlPlane:
        """Start everything and wait until the node is Ready; on any failure stop what started.
        In a start-up slot (`startup_slot`), whose wait is not counted in `timeout`."""
        with startup_slot(f"a Kubernetes control plane in {self.folder}"):
            return self._start(timeout)

    def _start(self, timeout: float) -> ControlPlane:
        began = time.monotonic()
        deadline = began + timeout
        try:
            (self.folder / "kwok").mkdir(parents=True, exist_ok=True)
            self.etcd.start()  # it needs no certificates: they are made while it starts
            self._write_pki()
            self._wait_healthy(self.etcd, f"http://127.0.0.1:{self.ports['etcd']}/health", deadline)
            self.timings["etcd"] = time.monotonic() - began
            self.apiserver.start()
            self._wait_healthy(self.apiserver, f"{self.server}/readyz", deadline)
            self.timings["apiserver"] = time.monotonic() - began
            for component in (self.controller_manager, self.scheduler, self.kwok):
                component.start()
            objects.create_node(self.client())
            # Its per-controller checks are listed once every controller is built: before
            # that, losing the API server (a test stopping it) makes it exit.
            self._wait_healthy(
                self.controller_manager,
                self._health("controller-manager") + "?verbose",
                deadline,
                expect=b"statefulset-controller ok",
            )
            self._wait_healthy(self.scheduler, self._health("scheduler"), deadline)
            self._wait_healthy(
                self.kwok, f"http://127.0.0.1:{self.ports['kwok']}/healthz", deadline
            )
            self._wait(
                lambda: objects.node_ready(self.client()), deadline, f"node {NODE} to be Ready"
            )
            self.timings["ready"] = time.monotonic() - began
            self._stopping.clear()
            self._supervisor = threading.Thread(target=self._supervise, daemon=True)
            self._supervisor.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM, SIGKILL for whatever outlasts `timeout`: the API server's clients first,
        then the API server (its watches are gone: it ends at once), then etcd last (the API
        server still writes while it ends)."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join()
            self._supervisor = None
        if self._client is not None:
            self._client.close()
            self._client = None
        deadline = time.monotonic() + timeout
        clients = (self.kwok, self.scheduler, self.controller_manager)
        for group in (clients, (self.apiserver,), (self.etcd,)):
            for component in group:
                component.signal(signal.SIGTERM)
            for component in group:
                component.reap(deadline)

    @property
    def supervised(self) -> tuple[Component, ...]:
        return (self.controller_manager, self.scheduler, self.kwok)

    def _supervise(self) -> None:
        """Start the controller manager, scheduler or kwok again when one exits, as the
        kubelet restarts a control plane's static pods. Seen here: a scheduler whose pod
        watch missed a StatefulSet pod's deletion and re-creation (the API server was down)
        finds the same name bound elsewhere at its next list, calls its cache corrupted and
        exits. A restarted kwok leaves pods alone until its node's lease expires (40 s)."""
        while not self._stopping.wait(0.25):
            for component in self.supervised:
                if component.exited():
                    self.restarts[component.name] += 1
                    component.start_again()

    def stop_apiserver(self, timeout: float = 15) -> None:
        self.apiserver.stop(timeout)

    def start_apiserver(self, timeout: float = 60) -> None:
        """Start the API server again (same port, flags, etcd) and wait until it is ready.

        Its clients come back at client-go's pace, not at once: each informer retries its watch
        with a backoff that doubles up to 30 s. Measured here after a 20 s stop: a pod deleted
        as soon as the API server was ready was replaced and Ready 40-55 s later."""
        self.apiserver.start()
        self._wait_healthy(self.apiserver, f"{self.server}/readyz", time.monotonic() + timeout)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def rss(self) -> dict[str, int]:
        """Each process's resident memory, in bytes."""
        return {c.name: c.rss() for c in self.components}

    def logs(self) -> str:
        """The end of every process's log: for a failing test's message."""
        return "\n".join(f"--- {c.name}:\n{c.tail(1500)}" for c in self.components)

    # ---- waiting

    def _health(self, name: str) -> str:
        return f"https://127.0.0.1:{self.ports[name]}/healthz"

    def _opener(self) -> urllib.request.OpenerDirector:
        """HTTP(S) to the processes' health endpoints: our CA, the admin's certificate, and no
        proxy from the environment (everything is on loopback)."""
        if self._http is None:
            context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
            context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
            self._http = urllib.request.build_opener(
                urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
            )
        return self._http

    def _get(self, url: str) -> tuple[int, bytes]:
        try:
            with self._opener().open(url, timeout=2) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read()
        except (OSError, ssl.SSLError):
            return 0, b""

    def _wait(self, probe: Callable[[], T | None], deadline: float, what: str) -> T:
        """Poll `probe` until truthy or `deadline`; fails at once if a process has exited
        (other than one the supervisor starts again)."""

        def checked() -> T | None:
            for component in self.components:
                if self._supervisor is None or component not in self.supervised:
                    component.check_alive()
            return probe()

        return wait_until(checked, max(0.1, deadline - time.monotonic()), 0.05, what)

    def _wait_healthy(
        self, component: Component, url: str, deadline: float, *, expect: bytes = b""
    ) -> None:
        def healthy() -> bool:
            status, body = self._get(url)
            return status == 200 and expect in body

        self._wait(healthy, deadline, f"{component.name} ({url})")

    def version_info(self) -> dict[str, Any]:
        """The API server's /version."""
        status, body = self._get(f"{self.server}/version")
        if status != 200:
            raise AssertionError(f"/version answered {status}: {body[:200]!r}")
        info: dict[str, Any] = json.loads(body)
        return info

    # ---- credentials

    def _write_pki(self) -> None:
        self._http = None  # made again with this CA
        self._ca = write_pki(self.pki, self.folder, self.server, self.admin_kubeconfig)

    def user_kubeconfig(
        self,
        user: str,
        *,
        groups: Iterable[str] = (),
        namespace: str | None = None,
        role: str | None = None,
        cluster_role: str | None = None,
    ) -> Path:
        """A kubeconfig for a client-certificate `user`, bound to `role` (a Role in `namespace`)
        or `cluster_role` (in `namespace` if given, else cluster-wide); no other rights."""
        assert self._ca is not None
        if role is not None and namespace is None:
            raise ValueError("a Role lives in a namespace: pass namespace=")
        path = self.folder / f"user-{user}.kubeconfig"
        issued = issue(self._ca, user, groups)
        write_kubeconfig(path, self.server, self._ca, user, issued, namespace=namespace)
        if role is not None:
            objects.bind(self.client(), user, "User", namespace, "Role", role)
            self._granted(path, namespace, "Role", role)
        if cluster_role is not None:
            objects.bind(self.client(), user, "User", namespace, "ClusterRole", cluster_role)
            self._granted(path, namespace, "ClusterRole", cluster_role)
        return path

    def service_account_kubeconfig(
        self, namespace: str, name: str, *, role: str | None = None, seconds: int = 3600
    ) -> Path:
        """A kubeconfig with a token of ServiceAccount `name` (created if missing), bound to the
        Role `role` in its namespace if given: as a pod running the roller has."""
        assert self._ca is not None
        client = self.client()
        objects.ensure_service_account(client, namespace, name)
        token = objects.service_account_token(client, namespace, name, seconds)
        path = self.folder / f"sa-{namespace}-{name}.kubeconfig"
        user = f"system:serviceaccount:{namespace}:{name}"
        write_kubeconfig(path, self.server, self._ca, user, token=token, namespace=namespace)
        if role is not None:
            objects.bind(client, name, "ServiceAccount", namespace, "Role", role)
            self._granted(path, namespace, "Role", role)
        return path

    def _granted(self, kubeconfig: Path, namespace: str | None, kind: str, name: str) -> None:
        """Until the authorizer lets `kubeconfig`'s user do what the first rule of the `kind`
        (Role or ClusterRole) `name` grants: a new binding (and a new Role) reaches the API
        server's authorizer through its cache, a moment after it is written (under load, the
        first request after the write can still be refused)."""
        client = self.client()
        found = (
            client.get(Role, name, namespace=namespace)
            if kind == "Role"
            else client.get(ClusterRole, name)
        )
        rule = next((r for r in found.rules or () if r.resources and r.verbs), None)
        if rule is None:
            return  # nothing to ask the authorizer about
        assert rule.resources  # the rule found has some
        verb, resource = rule.verbs[0], rule.resources[0]
        group = (rule.apiGroups or [""])[0]
        self._wait(
            lambda: objects.may(kubeconfig, namespace or "", verb, resource, group),
            time.monotonic() + 30,
            f"the binding of {kubeconfig.name} to {kind} {name} to reach the authorizer",
        )

    def role_account(
        self, namespace: str, role: Role, account: str, *, can: tuple[str, str, str]
    ) -> Path:
        """Apply `role`, bind ServiceAccount `account` to it (as a Job's pod runs): its
        kubeconfig, once RBAC lets it do `can` (verb, resource, API group): a new binding
        reaches the API server's authorizer through its cache, a moment after it is written."""
        assert role.metadata is not None and role.metadata.name is not None
        self.client().apply(role, force=True)
        path = self.service_account_kubeconfig(namespace, account, role=role.metadata.name)
        verb, resource, group = can
        self._wait(
            lambda: objects.may(path, namespace, verb, resource, group),
            time.monotonic() + 30,
            f"{account}'s binding to reach the authorizer",
        )
        return path

    # ---- the cluster through lightkube (realkube_objects)

    def client(self) -> Client:
        """An admin client (system:masters), made once."""
        if self._client is None:
            # Decoded here once, before a test's threads (the pod bridge's) decode beside it.
            prepare_decoders(Namespace, Node, ServiceAccount, Role, RoleBinding, Secret)
            config = KubeConfig.from_file(self.admin_kubeconfig)
            self._client = Client(config, field_manager="rollguard-tests")
        return self._client

    def create_namespace(self, name: str, timeout: float = 30) -> None:
        objects.create_namespace(self.client(), self._wait, name, timeout)

    def apply_statefulset(
        self, namespace: str, name: str, replicas: int = 3, **options: Any
    ) -> StatefulSet:
        """`realkube_objects.apply_statefulset` (its `options`: image, pod annotations and
        labels, first ordinal, volumes and mounts) with the admin's client."""
        return objects.apply_statefulset(self.client(), namespace, name, replicas, **options)

    def pods(self, namespace: str, app: str) -> list[Pod]:
        return objects.pods(self.client(), namespace, app)

    def wait_pods_ready(
        self, namespace: str, app: str, replicas: int, timeout: float = 60
    ) -> list[Pod]:
        return objects.wait_pods_ready(self.client(), self._wait, namespace, app, replicas, timeout)

    def hold_not_ready(self, namespace: str, pod: str) -> None:
        """Annotate the pod so kwok holds it NotReady (it keeps running)."""
        objects.set_ready_annotation(self.client(), namespace, pod, "false")

    def clear_not_ready(self, namespace: str, pod: str) -> None:
        """Remove the annotation: kwok makes the pod Ready."""
        objects.set_ready_annotation(self.client(), namespace, pod, None)

"""Pods of a real control plane tied to processes on this machine, as a kubelet ties them to
containers: what kwok, which only writes pod status, leaves out.

`PodBridge` watches the pods of a namespace that carry `BRIDGED` (a label their StatefulSet's
template sets) and, for each, drives a `Containers` backend:

- A new pod (a UID not seen before) with an address: its containers start at that address
  (`Containers.start`). kwok gives each pod its own address in 127.0.0.0/8, all loopback here.
- Readiness: the backend's probe (`Containers.ready`: for a broker, the agent's `/v1/ready`)
  is asked every `interval`; the pod's `READY_ANNOTATION` follows it, and kwok's stages
  (tests/kube/kwok-stages.yaml) turn that into the pod's Ready condition, as the kubelet turns
  a readiness probe's answers into it.
- A pod being deleted (deletionTimestamp): its containers are stopped (`Containers.stop`, a
  clean SIGTERM stop of a Kafka node takes seconds), then `CONTAINERS` is set to "stopped".
  kwok deletes a bridged pod only then, so the pod stays Terminating while its processes end,
  and its StatefulSet makes the new pod after that, as on a real node.
- Cluster DNS: every pod with an address is published in `hosts` (`<ip> <pod>.<service>.
  <namespace>.svc`), ready or not, as a headless service with `publishNotReadyAddresses`.
  `tests/kube/dns/sitecustomize.py` makes a Python process (the roller, run with `dns_env()`)
  resolve those names from it, as a pod resolves them through the cluster's DNS.

Every deletion is recorded with what the backend saw of the node at that moment
(`Deletion.seen`), so a test can prove that no pod was deleted while its broker recovered.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from rollguard.peers.processes import ROOT, wait_until
from rollguard.peers.realkube_objects import READY_ANNOTATION

BRIDGED = "rollguard.test/bridged"  # label: this pod's containers are the bridge's
CONTAINERS = "rollguard.test/containers"  # annotation: "running" until the bridge stopped them
DNS_SHIM = ROOT / "tests" / "kube" / "dns"
HOSTS_ENV = "ROLLGUARD_TEST_HOSTS"

logger = logging.getLogger(__name__)


class Containers(Protocol):
    """What runs in a bridged pod. Calls for one pod never overlap; for two pods they may."""

    def start(self, pod: str, address: str, uid: str, image: str) -> None:
        """The pod `pod` (a new UID) runs at `address`: start its processes there."""

    def stop(self, pod: str) -> None:
        """The pod is being deleted: stop its processes (return once they have ended)."""

    def ready(self, pod: str) -> bool:
        """Its readiness probe, now."""

    def seen(self, pod: str) -> Mapping[str, Any]:
        """What the node shows now (for the deletion record): e.g. its broker state."""


@dataclass(frozen=True)
class Deletion:
    pod: str
    uid: str
    at: float  # monotonic, when the bridge first saw the deletionTimestamp
    seen: Mapping[str, Any]


@dataclass
class _Pod:
    uid: str
    address: str
    subdomain: str
    ready: bool | None = None  # as last written to the annotation
    starting: Future[None] | None = None
    stopping: Future[None] | None = None


@dataclass
class PodBridge:
    client: Client
    namespace: str
    containers: Containers
    folder: Path
    interval: float = 0.25
    deletions: list[Deletion] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.hosts = self.folder / "hosts"
        self.hosts.write_text("")
        self._pods: dict[str, _Pod] = {}
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="bridge")
        self._thread = threading.Thread(target=self._run, daemon=True, name="pod-bridge")
        self._published = ""

    def start(self) -> PodBridge:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._pool.shutdown(wait=True)

    def __enter__(self) -> PodBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def dns_env(self) -> dict[str, str]:
        """The environment that makes a Python process resolve the pods' names from `hosts`."""
        path = os.environ.get("PYTHONPATH", "")
        return {
            "PYTHONPATH": f"{DNS_SHIM}{os.pathsep}{path}" if path else str(DNS_SHIM),
            HOSTS_ENV: str(self.hosts),
        }

    def deleted(self) -> list[str]:
        return [d.pod for d in self.deletions]

    # ---- the loop

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._pass()
            except ApiError as exc:  # the API server stopped by a test: try again
                self._note(f"API: {exc.status.code} {exc.status.message}")
            except Exception as exc:  # connection refused while it is down
                self._note(f"{type(exc).__name__}: {exc}")

    def _note(self, error: str) -> None:
        if not self.errors or self.errors[-1] != error:
            self.errors.append(error)

    def _pass(self) -> None:
        pods = list(self.client.list(Pod, namespace=self.namespace, labels={BRIDGED: "true"}))
        for pod in pods:
            meta, spec, status = pod.metadata, pod.spec, pod.status
            assert meta is not None and meta.name is not None and meta.uid is not None
            name, uid = meta.name, meta.uid
            state = self._pods.get(name)
            if meta.deletionTimestamp is not None:
                if state is not None and state.uid == uid and state.stopping is None:
                    self.deletions.append(Deletion(name, uid, time.monotonic(), self._seen(name)))
                    state.stopping = self._pool.submit(self._stop_pod, name, state)
                elif state is None or state.uid != uid:
                    # Never started here (deleted before it ran): nothing to stop.
                    self._mark_stopped(name)
                continue
            address = status.podIP if status is not None else None
            if not address:
                continue
            if state is None or state.uid != uid:
                if state is not None and state.stopping is not None:
                    state.stopping.result()  # the old pod's processes first
                subdomain = (spec.subdomain if spec is not None else None) or ""
                state = _Pod(uid, address, subdomain)
                self._pods[name] = state
                containers = spec.containers if spec is not None else []
                image = (containers[0].image if containers else None) or ""
                state.starting = self._pool.submit(self.containers.start, name, address, uid, image)
                continue
            if state.starting is not None:
                if not state.starting.done():
                    continue
                error = state.starting.exception()
                if error is not None:
                    self._note(f"{name}: start failed: {error}")
                state.starting = None
            ready = self.containers.ready(name)
            if ready != state.ready:
                self._annotate(name, {READY_ANNOTATION: None if ready else "false"})
                state.ready = ready
        self._publish()

    def _stop_pod(self, name: str, state: _Pod) -> None:
        if state.starting is not None:
            with contextlib.suppress(Exception):
                state.starting.result()
        try:
            self.containers.stop(name)
        finally:
            self._mark_stopped(name)

    def _mark_stopped(self, name: str) -> None:
        with contextlib.suppress(ApiError):
            self._annotate(name, {CONTAINERS: "stopped"})

    def _annotate(self, name: str, annotations: Mapping[str, str | None]) -> None:
        patch = {"metadata": {"annotations": dict(annotations)}}
        self.client.patch(Pod, name, patch, namespace=self.namespace, patch_type=PatchType.MERGE)

    def _seen(self, name: str) -> Mapping[str, Any]:
        try:
            return dict(self.containers.seen(name))
        except Exception as exc:  # recorded, not raised: the loop goes on
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _publish(self) -> None:
        lines = sorted(
            f"{p.address} {name}.{p.subdomain}.{self.namespace}.svc"
            for name, p in self._pods.items()
            if p.subdomain and p.stopping is None
        )
        text = "".join(f"{line}\n" for line in lines)
        if text != self._published:
            temporary = self.hosts.with_suffix(".new")
            temporary.write_text(text)
            temporary.replace(self.hosts)
            self._published = text

    # ---- waiting, for tests

    def wait(self, probe: Callable[[], bool], timeout: float, what: str) -> None:
        """`wait_until`, its failure naming the bridge's last errors."""
        try:
            wait_until(probe, timeout, interval=0.1, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the bridge's last errors: {self.errors[-5:]}") from None

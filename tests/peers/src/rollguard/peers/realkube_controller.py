"""rollguard's controller on the real control plane, for tests: its chart installed with the
pinned Helm (`Helm`), its processes run on this machine with the chart's own ServiceAccount
(`Controller`: kwok runs no container, so the Deployment's pods are there and run nothing, and
the test runs what they would), and what it says read back from the API: the Events of an
object as `kubectl describe` prints them (`events`, `describe`), its status annotation
(`status`).

Each Helm command runs with Helm's cache, config and data folders in the test's own folder, and
the control plane's admin kubeconfig: nothing under HOME is read or written.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event

from rollguard.peers.processes import ROOT, wait_until

__all__ = [
    "CHART",
    "Controller",
    "Helm",
    "describe",
    "events",
    "holder",
    "pod_deletions",
    "status",
]

CHART = ROOT / "deploy" / "helm" / "rollguard"
STATUS = "rollguard.io/status"


@dataclass(frozen=True)
class Helm:
    binary: Path
    home: Path
    kubeconfig: Path

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),  # client-go's discovery cache (~/.kube/cache) goes here
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        return subprocess.run(
            [str(self.binary), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def install(
        self, release: str, namespace: str, values: Mapping[str, Any], chart: Path = CHART
    ) -> subprocess.CompletedProcess[str]:
        """`helm install` of the chart with `values` (a values file of the test's own)."""
        path = self.home / f"values-{release}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(dict(values)))
        return self.run("install", release, str(chart), "-n", namespace, "-f", str(path))


@dataclass
class Controller:
    """One `rollguard controller` process (a replica), its output in `folder/<name>.log`."""

    name: str
    args: Sequence[str]
    env: Mapping[str, str]
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    started: list[float] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.name}.log"

    def start(self) -> Controller:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.args), stdout=log, stderr=subprocess.STDOUT, env=dict(self.env)
            )
        self.started.append(time.monotonic())
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def identity(self) -> str:
        """Its holder identity (the roll's `host:pid`), as the Lease and its Events name it."""
        import socket

        return f"{socket.gethostname()}:{self.pid}"

    def kill(self) -> int:
        """SIGKILL, as a node's death or the OOM killer: nothing of it runs after."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        return self.process.wait(30)

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM, as the kubelet stops a container; SIGKILL past `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass(frozen=True)
class Deleted:
    """A pod's deletion as the API server received it (its audit log): who asked, its answer."""

    user: str
    pod: str
    code: int
    at: str  # when it was answered, ISO 8601


def pod_deletions(control_plane: Path, namespace: str) -> list[Deleted]:
    """Every deletion of a pod of `namespace` the API server answered, in order, from the audit
    log the control plane keeps in its folder (tests/kube/audit-policy.yaml): the roller's own
    and everyone else's (kwok's, as the kubelet removes a pod that has ended), each named."""
    found = []
    path = control_plane / "audit.log"
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "delete"
            and event.get("stage") == "ResponseComplete"
            and ref.get("resource") == "pods"
            and not ref.get("subresource")
            and ref.get("namespace") == namespace
        ):
            code = int((event.get("responseStatus") or {}).get("code", 0))
            user = str((event.get("user") or {}).get("username", ""))
            found.append(
                Deleted(user, str(ref.get("name", "")), code, event.get("stageTimestamp", ""))
            )
    return found


def holder(client: Client, namespace: str, name: str) -> str:
    """The Lease's holder now ("" when free or absent)."""
    try:
        lease = client.get(Lease, name, namespace=namespace)
    except Exception:
        return ""
    return (lease.spec.holderIdentity if lease.spec else None) or ""


def status(client: Client, namespace: str, statefulset: str) -> dict[str, Any]:
    """The controller's status annotation on the StatefulSet ({} when there is none)."""
    found = client.get(StatefulSet, statefulset, namespace=namespace)
    text = ((found.metadata.annotations if found.metadata else None) or {}).get(STATUS)
    return dict(json.loads(text)) if text else {}


@dataclass(frozen=True)
class Said:
    """One Event, as `kubectl describe` lists it."""

    type: str
    reason: str
    source: str
    message: str
    instance: str  # reportingInstance: which process posted it
    at: datetime
    object: str  # involvedObject's kind/name


def events(client: Client, namespace: str, name: str | None = None) -> list[Said]:
    """The namespace's Events (of the object `name` when given), oldest first."""
    found = []
    for event in client.list(Event, namespace=namespace):
        involved = event.involvedObject
        if name is not None and involved.name != name:
            continue
        at = event.eventTime or event.lastTimestamp or event.firstTimestamp
        when = at if isinstance(at, datetime) else datetime.now(UTC)
        source = (event.source.component if event.source else None) or ""
        found.append(
            Said(
                event.type or "",
                event.reason or "",
                source or event.reportingComponent or "",
                event.message or "",
                event.reportingInstance or "",
                when,
                f"{involved.kind}/{involved.name}",
            )
        )
    return sorted(found, key=lambda e: e.at)


def describe(kubeconfig: Path, client: Client, namespace: str, statefulset: str) -> tuple[str, str]:
    """`kubectl describe statefulset` as printed (by, kubectl), when kubectl is installed;
    else its Events section written the same way from the API (by, "the API")."""
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        done = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "-n", namespace, "describe", "statefulset",
             statefulset],
            capture_output=True, text=True, timeout=60, check=False,
            # its discovery cache (~/.kube/cache) beside the kubeconfig, not in HOME
            env={"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
        )  # fmt: skip
        if done.returncode == 0:
            return "kubectl", done.stdout
    rows = [("Type", "Reason", "From", "Message"), ("----", "------", "----", "-------")]
    rows += [
        (e.type, e.reason, e.source, e.message)
        for e in events(client, namespace, statefulset)
        if e.object == f"StatefulSet/{statefulset}"
    ]
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["Events:"] + [
        "  " + "  ".join(r[i].ljust(width[i]) for i in range(3)) + "  " + r[3] for r in rows
    ]
    return "the API", "\n".join(lines)


def wait_for_event(
    client: Client,
    namespace: str,
    name: str,
    reason: str,
    timeout: float,
    *,
    since: datetime | None = None,
) -> Said:
    """The first Event `reason` on object `name` (posted after `since`), waited for."""

    def found() -> Said | None:
        for event in events(client, namespace, name):
            if event.reason == reason and (since is None or event.at >= since):
                return event
        return None

    return wait_until(found, timeout, interval=0.5, what=f"a {reason} Event on {name}")

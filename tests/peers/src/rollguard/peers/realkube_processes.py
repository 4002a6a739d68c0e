"""The real control plane's five processes: how each one runs (`Component`: started in a session
of its own, its output in a log, ended by its PID) and the command line of each
(`build_components`).

Every port is on 127.0.0.1. Processes a control plane started and has not seen end are killed
at interpreter exit, so an interrupted run leaves nothing behind. The API server keeps an audit
log of every pod deletion it answers (`audit.log` in the control plane's folder,
tests/kube/audit-policy.yaml): who asked a pod to go, as a test's judge of a roll.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rollguard.peers.realkube_binaries import KUBE, Binaries
from rollguard.peers.spawn import alive, forget, read_log, start_logged  # killed at exit

# kwok's stages: how a pod of its node becomes Ready, NotReady and goes.
STAGES = KUBE / "kwok-stages.yaml"
AUDIT_POLICY = KUBE / "audit-policy.yaml"  # who deleted each pod: the log's only records
# A cluster's control plane runs on machines of its own; here it shares two cores with a dozen
# Kafka JVMs, and an API server started again under that load took over 10 s to answer and to
# authorize: more than a real one's restart. So it runs ahead of them (every thread: `nice`
# before exec), when this user may raise a priority (root); otherwise as it is.
PRIORITY = ["nice", "-n", "-10"] if os.geteuid() == 0 else []


@dataclass
class Component:
    """One process of the control plane: its command, log, and PID while it runs."""

    name: str
    command: list[str]
    log: Path
    env: Mapping[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} is already running")
        env = {**os.environ, **(self.env or {})}
        self.process = start_logged([*PRIORITY, *self.command], self.log, env=env)

    def running(self) -> bool:
        return alive(self.process)

    def exited(self) -> bool:
        """Started, and ended since (by itself or not)."""
        return self.process is not None and self.process.poll() is not None

    def start_again(self) -> None:
        """Start anew a process that exited (it is no longer one to kill at exit)."""
        if self.process is not None:
            forget(self.process)
        self.start()

    def signal(self, sig: int) -> None:
        if self.running():
            assert self.process is not None
            self.process.send_signal(sig)

    def reap(self, deadline: float) -> int | None:
        """Wait for the process until `deadline` (monotonic), SIGKILL it after; its exit code."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        forget(self.process)
        return code

    def stop(self, timeout: float = 15) -> int | None:
        self.signal(signal.SIGTERM)
        return self.reap(time.monotonic() + timeout)

    def rss(self) -> int:
        """Resident memory in bytes (0 when not running)."""
        if not self.running():
            return 0
        assert self.process is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def tail(self, size: int = 3000) -> str:
        return read_log(self.log)[-size:]

    def check_alive(self) -> None:
        if self.exited():
            assert self.process is not None
            raise AssertionError(
                f"{self.name} exited ({self.process.returncode}); its log ends:\n{self.tail()}"
            )


def build_components(
    folder: Path, pki: Path, ports: Mapping[str, int], binaries: Binaries, cidr: str
) -> tuple[Component, Component, Component, Component, Component]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, in that order,
    writing in `folder` and reading the certificates and kubeconfigs `realkube_pki` writes."""
    f, p, b = folder, ports, binaries
    etcd_url = f"http://127.0.0.1:{p['etcd']}"
    peer_url = f"http://127.0.0.1:{p['etcd-peer']}"
    serving = [
        f"--tls-cert-file={pki / 'serving.crt'}",
        f"--tls-private-key-file={pki / 'serving.key'}",
    ]

    def client_of(name: str) -> list[str]:
        config = f / f"{name}.kubeconfig"
        return [
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={p[name]}",
            # One instance of each: no election to win first.
            "--leader-elect=false",
            *serving,
        ]

    return (
        Component("etcd", [
            str(b.etcd), "--name=rollguard", f"--data-dir={f / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=rollguard={peer_url}", "--log-level=warn",
            # A test cluster's data is thrown away: no fsync (two busy cores, shared disk).
            "--unsafe-no-fsync",
        ], f / "etcd.log"),
        Component("kube-apiserver", [
            str(b.apiserver), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={p['apiserver']}", *serving,
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            # Never routed: no kube-proxy runs; the API server's own Service stays empty.
            "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none",
            # On SIGTERM, drain the requests in flight and end the watches within 2 s: by
            # default it waits up to the request timeout (60 s) for every client's watch.
            "--shutdown-send-retry-after=true",
            "--profiling=false",
            f"--audit-policy-file={AUDIT_POLICY}", f"--audit-log-path={f / 'audit.log'}",
        ], f / "kube-apiserver.log"),
        Component("kube-controller-manager", [
            str(b.controller_manager), *client_of("controller-manager"),
            # All controllers as the controller manager's own user (in system:masters): a
            # service account per controller, as kubeadm sets it up, took 4-5 s more to
            # start (a token request each); the API server's RBAC is the same either way.
            "--use-service-account-credentials=false",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--profiling=false",
        ], f / "kube-controller-manager.log"),
        Component("kube-scheduler", [
            str(b.scheduler), *client_of("scheduler"), "--profiling=false",
        ], f / "kube-scheduler.log"),
        Component("kwok", [
            str(b.kwok), f"--kubeconfig={f / 'kwok.kubeconfig'}", f"--config={STAGES}",
            "--manage-all-nodes", f"--cidr={cidr}", "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{p['kwok']}",
        ], f / "kwok.log", env={"KWOK_WORKDIR": str(f / "kwok")}),  # not ~/.kwok's config
    )  # fmt: skip

"""Kafka Connect's watcher and MirrorMaker 2 offsets keeping their state in ConfigMaps of a real
Kubernetes API server (the shared control plane, `kube`), as the watcher's documented Role lets
them, against the Connect test peer. The rest of Connect's operations are
tests/sim/test_connect.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from test_connect import MM2

from rollguard.peers.connect import ConnectSim
from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_objects import load_role

from helpers import ROOT, rollguard


@pytest.fixture
def connect() -> Iterator[ConnectSim]:
    with ConnectSim(restart_delay=0.0, restart_lag=0.0) as sim:
        yield sim


WATCHER_ROLE = ROOT / "deploy" / "kubernetes" / "connect" / "role.yaml"
WATCHER_STATE = "rollguard-connect-autorestart"  # the one ConfigMap its Role may read and update


def kube_env(kubeconfig: Path) -> dict[str, str]:
    """The environment of a `rollguard` that reaches the real API server through `kubeconfig`."""
    return {"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"}


def watcher_kubeconfig(kube: ControlPlane, namespace: str) -> Path:
    """ServiceAccount rollguard-connect bound to the watcher's documented Role (create
    ConfigMaps; get and update `WATCHER_STATE` only), once RBAC lets it create ConfigMaps."""
    role = load_role(WATCHER_ROLE, namespace)
    return kube.role_account(namespace, role, "rollguard-connect", can=("create", "configmaps", ""))


def test_the_watcher_keeps_its_counts_in_a_configmap(
    connect: ConnectSim, kube: ControlPlane, kube_namespace: str, tmp_path: Path
) -> None:
    connect.add_connector("sink", tasks=1)
    connect.fail_connector("sink")
    connect.fail_after_restart("sink", times=None)
    args = ["connect", "auto-restart", "--once", "--connect-url", connect.url]
    env = kube_env(watcher_kubeconfig(kube, kube_namespace))
    for _ in range(2):  # the first creates the ConfigMap, the second reads and updates it
        where = f"{kube_namespace}/{WATCHER_STATE}"
        done = rollguard(*args, "--state-configmap", where, env=env)
        assert done.returncode == 0, done.stderr
    stored = kube.client().get(ConfigMap, WATCHER_STATE, namespace=kube_namespace)
    assert stored.metadata is not None and stored.data is not None
    assert (stored.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "rollguard"
    state = json.loads(stored.data["auto-restart.json"])
    assert state["connectors"]["sink"]["count"] == 1
    assert connect.restarts("sink") == 1  # the second watcher knew it was inside the backoff


def test_configmaps_keep_their_other_keys(
    connect: ConnectSim, kube: ControlPlane, kube_namespace: str
) -> None:
    ns = kube_namespace
    connect.add_mirror_maker("east", "west")
    kube.client().create(
        ConfigMap(metadata=ObjectMeta(name="offsets", namespace=ns), data={"notes": "keep me"})
    )
    env = kube_env(kube.admin_kubeconfig)
    base = ["--connect-url", connect.url, "--connector", MM2]
    listed = rollguard("mm2", "offsets", "list", *base, "--to-configmap", f"{ns}/offsets", env=env)
    assert listed.returncode == 0, listed.stderr
    data = kube.client().get(ConfigMap, "offsets", namespace=ns).data
    assert data is not None
    assert data["notes"] == "keep me"
    body = json.loads(data["east--west.MirrorSourceConnector.json"])
    assert body["offsets"]
    altered = rollguard(
        "mm2", "offsets", "alter", *base, "--from-configmap", f"{ns}/offsets", "--stop", env=env
    )
    assert altered.returncode == 0, altered.stderr
    missing = rollguard(
        "mm2", "offsets", "alter", *base, "--from-configmap", f"{ns}/nothing", env=env
    )
    assert missing.returncode == 2 and f"{ns}/nothing" in missing.stderr

"""Where the real control plane's binaries are, and which versions: the pins of
tests/kube/versions.env, and the cache `make kube` (scripts/kube-build) builds them into.

`~/.cache/rollguard/kube/<version>/bin` holds the Kubernetes components (two versions,
`VERSIONS`), `etcd-<v>/etcd` and `kwok-<v>/kwok` the others, and `helm-<v>/helm` Helm
(`find_helm`); `$ROLLGUARD_KUBE_CACHE` moves the cache. `KubeBinariesMissing` says which one is
missing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from rollguard.peers.processes import ROOT

KUBE = ROOT / "tests" / "kube"


def pins(path: Path = KUBE / "versions.env") -> dict[str, str]:
    """tests/kube/versions.env, as scripts/kube-build reads it."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


_PINS = pins()
NEWEST = _PINS["KUBERNETES_NEWEST"]
OLDER = _PINS["KUBERNETES_OLDER"]
VERSIONS = (NEWEST, OLDER)
ETCD = _PINS["ETCD_VERSION"]
KWOK = _PINS["KWOK_VERSION"]
HELM = _PINS["HELM_VERSION"]


class KubeBinariesMissing(RuntimeError):
    """A control-plane binary is not in the cache (`make kube` builds it)."""


# The status file of a build `make test` runs in the background (`scripts/kube-build --detach`):
# absent while it runs, then its exit code. Set only while that build runs.
BUILD_STATUS = "ROLLGUARD_KUBE_BUILD"


def wait_for_build(timeout: float = 3600.0, poll: float = 2.0) -> None:
    """Until the background build, if there is one, has ended (`make test` runs the other tests
    meanwhile and the Kubernetes ones last); its outcome is `build_failure`'s to say."""
    path = os.environ.get(BUILD_STATUS)
    if not path:
        return
    deadline = time.monotonic() + timeout
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(poll)


def build_failure() -> str | None:
    """Why the background build gave no control plane (its exit code and its log's last
    line), or None: no background build, or one that ended well."""
    path = os.environ.get(BUILD_STATUS)
    if not path:
        return None
    status, log = Path(path), Path(path + ".log")
    if not status.exists():
        return f"the control plane's background build has not ended (log: {log})"
    code = status.read_text().strip()
    if code == "0":
        return None
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return f"the control plane's build failed (exit {code}; log: {log}): {(lines or ['-'])[-1]}"


def cache_root() -> Path:
    """Where `make kube` builds: `$ROLLGUARD_KUBE_CACHE`, else ~/.cache/rollguard/kube."""
    return Path(os.environ.get("ROLLGUARD_KUBE_CACHE") or Path.home() / ".cache/rollguard/kube")


def find_helm(cache: Path | None = None) -> Path:
    """The pinned Helm (`HELM`), built beside the control plane; `KubeBinariesMissing` as
    `Binaries.find` raises it (the background build not ended or failed, or no binary)."""
    path = (cache or cache_root()) / f"helm-{HELM}" / "helm"
    failed = build_failure()
    if failed is not None:
        raise KubeBinariesMissing(failed)
    if not os.access(path, os.X_OK):
        raise KubeBinariesMissing(
            f"helm {HELM} is not in {path.parent}: `make kube` builds it (Go)"
        )
    return path


@dataclass(frozen=True)
class Binaries:
    apiserver: Path
    controller_manager: Path
    scheduler: Path
    etcd: Path
    kwok: Path

    @classmethod
    def find(cls, version: str = NEWEST, cache: Path | None = None) -> Binaries:
        root = cache or cache_root()
        found = cls(
            apiserver=root / version / "bin" / "kube-apiserver",
            controller_manager=root / version / "bin" / "kube-controller-manager",
            scheduler=root / version / "bin" / "kube-scheduler",
            etcd=root / f"etcd-{ETCD}" / "etcd",
            kwok=root / f"kwok-{KWOK}" / "kwok",
        )
        failed = build_failure()
        if failed is not None:
            raise KubeBinariesMissing(failed)
        for path in (found.apiserver, found.controller_manager, found.scheduler):
            if not os.access(path, os.X_OK):
                raise KubeBinariesMissing(
                    f"{path.name} {path.parent.parent.name} is not in {path.parent}: "
                    "`make kube` builds it (Go)"
                )
        for path, pin in ((found.etcd, ETCD), (found.kwok, KWOK)):
            if not os.access(path, os.X_OK):
                raise KubeBinariesMissing(
                    f"{path.name} {pin} is not in {path.parent}: `make kube` builds it (Go)"
                )
        return found

"""Where the real control plane's binaries are, and which versions: the pins of
tests/kube/versions.env, and the cache `make kube` (scripts/kube-build) builds them into.

`~/.cache/rollguard/kube/<version>/bin` holds the Kubernetes components (two versions,
`VERSIONS`), `etcd-<v>/etcd` and `kwok-<v>/kwok` the others;
`$ROLLGUARD_KUBE_CACHE` moves the cache. `KubeBinariesMissing` says which one is missing.
"""

from __future__ import annotations

import os
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


class KubeBinariesMissing(RuntimeError):
    """A control-plane binary is not in the cache (`make kube` builds it)."""


@dataclass(frozen=True)
class Binaries:
    apiserver: Path
    controller_manager: Path
    scheduler: Path
    etcd: Path
    kwok: Path

    @classmethod
    def find(cls, version: str = NEWEST, cache: Path | None = None) -> Binaries:
        root = cache or Path(
            os.environ.get("ROLLGUARD_KUBE_CACHE") or Path.home() / ".cache/rollguard/kube"
        )
        found = cls(
            apiserver=root / version / "bin" / "kube-apiserver",
            controller_manager=root / version / "bin" / "kube-controller-manager",
            scheduler=root / version / "bin" / "kube-scheduler",
            etcd=root / f"etcd-{ETCD}" / "etcd",
            kwok=root / f"kwok-{KWOK}" / "kwok",
        )
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

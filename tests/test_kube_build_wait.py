"""The tests on the real control plane wait for the background build of what they need only
(`rollguard.peers.realkube_binaries`): on a fresh machine the newest Kubernetes, etcd and kwok are
made first, and the tests on them need not wait for the older Kubernetes' build as well."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rollguard.peers.realkube_binaries import (
    BUILD_STATUS,
    ETCD,
    KWOK,
    NEWEST,
    OLDER,
    STAMP,
    build_failure,
    built,
    wait_for_build,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "kube"
    monkeypatch.setenv("ROLLGUARD_KUBE_CACHE", str(root))
    monkeypatch.setenv(BUILD_STATUS, str(tmp_path / "kube-build.status"))
    return root


def stamp(root: Path, *folders: str) -> None:
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / STAMP).write_text("{}")


def test_a_version_is_built_once_it_and_etcd_and_kwok_are_stamped(cache: Path) -> None:
    assert not built(NEWEST)
    stamp(cache, NEWEST, f"etcd-{ETCD}")
    assert not built(NEWEST)  # kwok still building
    stamp(cache, f"kwok-{KWOK}")
    assert built(NEWEST) and not built(OLDER)
    stamp(cache, OLDER)
    assert built(OLDER)


def test_the_newest_is_not_waited_for_beyond_its_own_build(cache: Path, tmp_path: Path) -> None:
    stamp(cache, NEWEST, f"etcd-{ETCD}", f"kwok-{KWOK}")
    began = time.monotonic()
    wait_for_build(NEWEST, timeout=30, poll=0.05)  # the whole build still runs: no status
    assert time.monotonic() - began < 5
    assert build_failure(NEWEST) is None
    # the older one is still being built: its tests wait, then say so
    wait_for_build(OLDER, timeout=0.2, poll=0.05)
    assert "has not ended" in (build_failure(OLDER) or "")


def test_a_failed_build_is_named_for_what_it_did_not_make(cache: Path, tmp_path: Path) -> None:
    stamp(cache, NEWEST, f"etcd-{ETCD}", f"kwok-{KWOK}")
    (tmp_path / "kube-build.status").write_text("1\n")
    (tmp_path / "kube-build.status.log").write_text("go: module lookup disabled\n")
    assert build_failure(NEWEST) is None
    failed = build_failure(OLDER) or ""
    assert "failed (exit 1" in failed and "module lookup disabled" in failed

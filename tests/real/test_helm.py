"""Helm, built from the Go module proxy beside the control plane (`make kube`,
tests/kube/versions.env), works for the tests that will lint and render rollguard's chart: it
reports the pinned version, lints and renders a small chart made here, and a broken chart fails
its lint naming the fault.

Each command runs with Helm's cache, config and data folders in the test's own folder, so
nothing under HOME is read or written. Marked `kube`: under `make test` these wait for the
background build, and until it has built Helm they fail naming the missing binary
(ROLLGUARD_REQUIRE_ALL_TIERS), or skip saying so under a plain pytest.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from rollguard.peers.realkube_binaries import HELM, KubeBinariesMissing, find_helm

from helpers import missing_tier

pytestmark = pytest.mark.kube

CHART = """\
apiVersion: v2
name: tiny
description: a chart made by rollguard's tests
version: 0.1.0
appVersion: "1.0"
"""

VALUES = """\
# Read by templates/configmap.yaml.
replicas: 3
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Name }}
  labels:
    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
data:
  replicas: {{ .Values.replicas | quote }}
"""


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        return find_helm()
    except KubeBinariesMissing as missing:
        missing_tier(str(missing))


def run(helm: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    return subprocess.run(
        [str(helm), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def make_chart(folder: Path, configmap: str = CONFIGMAP) -> Path:
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text(CHART)
    (folder / "values.yaml").write_text(VALUES)
    (folder / "templates" / "configmap.yaml").write_text(configmap)
    return folder


def test_version_is_the_pinned_one(helm: Path, tmp_path: Path) -> None:
    done = run(helm, tmp_path, "version", "--template", "{{ .Version }}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == HELM


def test_a_small_chart_lints_and_renders(helm: Path, tmp_path: Path) -> None:
    chart = make_chart(tmp_path / "tiny")
    linted = run(helm, tmp_path, "lint", str(chart))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in linted.stdout

    rendered = run(helm, tmp_path, "template", "demo", str(chart), "--set", "replicas=5")
    assert rendered.returncode == 0, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [("ConfigMap", "demo-tiny")]
    assert documents[0]["data"] == {"replicas": "5"}  # --set over values.yaml's 3
    assert documents[0]["metadata"]["labels"] == {"app.kubernetes.io/version": "1.0"}


def test_a_broken_template_fails_the_lint(helm: Path, tmp_path: Path) -> None:
    broken = CONFIGMAP.replace("{{ .Values.replicas | quote }}", "{{ .Values.replicas | quote ")
    chart = make_chart(tmp_path / "tiny", broken)
    linted = run(helm, tmp_path, "lint", str(chart))
    said = linted.stdout + linted.stderr
    assert linted.returncode != 0, said
    assert "[ERROR] templates/: parse error" in said
    assert "unclosed action started at tiny/templates/configmap.yaml:8" in said  # its line
    assert "1 chart(s) linted, 1 chart(s) failed" in said

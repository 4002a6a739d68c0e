"""rollguard.roller as a library: its exported names (a fresh interpreter imports it), its typing
marker, the docs linking its page. docs/library.md's worked example on a real Kubernetes API
server is tests/real/test_library_kopf.py."""

from __future__ import annotations

import importlib
import importlib.resources
import subprocess
import sys

import pytest

import rollguard.roller

from helpers import ROOT

LIBRARY_DOC = (ROOT / "docs" / "library.md").read_text()


def test_every_exported_name_resolves_to_its_module() -> None:
    where = rollguard.roller._WHERE  # type: ignore[attr-defined]
    assert sorted(where) == rollguard.roller.__all__
    for name, module in where.items():
        assert getattr(rollguard.roller, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rollguard.roller.Nope  # noqa: B018


def test_importing_the_package_loads_no_network_library_until_a_name_is_used() -> None:
    code = (
        "import sys, rollguard.roller as r\n"
        "before = {m for m in ('httpx', 'kafka', 'lightkube') if m in sys.modules}\n"
        "r.decide\n"
        "print(sorted(before))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("component", ["shared", "agent", "roller", "certs", "spark"])
def test_every_component_is_typed(component: str) -> None:
    assert importlib.resources.files(f"rollguard.{component}").joinpath("py.typed").is_file()


def test_the_operations_docs_link_the_library_page() -> None:
    assert "docs/library.md" in (ROOT / "README.md").read_text()


# ---- the worked example ------------------------------------------------------------------

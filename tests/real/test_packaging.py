"""Each component's wheel installs only its own portion of the `rollguard` namespace.

Five distributions share one import namespace (PEP 420): a wheel that shipped
`rollguard/__init__.py` would shadow the other portions, and one that shipped a top-level `agent/`
or `shared/` would collide with other projects in site-packages (issue 15). The wheels are built
from copies of the component folders, so a stale `build/` in the working tree cannot hide or add
a file; they are built as `make dist` builds them (scripts/wheels.py).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import wheels  # noqa: E402  (scripts/wheels.py, what `make dist` runs)

#: Component folder -> (distribution, its console scripts, data files it must carry).
COMPONENTS = {
    "shared": ("rollguard_shared", set(), set()),
    "agent": (
        "rollguard_agent",
        {"rollguard-agent = rollguard.agent.cli:main"},
        {"rollguard/agent/java/RollguardJmx.java"},
    ),
    "roller": ("rollguard_roller", {"rollguard = rollguard.roller.cli:main"}, set()),
    "certs": ("rollguard_certs", {"rollguard-certs = rollguard.certs.cli:main"}, set()),
    "tests/peers": ("rollguard_peers", set(), set()),
    "spark": (
        "rollguard_spark",
        {"rollguard-report = rollguard.spark.job:main"},
        {"rollguard/spark/log4j2.properties"},
    ),
}


def build_wheel(component: str, tmp_path: Path) -> Path:
    """The component's wheel, built as `make dist` builds it (scripts/wheels.py: the PEP 517
    backend's `build_wheel` hook, called directly, on a copy of the component's folder)."""
    return wheels.build_wheel(component, tmp_path / "wheels", tmp_path / "src")


def test_each_wheel_holds_only_its_own_portion_of_the_namespace(tmp_path: Path) -> None:
    for component, (distribution, scripts, data) in COMPONENTS.items():
        wheel = build_wheel(component, tmp_path)
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
            entry_points = (
                archive.read(f"{dist_info}/entry_points.txt").decode()
                if f"{dist_info}/entry_points.txt" in names
                else ""
            )
        assert dist_info.startswith(f"{distribution}-")
        code = {n for n in names if not n.startswith(f"{dist_info}/")}
        package = component.rsplit("/", 1)[-1]
        strays = sorted(n for n in code if not n.startswith(f"rollguard/{package}/"))
        assert not strays, f"{component}'s wheel installs files outside rollguard/{package}/"
        assert f"rollguard/{package}/__init__.py" in code
        assert "rollguard/__init__.py" not in code
        assert data <= code, f"{component}'s wheel lacks {sorted(data - code)}"
        assert f"rollguard/{package}/py.typed" in code, f"{component}'s wheel is not typed"
        found = {line.replace(" ", "") for line in entry_points.splitlines() if "=" in line}
        assert found == {line.replace(" ", "") for line in scripts}

"""`make dist`: the wheel of every shipped component, built the way pip would build it.

    .venv/bin/python scripts/wheels.py [--out dist]

Each component folder is a distribution of its own (README, "Each folder is a distribution");
the test peers (`tests/peers`, rollguard-peers) are never shipped, so they are not built here.
Each wheel is built by its PEP 517 backend's `build_wheel` hook, called directly in a process of
its own, from a copy of the component's folder: a stale `build/` or `*.egg-info` in the working
tree can neither hide nor add a file, and the tree is left as it was. The same function builds
the wheels that tests/real/test_packaging.py inspects and tests/real/test_install.py installs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The shipped components, in dependency order (shared first).
COMPONENTS = ("shared", "agent", "roller", "certs", "spark")


def distribution(component: str) -> str:
    """The component's distribution name as its wheel file spells it (`rollguard_roller`)."""
    project = tomllib.loads((ROOT / component / "pyproject.toml").read_text())
    name: str = project["project"]["name"]
    return name.replace("-", "_")


def build_wheel(component: str, out: Path, scratch: Path) -> Path:
    """Build `component`'s wheel into `out` from a copy of its folder made in `scratch`;
    RuntimeError with the backend's output if the build fails."""
    source = scratch / component.replace("/", "-")
    shutil.copytree(
        ROOT / component,
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{distribution(component)}-*.whl"):
        old.unlink()  # another version's wheel would be installed beside this one
    project = tomllib.loads((source / "pyproject.toml").read_text())
    backend = project["build-system"]["build-backend"]
    # The hook pip itself would call, without pip's seconds of start-up each time; in a process
    # of its own, as the backend expects (it changes its working directory and global state).
    done = subprocess.run(
        [sys.executable, "-c",
         f"import {backend} as backend, sys; backend.build_wheel(sys.argv[1])", str(out.resolve())],
        cwd=source, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"building {component}'s wheel failed:\n{done.stderr[-3000:]}")
    (wheel,) = out.glob(f"{distribution(component)}-*.whl")
    return wheel


def build_all(out: Path, components: Sequence[str] = COMPONENTS) -> list[Path]:
    """Every component's wheel in `out`, in order."""
    with tempfile.TemporaryDirectory(prefix="rollguard-wheels-") as scratch:
        return [build_wheel(c, out, Path(scratch)) for c in components]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/wheels.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="default: dist/")
    args = parser.parse_args(argv)
    try:
        wheels = build_all(args.out)
    except RuntimeError as exc:
        print(f"scripts/wheels.py: {exc}", file=sys.stderr)
        return 1
    for wheel in wheels:
        print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Installing for real: the wheels `make dist` builds, installed into clean environments as on a
bastion (the roller), a broker VM (the agent, run by its systemd unit) and a Spark driver (the
report job), each checked through its installed commands.

Each environment is a new venv made by uv (pinned in constraints.txt, in the dev venv) for the
base Python, not the dev venv: it holds the wheels and their dependencies only, at
constraints.txt's versions, from uv's cache or the network as `make` installs them, and no ruff,
mypy, pytest or checkout. Each rollguard wheel is named by its file, so no index is ever asked
for a rollguard distribution; `--no-build`: nothing is built from source (PySpark comes from the
wheel `make` built once into ~/.cache/rollguard/wheels).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rollguard.agent import config as agent_config
from rollguard.shared.cli import Parser

from helpers import missing_tier

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import wheels  # noqa: E402  (scripts/wheels.py, what `make dist` runs)

UV = Path(sys.executable).parent / "uv"
CONSTRAINTS = ROOT / "constraints.txt"
# The Makefile's WHEELS and PYSPARK: where `make` keeps the PySpark wheel it built once.
WHEELS = Path(os.environ.get("WHEELS", Path.home() / ".cache" / "rollguard" / "wheels"))
PYSPARK = re.search(r"^pyspark==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE)
UNIT = ROOT / "deploy" / "systemd" / "rollguard-agent.service"
ENV_FILE = ROOT / "deploy" / "systemd" / "rollguard-agent.env"
INSTALLED_AGENT = "/opt/rollguard-agent/bin/rollguard-agent"  # docs/install.md's venv
# Run by a venv's Python: which of the modules named in argv it can import, one a line.
FIND = "import importlib.util as u, sys; print(*(m for m in sys.argv[1:] if u.find_spec(m)))"


def run(
    *command: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def install(folder: Path, *requirements: str | Path, find_links: Path | None = None) -> Path:
    """A new venv in `folder` with `requirements` installed; its bin folder."""
    made = run(UV, "venv", "--quiet", "--no-config", "--no-python-downloads",
               "--python", sys.executable, folder)  # fmt: skip
    assert made.returncode == 0, made.stderr
    links = ["--find-links", str(find_links)] if find_links else []
    python = folder / "bin" / "python"
    done = run(UV, "pip", "install", "--quiet", "--no-config", "--no-build",
               "--python", python, "-c", CONSTRAINTS, *links, *requirements)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "bin"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Component -> its wheel, built by `make dist`'s code."""
    out = tmp_path_factory.mktemp("dist")
    return dict(zip(wheels.COMPONENTS, wheels.build_all(out), strict=True))


@pytest.fixture(scope="module")
def agent_bin(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("agent") / "venv", dist["shared"], dist["agent"])


def test_make_dist_builds_every_component_but_the_test_peers(dist: dict[str, Path]) -> None:
    folders = {p.parent.name for p in ROOT.glob("*/pyproject.toml")}
    assert set(dist) == folders  # a new component folder is shipped too
    assert "peers" not in folders and not any("peers" in w.name for w in dist.values())
    for component, wheel in dist.items():
        assert wheel.name == f"{wheels.distribution(component)}-0.1.0-py3-none-any.whl"


def test_the_roller_installs_with_collect_alone_in_a_clean_venv(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    bin_ = install(tmp_path / "venv", dist["shared"], f"{dist['roller']}[collect]")
    version = run(bin_ / "rollguard", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "rollguard 0.1.0"), version.stderr
    roll = run(bin_ / "rollguard", "roll", "--help")
    assert roll.returncode == 0, roll.stderr
    assert "--inventory" in roll.stdout
    # The collect extra is there; the development tools and the other components are not.
    found = run(bin_ / "python", "-c", FIND, "pyarrow", "pytest", "ruff", "mypy",
                "rollguard.agent", "rollguard.peers")  # fmt: skip
    assert found.stdout.split() == ["pyarrow"], found.stderr


def test_the_agent_installs_and_refuses_a_bad_flag_with_exit_2(agent_bin: Path) -> None:
    version = run(agent_bin / "rollguard-agent", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "rollguard-agent 0.1.0")
    bad = run(agent_bin / "rollguard-agent", "--jmx-backnd", "persistent")
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("rollguard-agent: "), bad.stderr
    assert "--jmx-backend" in bad.stderr  # the closest real flag
    found = run(agent_bin / "python", "-c", FIND, "uvloop", "rollguard.roller", "pyarrow", "pytest")
    assert found.stdout.split() == ["uvloop"], found.stderr


def test_the_report_job_installs_and_runs_as_spark_submits_main_file(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    assert PYSPARK is not None
    cached = WHEELS / f"pyspark-{PYSPARK.group(1)}-py2.py3-none-any.whl"
    if not cached.is_file():
        missing_tier(f"{cached} is absent (`make` builds it once); PySpark is sdist-only")
    bin_ = install(tmp_path / "venv", dist["shared"], dist["spark"], find_links=WHEELS)
    shown = run(bin_ / "rollguard-report", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "--dataset" in shown.stdout
    if shutil.which("java") is None:
        missing_tier("no java on PATH: spark-submit cannot start (a JDK 17, as `make` needs)")
    # spark-submit runs the installed job.py as its main file, with the venv's Python as the
    # driver's (docs/install.md); the job checks its dataset before Spark's session: exit 2.
    job = run(bin_ / "python", "-c", "import rollguard.spark.job as j; print(j.__file__)")
    missing = tmp_path / "no-dataset"
    driver = {"PYSPARK_DRIVER_PYTHON": str(bin_ / "python")}  # executors need no rollguard
    submitted = run(bin_ / "spark-submit", "--master", "local[1]", job.stdout.strip(),
                    "--dataset", missing, "--out", tmp_path / "report",
                    env={**os.environ, **driver})  # fmt: skip
    said = submitted.stdout + submitted.stderr  # spark-submit passes the driver's stderr on
    assert submitted.returncode == 2, said[-2000:]
    assert f"rollguard-report: dataset folder {missing} does not exist" in said


def unit_values(text: str) -> dict[str, list[str]]:
    """Key -> every value it has in a unit file (comments and sections left out)."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


def environment_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines of a systemd EnvironmentFile (comments left out; no quoting used)."""
    pairs = [line.partition("=") for line in text.splitlines() if line and line[0] != "#"]
    for key, equals, value in pairs:
        assert equals and re.fullmatch(r"[A-Z_]+", key) and not re.search(r"[\s'\"]", value), key
    return {key: value for key, _, value in pairs}


def test_the_systemd_unit_verifies_running_the_installed_agent(
    agent_bin: Path, tmp_path: Path
) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing_tier("systemd-analyze is absent (apt-get install systemd): no unit to verify with")
    text = UNIT.read_text()
    assert unit_values(text)["ExecStart"] == [INSTALLED_AGENT]
    # The copy runs the agent this test installed, where the docs install it: verify checks
    # that ExecStart is an executable.
    unit = tmp_path / UNIT.name
    unit.write_text(text.replace(INSTALLED_AGENT, str(agent_bin / "rollguard-agent")))
    verified = run(analyze, "verify", unit)
    said = (verified.stdout + verified.stderr).splitlines()
    about_it = [line for line in said if UNIT.stem in line]
    assert verified.returncode == 0 and not about_it, said
    # The hardening stays: systemd's own exposure score (0 to 10, "OK" up to 4.x) at most 2.0.
    scored = run(analyze, "security", "--offline=yes", "--threshold=20", unit)
    assert scored.returncode == 0, scored.stdout[-3000:]


def test_the_environment_file_sets_flags_the_agent_accepts_where_the_unit_lets_it_write() -> None:
    env = environment_file(ENV_FILE.read_text())
    names = {flag.env(agent_config.ENV_PREFIX) for flag in agent_config.FLAGS}
    assert set(env) <= names, f"not an agent variable: {sorted(set(env) - names)}"
    if not Path(env["ROLLGUARD_AGENT_JAVA"]).is_file():
        env["ROLLGUARD_AGENT_JAVA"] = "java"  # the agent checks that java exists
    parser = agent_config.build_parser(Parser(prog="rollguard-agent"))
    settings = agent_config.load(parser.parse_args([]), env)
    assert settings.jmx_url == "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"
    assert settings.probe_listen.host == "127.0.0.1"
    unit = unit_values(UNIT.read_text())
    assert unit["EnvironmentFile"] == ["/etc/rollguard/agent.env"]
    # The timeline is the unit's StateDirectory, the one folder it may write besides the cache.
    (state,) = unit["StateDirectory"]
    assert settings.data_dir == Path("/var/lib") / state
    assert str(settings.data_dir) in unit["ReadWritePaths"]
    for path in (settings.tls_cert, settings.tls_key, settings.tls_ca):
        assert path.parent == Path("/etc/rollguard/agent"), path

"""The JVMs the agent runs: finding `java`, starting and killing a JVM, building the JMX reader.

Both JMX backends read MBeans through a child JVM, never one embedded in the agent, so that a
hung JMX call is ended by killing a process. Each JVM starts in its own process group and
`stop_jvm` kills the whole group: whatever the JVM started goes with it, and the agent is
never left waiting on a process it cannot end.

The persistent backend's reader (`java/RollguardJmx.java`) is compiled once into a cache folder
(`reader_classpath()`), by the Java runtime's own compiler module (`java -m jdk.compiler/...`),
so a JRE with jdk.compiler is enough and no JDK tools are needed; a `RollguardJmx.class` shipped
beside the source (container images compile it at build time) is used as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from rollguard.agent.readings import FailureReason, SampleError

READER_SOURCE = Path(__file__).with_name("java") / "RollguardJmx.java"
READER_CLASS = "RollguardJmx"
COMPILE_TIMEOUT = 120.0


def find_java(java: str) -> str | None:
    """The executable `java` names (a path, or a name looked up on PATH); None if there is none."""
    return shutil.which(java)


async def start_jvm(command: list[str], java: str, *, stdin: int) -> asyncio.subprocess.Process:
    """A JVM in its own process group (so that `stop_jvm` ends it with all it started), its
    stdout and stderr piped; a SampleError if it cannot be started."""
    try:
        return await asyncio.create_subprocess_exec(
            *command,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=1 << 20,
        )
    except OSError as exc:
        raise SampleError(
            FailureReason.JMX_ERROR, f"cannot start {java!r}: {exc.strerror}"
        ) from exc


async def stop_jvm(process: asyncio.subprocess.Process) -> None:
    """Kill the JVM's process group unless it has exited, and reap it (even when cancelled)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(process.wait())


def cache_dir() -> Path:
    """Where the compiled reader is kept: $XDG_CACHE_HOME/rollguard or ~/.cache/rollguard."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rollguard"


def reader_classpath(java: str, cache: Path | None = None) -> Path:
    """The class path of the compiled reader, compiling it first if no build of this source is
    there yet. Raises RuntimeError naming the cause (no compiler module, unwritable cache)."""
    if READER_SOURCE.with_suffix(".class").is_file():
        return READER_SOURCE.parent
    digest = hashlib.sha256(READER_SOURCE.read_bytes()).hexdigest()[:16]
    cache = cache or cache_dir()
    target = cache / f"jmx-reader-{digest}"
    if (target / f"{READER_CLASS}.class").is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".compiling-", dir=cache))
    except OSError as exc:
        raise RuntimeError(f"cannot write the JMX reader's cache {cache}: {exc.strerror}") from None
    try:
        compile_reader(java, staging)
        try:
            staging.rename(target)  # atomic; another agent may have won the race: fine
        except OSError:
            if not (target / f"{READER_CLASS}.class").is_file():
                raise
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def compile_reader(java: str, folder: Path) -> None:
    """Compile the reader into `folder` with the runtime's jdk.compiler module (container
    images run this at build time, with `folder` = the source's own folder)."""
    command = [
        java,
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-m",
        "jdk.compiler/com.sun.tools.javac.Main",
        "-nowarn",
        "-d",
        str(folder),
        str(READER_SOURCE),
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False
        )
    except FileNotFoundError:
        raise RuntimeError(f"{java!r} not found") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"compiling the JMX reader took more than {COMPILE_TIMEOUT:g}s"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(
            f"cannot compile the JMX reader with {java!r} (it needs the jdk.compiler module): "
            f"{last[:300]}"
        )

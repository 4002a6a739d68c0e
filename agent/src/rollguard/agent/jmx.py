"""Reading MBeans through jmxquery, with a hard time limit that jmxquery itself lacks.

jmxquery runs its bundled JMXQuery jar in a fresh JVM for every query. Its own `timeout=` path
is broken (a hung JMX port raises AttributeError) and its `query()` blocks the calling thread.
So the agent uses jmxquery's jar and query syntax but runs the JVM itself, asynchronously, in
its own process group, and kills the whole group when the time limit passes. One call reads
every MBean the agent needs (the queries are joined with `;`).

The JMX credentials reach the jar as `-u USER -p PASSWORD` arguments, the only way it takes
them: the command line is never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jmxquery

from rollguard.agent.readings import FailureReason, MBeanValue, Query, SampleError

logger = logging.getLogger(__name__)

JAR_PATH = jmxquery.JAR_PATH

# A short-lived JVM that reads a handful of MBeans: skip the optimising compiler and the
# parallel collectors. This saves about 12 % of the CPU of a round (docs/benchmarks.md).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx32m")


@dataclass(frozen=True, slots=True)
class JmxCredentials:
    username: str
    password: str

    def __repr__(self) -> str:
        return f"JmxCredentials(username={self.username!r}, password=***)"


def service_url(target: str) -> str:
    """`HOST:PORT` becomes the standard RMI service URL; a `service:jmx:` URL is kept."""
    if target.startswith("service:jmx:"):
        return target
    host, sep, port = target.rpartition(":")
    if not sep or not host or not re.fullmatch("[0-9]{1,5}", port) or not 0 < int(port) < 65536:
        raise ValueError(f"{target!r} is neither HOST:PORT nor a service:jmx: URL")
    return f"service:jmx:rmi:///jndi/rmi://{host}:{port}/jmxrmi"


class JmxQueryBackend:
    """One JMX round per `read()`: a JVM running jmxquery's jar, killed at the deadline."""

    name = "jmxquery"

    def __init__(
        self,
        url: str,
        *,
        credentials: JmxCredentials | None = None,
        java: str = "java",
        queries: Sequence[Query],
    ) -> None:
        self.url = url
        self._credentials = credentials
        self._java = java
        self._query = "".join(f"{q.pattern}/{q.attribute};" for q in queries)

    def _command(self) -> list[str]:
        command = [self._java, *JVM_OPTIONS, "-jar", JAR_PATH, "-url", self.url, "-json"]
        if self._credentials is not None:
            command += ["-u", self._credentials.username, "-p", self._credentials.password]
        return [*command, "-q", self._query]

    async def read(self, timeout: float) -> list[MBeanValue]:
        """Every MBean value matched by the queries, within `timeout`; SampleError otherwise.

        The sampler retries transient errors with the shared retry policy; a gauge that Kafka
        unregisters between the jar's listing and its read (when recovery ends) fails the whole
        call as a `jmx-error`, which is the transient error this is for.
        """
        process = await start_jvm(self._command(), self._java, stdin=asyncio.subprocess.DEVNULL)
        try:
            async with asyncio.timeout(timeout):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            raise timed_out(self.url) from None
        finally:
            await stop_jvm(process)
        return parse_output(process.returncode or 0, stdout, stderr, self.url)

    async def close(self) -> None:
        """Nothing is held between reads."""


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


def timed_out(url: str) -> SampleError:
    return SampleError(
        FailureReason.JMX_TIMEOUT, f"no answer from JMX at {url} within the sample time limit"
    )


def parse_output(returncode: int, stdout: bytes, stderr: bytes, url: str) -> list[MBeanValue]:
    """Turn what the JMXQuery jar printed into values, or a classified SampleError."""
    text = stdout.decode("utf-8", "replace").strip()
    error_text = stderr.decode("utf-8", "replace")
    if "SecurityException" in error_text or "Authentication failed" in error_text:
        raise SampleError(FailureReason.JMX_AUTH_FAILED, f"JMX at {url} refused the credentials")
    try:
        document = json.loads(text, strict=False) if text else None
    except ValueError:
        document = None
    if isinstance(document, dict) and "error" in document:
        reason = (
            FailureReason.JMX_UNREACHABLE
            if document.get("error") == "connection-error"
            else FailureReason.JMX_ERROR
        )
        message = " ".join(str(document.get("message", document["error"])).split())
        raise SampleError(reason, f"JMX at {url}: {message[:300]}")
    if returncode != 0 or not isinstance(document, list):
        raise SampleError(
            FailureReason.JMX_ERROR,
            f"JMX query to {url} failed (exit {returncode}): {_last_line(error_text or text)}",
        )
    values = []
    for entry in document:
        if not isinstance(entry, dict) or "mBeanName" not in entry:
            raise SampleError(
                FailureReason.JMX_ERROR, f"unexpected jmxquery output: {entry!r:.200}"
            )
        values.append(
            MBeanValue(str(entry["mBeanName"]), str(entry.get("attribute")), entry.get("value"))
        )
    return values


def _last_line(text: str) -> str:
    """The innermost cause of a Java stack trace, which is the part a person can act on."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line for line in lines if not line.startswith("at ") and not line.startswith("...")]
    return (causes[-1] if causes else "no output")[:300]


def read_credentials(path: Path) -> JmxCredentials:
    """A JMX password file line, `USERNAME PASSWORD` (comments start with #)."""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            break
        return JmxCredentials(fields[0], fields[1])
    raise ValueError("expected one line 'USERNAME PASSWORD'")

"""The jmxquery backend: jmxquery's jar in a new JVM for every round, with a hard time limit.

jmxquery runs its bundled JMXQuery jar in a fresh JVM for every query. Its own `timeout=` path
is broken (a hung JMX port raises AttributeError) and its `query()` blocks the calling thread.
So the agent uses jmxquery's jar and query syntax but runs the JVM itself, asynchronously, in
its own process group (`rollguard.agent.jvm`), and kills the whole group when the time limit
passes. One call reads every MBean the agent needs (the queries are joined with `;`).

The JMX credentials reach the jar as `-u USER -p PASSWORD` arguments, the only way it takes
them: the command line is never logged, and the agent warns at start-up
(`rollguard.agent.jmx_choice`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import jmxquery

from rollguard.agent.jmx import JmxCredentials, timed_out
from rollguard.agent.jvm import start_jvm, stop_jvm
from rollguard.agent.readings import FailureReason, MBeanValue, Query, SampleError

JAR_PATH = jmxquery.JAR_PATH

# A short-lived JVM that reads a handful of MBeans: skip the optimising compiler and the
# parallel collectors. This saves about 12 % of the CPU of a round (docs/benchmarks.md).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx32m")


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

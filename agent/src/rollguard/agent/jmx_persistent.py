"""The persistent JMX backend: one JVM for the agent's life, one JMX connection held open.

jmxquery starts a JVM for every round, about 250 ms of CPU each. This backend starts one small
JVM (`java/RollguardJmx.java`, beside this module) that keeps a remote JMX connection open and
answers a `read` line on its stdin with one JSON line: well under a millisecond of CPU per round.

It keeps what the jmxquery backend guarantees:
- the same hard time limit: a read that outlasts it kills the JVM's whole process group (a hung
  JMX port cannot hang the agent), and the next round starts a new JVM;
- but the JVM's own start (before it touches JMX) is not a read: on a busy host or a pod with a
  small CPU limit it can take longer than a read's time limit, and a start killed at that limit
  would start again, and be killed again, forever (the very loop rollguard exists to prevent).
  A read that times out while the JVM starts says so (jmx-timeout) and leaves the start going;
  the next read waits on the same start. A start that has not finished in `START_LIMIT_S` is
  killed;
- the same failure reasons (jmx-unreachable, jmx-auth-failed, jmx-timeout, jmx-error);
- reconnection: a connection broken by a broker restart is opened again within the same read.
And one better: the JMX password reaches the JVM on its stdin, never on a command line.

The JVM runs the reader compiled once into a cache folder (`rollguard.agent.jvm.reader_classpath`);
`python -m rollguard.agent.jmx_persistent` compiles it beside its source instead (container
images do this at build time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from rollguard.agent.jmx import JmxCredentials, timed_out
from rollguard.agent.jvm import READER_CLASS, READER_SOURCE, compile_reader, start_jvm, stop_jvm
from rollguard.agent.readings import FailureReason, MBeanValue, Query, SampleError

logger = logging.getLogger(__name__)

# A long-lived JVM that reads a handful of MBeans a second: the client compiler only, a serial
# collector, small heap, stacks and code cache, no perf-data file. About 48 MB resident
# (docs/benchmarks.md).
JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-Xmx16m",
    "-Xss256k",
    "-XX:ReservedCodeCacheSize=16m",
    "-XX:-UsePerfData",
    "-Xrs",
)
# The longest a reader JVM may take to start (to print its first line, before any JMX), across
# reads: seconds on an idle host, tens of seconds on a very busy one.
START_LIMIT_S = 120.0
_ERRORS = {
    "connection-error": FailureReason.JMX_UNREACHABLE,
    "auth-failed": FailureReason.JMX_AUTH_FAILED,
}


class PersistentJmxBackend:
    """`read()` asks the long-lived reader JVM, starting it when there is none."""

    name = "persistent"

    def __init__(
        self,
        url: str,
        *,
        classpath: Path,
        credentials: JmxCredentials | None = None,
        java: str = "java",
        queries: Sequence[Query],
    ) -> None:
        self.url = url
        self._classpath = classpath
        self._credentials = credentials
        self._java = java
        self._queries = list(queries)
        self._process: asyncio.subprocess.Process | None = None  # started and ready
        self._starting: asyncio.Task[asyncio.subprocess.Process] | None = None
        self._starting_process: asyncio.subprocess.Process | None = None
        self._start_began = 0.0
        self._stderr: deque[str] = deque(maxlen=20)
        self._stderr_task: asyncio.Task[None] | None = None
        self.starts = 0  # JVMs started: one, unless reads timed out or the JVM died

    def _command(self) -> list[str]:
        return [
            self._java,
            *JVM_OPTIONS,
            "-cp",
            str(self._classpath),
            READER_CLASS,
            self.url,
            *(part for query in self._queries for part in query),
        ]

    async def _ready(self) -> asyncio.subprocess.Process:
        """The ready reader JVM: the one there is, or the one starting (started if none)."""
        if self._process is not None:
            return self._process
        if self._starting is None:
            self._start_began = asyncio.get_running_loop().time()
            self._starting = asyncio.create_task(self._start())
        # shielded: a read that times out leaves the start going for the next read
        process = await asyncio.shield(self._starting)
        self._process, self._starting, self._starting_process = process, None, None
        return process

    def _still_starting(self) -> float | None:
        """How long the JVM has been starting, if it is and may go on."""
        if self._starting is None or self._starting.done():
            return None
        elapsed = asyncio.get_running_loop().time() - self._start_began
        return elapsed if elapsed < START_LIMIT_S else None

    async def _start(self) -> asyncio.subprocess.Process:
        process = await start_jvm(self._command(), self._java, stdin=asyncio.subprocess.PIPE)
        self._starting_process = process
        self.starts += 1
        self._stderr.clear()
        self._stderr_task = asyncio.create_task(self._drain_stderr(process))
        assert process.stdin is not None
        secret = ""
        if self._credentials is not None:
            secret = f"{self._credentials.username} {self._credentials.password}"
        process.stdin.write(secret.encode() + b"\n")
        await process.stdin.drain()
        await self._answer(process)  # {"ready": true}
        return process

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            text = line.decode("utf-8", "replace").strip()
            if text:
                self._stderr.append(text)

    async def _answer(self, process: asyncio.subprocess.Process) -> object:
        assert process.stdout is not None
        line = await process.stdout.readline()
        if not line:
            code = await process.wait()
            last = self._stderr[-1] if self._stderr else "no output"
            raise SampleError(
                FailureReason.JMX_ERROR, f"the JMX reader JVM exited (exit {code}): {last[:300]}"
            )
        try:
            return json.loads(line)
        except ValueError:
            raise SampleError(
                FailureReason.JMX_ERROR, f"unexpected output of the JMX reader: {line!r:.200}"
            ) from None

    async def read(self, timeout: float) -> list[MBeanValue]:
        """Every MBean value matched by the queries, within `timeout`; SampleError otherwise."""
        try:
            async with asyncio.timeout(timeout):
                process = await self._ready()
                assert process.stdin is not None
                process.stdin.write(b"read\n")
                await process.stdin.drain()
                answer = await self._answer(process)
        except BaseException as exc:
            starting = self._still_starting()
            if isinstance(exc, TimeoutError) and starting is not None:
                raise SampleError(
                    FailureReason.JMX_TIMEOUT,
                    f"the JMX reader JVM has been starting for {starting:.0f}s (a busy host?); "
                    f"{self.url} is read once it has started",
                ) from None
            # Timed out, a JVM that died or spoke nonsense, a broken pipe, cancelled mid-read,
            # or a start past its limit: its next answer could not be matched to its
            # question, so the JVM goes.
            await self._stop()
            if isinstance(exc, TimeoutError):
                raise timed_out(self.url) from None
            raise
        return parse_answer(answer, self.url)

    async def _stop(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
        process = self._process or self._starting_process
        self._process = self._starting_process = None
        if process is None:
            return
        await stop_jvm(process)
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task

    async def close(self) -> None:
        """Stop the reader JVM (EOF on its stdin ends it; killed if it does not)."""
        process = self._process
        if process is not None and process.returncode is None and process.stdin is not None:
            process.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.wait()), 1.0)
        await self._stop()


def parse_answer(answer: object, url: str) -> list[MBeanValue]:
    """One answer line of the reader: values, or a classified SampleError."""
    if isinstance(answer, dict) and "error" in answer:
        reason = _ERRORS.get(str(answer["error"]), FailureReason.JMX_ERROR)
        message = " ".join(str(answer.get("message", answer["error"])).split())
        if reason is FailureReason.JMX_AUTH_FAILED:
            raise SampleError(reason, f"JMX at {url} refused the credentials")
        raise SampleError(reason, f"JMX at {url}: {message[:300]}")
    values = answer.get("values") if isinstance(answer, dict) else None
    if not isinstance(values, list):
        raise SampleError(FailureReason.JMX_ERROR, f"unexpected JMX reader answer: {answer!r:.200}")
    out = []
    for entry in values:
        if not isinstance(entry, dict) or "mBeanName" not in entry:
            raise SampleError(
                FailureReason.JMX_ERROR, f"unexpected JMX reader entry: {entry!r:.200}"
            )
        name, attribute = str(entry["mBeanName"]), str(entry.get("attribute"))
        out.append(MBeanValue(name, attribute, entry.get("value")))
    return out


if __name__ == "__main__":  # python -m rollguard.agent.jmx_persistent: compile beside the source
    compile_reader("java", READER_SOURCE.parent)

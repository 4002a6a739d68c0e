"""What the sampler asks of a JMX reader, and which reader the agent gets.

Two backends read the broker's MBeans through a child JVM (`rollguard.agent.jvm`):

- `persistent` (the default), `rollguard.agent.jmx_persistent`: one JVM and one JMX connection
  held open for the agent's life; the password reaches it on stdin;
- `jmxquery`, `rollguard.agent.jmx_jmxquery`: jmxquery's jar in a new JVM for every round; the
  password is on its command line, the only way the jar takes it.

Both give the same values (`rollguard.agent.readings.MBeanValue`) and fail with the same
reasons (`SampleError`: jmx-unreachable, jmx-auth-failed, jmx-timeout, jmx-error), within the
same hard time limit. This module holds what they share: the protocol, the JMX address and
credentials, and the choice between them (`--jmx-backend`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rollguard.agent.jvm import reader_classpath
from rollguard.agent.readings import QUERIES, FailureReason, MBeanValue, Query, SampleError
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

BACKENDS = ("persistent", "jmxquery")


class JmxBackend(Protocol):
    name: str

    async def read(self, timeout: float) -> list[MBeanValue]:
        """Every MBean value the queries match, within `timeout` seconds; SampleError otherwise."""
        ...

    async def close(self) -> None:
        """Stop whatever the backend holds (its JVM); it is not used again."""
        ...


@dataclass(frozen=True, slots=True)
class JmxCredentials:
    username: str
    password: str

    def __repr__(self) -> str:
        return f"JmxCredentials(username={self.username!r}, password=***)"


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


def service_url(target: str) -> str:
    """`HOST:PORT` becomes the standard RMI service URL; a `service:jmx:` URL is kept."""
    if target.startswith("service:jmx:"):
        return target
    host, sep, port = target.rpartition(":")
    if not sep or not host or not re.fullmatch("[0-9]{1,5}", port) or not 0 < int(port) < 65536:
        raise ValueError(f"{target!r} is neither HOST:PORT nor a service:jmx: URL")
    return f"service:jmx:rmi:///jndi/rmi://{host}:{port}/jmxrmi"


def timed_out(url: str) -> SampleError:
    """The error of a read that outlasted its time limit (its JVM has been killed)."""
    return SampleError(
        FailureReason.JMX_TIMEOUT, f"no answer from JMX at {url} within the sample time limit"
    )


async def open_backend(
    kind: str,
    url: str,
    *,
    credentials: JmxCredentials | None,
    java: str,
    queries: Sequence[Query] = QUERIES,
) -> JmxBackend:
    """The backend `--jmx-backend` names, ready to read; ConfigError if it cannot be (the
    persistent backend's reader does not compile with this Java runtime)."""
    # Imported here, not at the top: each backend imports this module's types.
    from rollguard.agent.jmx_jmxquery import JmxQueryBackend
    from rollguard.agent.jmx_persistent import PersistentJmxBackend

    if kind not in BACKENDS:  # the flag's parser allows only these: a caller's mistake
        raise ValueError(f"unknown JMX backend {kind!r}, expected one of {', '.join(BACKENDS)}")
    if kind == "jmxquery":
        if credentials is not None:
            logger.warning(
                "--jmx-backend jmxquery: jmxquery's JMX reader takes the password only as a "
                "command-line argument (-p), which other processes on this host can read (ps, "
                "/proc/PID/cmdline) for the quarter of a second each round's JVM runs; the "
                "persistent backend (the default) gives it to its JVM on stdin"
            )
        return JmxQueryBackend(url, credentials=credentials, java=java, queries=queries)
    try:
        classpath = await asyncio.to_thread(reader_classpath, java)
    except RuntimeError as exc:
        raise ConfigError(
            f"--jmx-backend persistent: {exc} (--jmx-backend jmxquery needs no compiler)"
        ) from None
    return PersistentJmxBackend(
        url, classpath=classpath, credentials=credentials, java=java, queries=queries
    )

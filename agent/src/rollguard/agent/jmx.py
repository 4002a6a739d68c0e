"""What the sampler asks of a JMX reader, and what the two readers share.

Two backends read the broker's MBeans through a child JVM (`rollguard.agent.jvm`):

- `persistent` (the default), `rollguard.agent.jmx_persistent`: one JVM and one JMX connection
  held open for the agent's life; the password reaches it on stdin;
- `jmxquery`, `rollguard.agent.jmx_jmxquery`: jmxquery's jar in a new JVM for every round; the
  password is on its command line, the only way the jar takes it.

Both give the same values (`rollguard.agent.readings.MBeanValue`) and fail with the same
reasons (`SampleError`: jmx-unreachable, jmx-auth-failed, jmx-timeout, jmx-error), within the
same hard time limit. This module holds what they share: the protocol, the backends' names, the
JMX address and credentials, and the timeout error. It imports neither backend: they import it,
and `rollguard.agent.jmx_choice` (`--jmx-backend`) imports them, so the imports run one way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rollguard.agent.readings import FailureReason, MBeanValue, SampleError

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

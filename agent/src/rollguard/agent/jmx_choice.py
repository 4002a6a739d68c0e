"""Which JMX reader the agent gets: `--jmx-backend`'s choice, made once at start-up.

The one module that knows both backends (`rollguard.agent.jmx_persistent`,
`rollguard.agent.jmx_jmxquery`). It sits above them and above `rollguard.agent.jmx`, the types
they share, so the imports run one way: the server asks here, the sampler knows only the
`JmxBackend` protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from rollguard.agent.jmx import BACKENDS, JmxBackend, JmxCredentials
from rollguard.agent.jmx_jmxquery import JmxQueryBackend
from rollguard.agent.jmx_persistent import PersistentJmxBackend
from rollguard.agent.jvm import reader_classpath
from rollguard.agent.readings import QUERIES, Query
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


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

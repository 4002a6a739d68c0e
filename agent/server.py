"""Putting the agent together: sockets, TLS, sampler, two HTTP servers, and a clean stop.

Everything that can fail because of the user's input is done before anything serves: TLS files
are loaded and both ports are bound first, so a bad setting exits 2 with nothing left
listening. SIGTERM and SIGINT stop the servers gracefully (bounded), cancel the sampler (which
kills a JMX round in flight) and remove the ready file.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import signal
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from agent.api import create_api_app, create_probe_app
from agent.config import Address, AgentSettings
from agent.jmx import JmxQueryBackend
from agent.jmx_persistent import PersistentJmxBackend, prepare
from agent.metrics import AgentMetrics
from agent.readings import QUERIES
from agent.readyfile import ReadyFile
from agent.sampler import JmxBackend, Sampler
from agent.timeline import TimelineRecorder
from agent.tls_reload import ReloadingServerContext
from shared.errors import ConfigError
from shared.timeline import TimelineJournal

logger = logging.getLogger(__name__)

# SIGTERM must stop the agent within 5 s; keep-alive connections get this long to finish.
GRACEFUL_SHUTDOWN_SECONDS = 2


class AgentCrashed(Exception):
    """A part of the agent that runs forever ended; the agent stops with exit code 1."""


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the agent, which runs two of them."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(address: Address, what: str) -> socket.socket:
    """A listening socket, or a ConfigError that says why not (in use, no such address...)."""
    try:
        infos = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(
            f"{what} {address}: cannot resolve {address.host!r} ({exc.strerror})"
        ) from None
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"{what} {address}: port {address.port} is already in use") from None
        raise ConfigError(f"{what} {address}: cannot listen ({exc.strerror})") from None
    sock.set_inheritable(True)
    return sock


def _bound(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _uvicorn(app: Any, tls: ssl.SSLContext | None) -> _Server:
    factory: Callable[..., ssl.SSLContext] | None = None
    if tls is not None:

        def factory(
            config: uvicorn.Config, default: Callable[[], ssl.SSLContext]
        ) -> ssl.SSLContext:
            return tls

    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        ssl_context_factory=factory,
        ssl_certfile="unused" if tls is not None else None,  # marks the scope as https
    )
    return _Server(config)


async def _jmx_backend(settings: AgentSettings) -> JmxBackend:
    if settings.jmx_backend == "jmxquery":
        return JmxQueryBackend(
            settings.jmx_url,
            credentials=settings.jmx_credentials,
            java=settings.java,
            queries=QUERIES,
        )
    try:
        classpath = await asyncio.to_thread(prepare, settings.java)
    except RuntimeError as exc:
        raise ConfigError(
            f"--jmx-backend persistent: {exc} (--jmx-backend jmxquery needs no compiler)"
        ) from None
    return PersistentJmxBackend(
        settings.jmx_url,
        classpath=classpath,
        credentials=settings.jmx_credentials,
        java=settings.java,
        queries=QUERIES,
    )


async def serve(settings: AgentSettings) -> None:
    """Run the agent until SIGTERM or SIGINT. Raises ConfigError before serving anything."""
    backend = await _jmx_backend(settings)
    sampler = Sampler(backend, settings.sampler, retry=settings.retry)
    metrics = AgentMetrics(sampler, time.monotonic)
    reloads = metrics.tls_reloads
    tls = ReloadingServerContext(
        settings.tls_cert,
        settings.tls_key,
        settings.tls_ca,
        on_reload=lambda ok: reloads.labels(result="ok" if ok else "error").inc(),
    )
    journal = None
    if settings.data_dir is not None:
        try:
            journal = TimelineJournal(
                settings.data_dir,
                segment_bytes=settings.timeline_segment_bytes,
                retention_seconds=settings.timeline_retention_seconds,
            )
        except OSError as exc:
            raise ConfigError(f"--data-dir {settings.data_dir}: {exc.strerror}") from None
        recorder = TimelineRecorder(
            journal, settings.node_id, heartbeat=settings.heartbeat_interval
        )
        sampler.subscribe(recorder.update)
    api_socket = bind(settings.listen, "--listen")
    try:
        probe_socket = bind(settings.probe_listen, "--probe-listen")
    except ConfigError:
        api_socket.close()
        raise

    ready_file = ReadyFile(settings.ready_file) if settings.ready_file else None
    if ready_file is not None:
        ready_file.clear()
        sampler.subscribe(ready_file.update)

    api = _uvicorn(create_api_app(sampler, journal), tls.listening)
    probe = _uvicorn(create_probe_app(sampler, metrics), None)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    background = [
        asyncio.create_task(sampler.run(), name="sampler"),
        asyncio.create_task(tls.watch(settings.tls_reload_interval), name="tls-watch"),
    ]
    servers = [
        asyncio.create_task(api.serve(sockets=[api_socket]), name="api"),
        asyncio.create_task(probe.serve(sockets=[probe_socket]), name="probe"),
    ]
    logger.info(
        "API listening on https://%s (mutual TLS), probes on http://%s, JMX at %s (%s)",
        _bound(api_socket),
        _bound(probe_socket),
        settings.jmx_url,
        backend.name,
    )
    # Everything loaded so far lives as long as the agent: out of the collector's sight, so
    # that full collections (which pause every request in flight) stay short.
    gc.collect()
    gc.freeze()
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait(
        [stopper, *servers, *background], return_when=asyncio.FIRST_COMPLETED
    )
    failed = [task for task in done if task is not stopper]
    for task in failed:
        # A server or background task never ends on its own: that is a bug, not a stop.
        logger.error(
            "%s ended unexpectedly: %r",
            task.get_name(),
            task.exception() if not task.cancelled() else "cancelled",
        )
    logger.info("stopping")
    for server in (api, probe):
        server.should_exit = True
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    await asyncio.gather(*servers, return_exceptions=True)
    stopper.cancel()
    await backend.close()
    if journal is not None:
        await recorder.close()
    if ready_file is not None:
        ready_file.clear()
    logger.info("stopped")
    if failed:
        raise AgentCrashed(", ".join(task.get_name() for task in failed))

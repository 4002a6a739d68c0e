"""Putting the agent together: sockets, TLS, sampler, two HTTP servers, and a clean stop.

Everything that can fail because of the user's input is done before anything serves: TLS files
are loaded and both ports are bound first, so a bad setting exits 2 with nothing left
listening. SIGTERM and SIGINT (through `rollguard.shared.cli.run_until_signal`, which cancels
`serve`) stop the servers gracefully, cancel the sampler (which kills a JMX round in flight) and
remove the ready file; the process exits 0 after SIGTERM, 3 after SIGINT, within 2 s.

Each port has its own connection limit and HTTP bounds (`connections.py`), so a flood of one
cannot take the other down: `/v1/ready` and `/metrics` answer while the API port is saturated.
uvicorn serves HTTP on both; on the API port the TLS handshake is the agent's (`tls_gate.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import uvicorn

from rollguard.agent.api import create_api_app, create_probe_app
from rollguard.agent.config import AgentSettings, raise_file_limit
from rollguard.agent.connections import ConnectionLimiter, HttpLimits, Port, Stage
from rollguard.agent.http_protocol import bound_protocol
from rollguard.agent.jmx_choice import open_backend
from rollguard.agent.memory import MemoryTrimmer
from rollguard.agent.metrics import AgentMetrics
from rollguard.agent.readyfile import ReadyFile
from rollguard.agent.refusals import Refusals
from rollguard.agent.sampler import Sampler
from rollguard.agent.timeline_recorder import TimelineRecorder
from rollguard.agent.timeline_store import TimelineStore
from rollguard.agent.tls_gate import CERTIFICATE_REASONS, AlertingSSLObject, TlsPort
from rollguard.agent.tls_reload import ReloadingServerContext
from rollguard.shared.converters import HostPort
from rollguard.shared.errors import ConfigError

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


def bind(address: HostPort, what: str) -> socket.socket:
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


def _uvicorn(app: Any, protocol: type[asyncio.Protocol], limits: HttpLimits) -> _Server:
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        http=protocol,
        ws="none",  # the agent speaks no WebSocket: an Upgrade is an ordinary request
        timeout_keep_alive=round(limits.idle_timeout),
    )
    return _Server(config)


def _port(
    name: str, limit: int, limits: HttpLimits, metrics: AgentMetrics, trimmer: MemoryTrimmer
) -> Port:
    def dropped(reason: str) -> None:
        metrics.connections_dropped.labels(port=name, reason=reason).inc()
        trimmer.dropped()

    return Port(name, ConnectionLimiter(limit, on_drop=dropped), limits, dropped)


async def serve(settings: AgentSettings) -> None:
    """Run the agent until SIGTERM or SIGINT. Raises ConfigError before serving anything."""
    raise_file_limit(settings)
    backend = await open_backend(
        settings.jmx_backend,
        settings.jmx_url,
        credentials=settings.jmx_credentials,
        java=settings.java,
    )
    # One id per start of the agent: in every report (agentBootId) and every timeline record.
    boot_id = uuid.uuid4().hex
    sampler = Sampler(backend, settings.sampler, retry=settings.retry, boot_id=boot_id)
    metrics = AgentMetrics(sampler, time.monotonic)
    reloads = metrics.tls_reloads
    tls = ReloadingServerContext(
        settings.tls_cert,
        settings.tls_key,
        settings.tls_ca,
        settings.tls_crl,
        sslobject_class=AlertingSSLObject,
        on_reload=lambda ok: reloads.labels(result="ok" if ok else "error").inc(),
    )
    store = None
    if settings.data_dir is not None:
        try:
            store = TimelineStore(
                settings.data_dir,
                segment_bytes=settings.timeline_segment_bytes,
                retention_seconds=settings.timeline_retention_seconds,
            )
        except OSError as exc:
            raise ConfigError(f"--data-dir {settings.data_dir}: {exc.strerror}") from None
        recorder = TimelineRecorder(
            store,
            settings.node_id,
            heartbeat=settings.heartbeat_interval,
            boot_id=boot_id,
            on_write_error=metrics.timeline_write_errors.inc,
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

    trimmer = MemoryTrimmer()
    api_port = _port("api", settings.max_connections, settings.api_http, metrics, trimmer)
    probe_port = _port(
        "probe", settings.probe_max_connections, settings.probe_http, metrics, trimmer
    )
    metrics.watch_ports([api_port, probe_port])

    def refused(reason: str) -> None:
        metrics.tls_handshake_failures.labels(reason=reason).inc()
        trimmer.dropped()

    refusals = Refusals(refused, loud=CERTIFICATE_REASONS)
    gate = TlsPort(
        api_port,
        lambda: tls.current,
        handshake_timeout=settings.handshake_timeout,
        refusals=refusals,
    )
    api = _uvicorn(create_api_app(sampler, store), gate.protocol_class(), settings.api_http)
    probe = _uvicorn(
        create_probe_app(sampler, metrics), bound_protocol(probe_port), settings.probe_http
    )

    background = [
        asyncio.create_task(sampler.run(), name="sampler"),
        asyncio.create_task(tls.watch(settings.tls_reload_interval), name="tls-watch"),
        asyncio.create_task(trimmer.run(), name="memory-trim"),
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
    # SIGTERM or SIGINT cancels this coroutine (rollguard.shared.cli.run_until_signal): the
    # stop below runs either way, and the cancel goes on once it is done.
    stopping = asyncio.current_task()
    done: set[asyncio.Task[Any]] = set()
    try:
        done, _ = await asyncio.wait([*servers, *background], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        if stopping is not None:
            stopping.uncancel()  # let the graceful stop's own awaits run
    failed = list(done)
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
    api_port.limiter.close_all(below=Stage.UNPROVEN)  # handshakes in flight
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    await asyncio.gather(*servers, return_exceptions=True)
    await backend.close()
    if store is not None:
        await recorder.close()
    if ready_file is not None:
        ready_file.clear()
    logger.info("stopped")
    if failed:
        raise AgentCrashed(", ".join(task.get_name() for task in failed))

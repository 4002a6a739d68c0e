"""The agent's settings: one frozen object, built once from flags and the environment.

The flags are declared like every rollguard command's, as an `Options` dataclass
(`rollguard.shared.settings`): `--some-flag` can also be given as `ROLLGUARD_AGENT_SOME_FLAG`; a
flag on the command line wins over the environment, which wins over the default. Each value is
checked here, and a bad one is a ConfigError that names the flag or variable it came from.
Numbers are ASCII digits (`rollguard.shared.converters`) and every number has a range: a value
outside it is refused, not clamped. `AgentOptions.settings` then derives the `AgentSettings` the
server runs with (the sampler's intervals, the HTTP limits, the JMX credentials read).
"""

from __future__ import annotations

import argparse
import resource
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rollguard.agent.connections import HttpLimits
from rollguard.agent.jmx import BACKENDS, JmxCredentials, read_credentials, service_url
from rollguard.agent.jvm import find_java
from rollguard.agent.readyfile import check_ready_file
from rollguard.agent.sampler import SamplerSettings
from rollguard.shared.converters import (
    HostPort,
    choice,
    duration,
    duration_between,
    integer,
    listen_address,
)
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.retry_options import RetryOptions
from rollguard.shared.settings import Options, option, same
from rollguard.shared.suggest import did_you_mean

ENV_PREFIX = "ROLLGUARD_AGENT_"
DEFAULT_HTTP_LIMITS = HttpLimits(header_timeout=10.0, idle_timeout=15.0, max_header_bytes=8192)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    listen: HostPort
    tls_cert: Path
    tls_key: Path
    tls_ca: Path
    tls_reload_interval: float
    jmx_url: str
    jmx_credentials: JmxCredentials | None
    jmx_backend: str
    java: str
    event_loop: str
    sampler: SamplerSettings
    probe_listen: HostPort
    ready_file: Path | None
    log_level: str
    log_format: str
    retry: RetryPolicy
    data_dir: Path | None
    node_id: str
    heartbeat_interval: float
    timeline_segment_bytes: int
    timeline_retention_seconds: float
    tls_crl: Path | None = None
    max_connections: int = 64
    probe_max_connections: int = 32
    handshake_timeout: float = 5.0
    api_http: HttpLimits = DEFAULT_HTTP_LIMITS
    probe_http: HttpLimits = DEFAULT_HTTP_LIMITS


def _node_id(text: str) -> str:
    if not 0 < len(text) <= 253 or not text.isprintable() or text != text.strip():
        raise ValueError(f"{text[:60]!r} is not a node name (1 to 253 printable characters)")
    return text


def _level(text: str) -> str:
    levels = ("debug", "info", "warning", "error")
    if text.lower() not in levels:
        raise ValueError(f"{text!r} is not one of {', '.join(levels)}{did_you_mean(text, levels)}")
    return text.lower()


def _log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise ValueError(f"{text!r} is not 'text' or 'json'")
    return text


def _event_loop(text: str) -> str:
    loops = ("uvloop", "asyncio")
    if text not in loops:
        raise ValueError(f"{text!r} is not uvloop or asyncio{did_you_mean(text, loops)}")
    return text


def _hours(text: str) -> str:
    """--timeline-retention-hours N (before 0.2) as --timeline-retention Nh."""
    return f"{text.strip()}h"


# Between two rounds while the broker is RUNNING. A round is the only way a broken JMX connection
# (the broker restarted or died) is noticed, and until then the last sample is served: with the
# persistent backend a round costs ~2 ms of CPU, so it runs every second; jmxquery's costs a JVM.
RUNNING_INTERVALS = {"persistent": 1.0, "jmxquery": 10.0}


@dataclass(frozen=True, kw_only=True)
class _ServingOptions(Options):
    """The agent's own flags, in the order of its --help (the retry flags come after them)."""

    listen: HostPort = option(
        "0.0.0.0:8443", listen_address, "HOST:PORT of the mutual-TLS API", "HOST:PORT"
    )
    # --cert, --key and --cacert: the names every rollguard command (and curl) uses; the agent
    # called them --tls-cert, --tls-key and --tls-ca before 0.2 (still accepted, with a warning).
    cert: Path = option(
        None,
        Path,
        "PEM certificate the API presents (the broker's own will do)",
        "PATH",
        required=True,
        deprecated=(("tls-cert", same),),
    )
    key: Path = option(
        None,
        Path,
        "PEM private key of --cert (unencrypted)",
        "PATH",
        required=True,
        deprecated=(("tls-key", same),),
    )
    cacert: Path = option(
        None,
        Path,
        "PEM CA bundle that client certificates must chain to",
        "PATH",
        required=True,
        deprecated=(("tls-ca", same),),
    )
    crl: Path | None = option(
        None,
        Path,
        "PEM file with the CRL of every CA in --cacert; revoked client certificates are "
        "refused (checked on every handshake, reloaded like the other TLS files)",
        "PATH",
        deprecated=(("tls-crl", same),),
    )
    cert_reload_interval: float = option(
        "10s",
        duration,
        "time between checks of the TLS files for changes",
        "DURATION",
        deprecated=(("tls-reload-interval", same),),
    )
    jmx: str = option(
        "127.0.0.1:9999", service_url, "the broker's JMX: HOST:PORT or a service:jmx: URL", "TARGET"
    )
    jmx_credentials_file: Path | None = option(
        None, Path, "file with one line 'USERNAME PASSWORD' for JMX authentication", "PATH"
    )
    jmx_backend: str = option(
        "persistent",
        choice(*BACKENDS),
        "persistent (one JVM and one JMX connection held open) or jmxquery (a JVM per round)",
        "NAME",
    )
    java: str = option("java", str, "java executable that reads JMX", "PATH")
    event_loop: str = option(
        "uvloop",
        _event_loop,
        "uvloop (faster TLS and HTTP serving) or asyncio (the standard library's)",
        "NAME",
    )
    sample_interval: float = option(
        "1s", duration, "time between JMX rounds while the broker is not RUNNING", "DURATION"
    )
    running_interval: float | None = option(
        None,
        duration,
        "time between JMX rounds while the broker is RUNNING (default: 1s with the persistent "
        "backend, whose round costs about 2 ms of CPU, so a restart shows within a second or "
        "two; 10s with jmxquery, a JVM per round)",
        "DURATION",
    )
    sample_timeout: float = option("5s", duration, "hard time limit of one JMX round", "DURATION")
    max_sample_age: float = option(
        "30s", duration, "a sample older than this is not served (503 stale-sample)", "DURATION"
    )
    probe_listen: HostPort = option(
        "127.0.0.1:8080",
        listen_address,
        "HOST:PORT of the plain-HTTP probe port (/v1/ready, /metrics)",
        "HOST:PORT",
    )
    max_connections: int = option(
        "64",
        integer(1, 10000),
        "connections the API port holds, handshakes included; when it is full, the oldest "
        "connection not yet answered is closed for a new one",
        "N",
    )
    probe_max_connections: int = option(
        "32", integer(1, 10000), "connections the probe port holds (the same rule)", "N"
    )
    handshake_timeout: float = option(
        "5s",
        duration_between("100ms", "1m"),
        "time a client has to complete the TLS handshake",
        "DURATION",
    )
    header_timeout: float = option(
        "10s",
        duration_between("100ms", "5m"),
        "time a request line and headers have to arrive, from the connection or from the "
        "request's first byte (both ports)",
        "DURATION",
    )
    idle_timeout: float = option(
        "15s",
        duration_between("1s", "1h"),  # uvicorn's keep-alive timer counts whole seconds
        "a keep-alive connection with no request for this long is closed (both ports)",
        "DURATION",
    )
    max_header_bytes: int = option(
        "8192",
        integer(1024, 1 << 20),
        "a request line and headers larger than this are answered 431 (both ports)",
        "BYTES",
    )
    ready_file: Path | None = option(
        None, Path, "file that exists exactly while the broker is ready", "PATH"
    )
    log_level: str = option("info", _level, "debug, info, warning or error", "LEVEL")
    log_format: str = option("text", _log_format, "text, or json (one object a line)", "FORMAT")
    data_dir: Path | None = option(
        None,
        Path,
        "folder for the durable recovery timeline (a persistent volume); unset: no timeline",
        "DIR",
    )
    node_id: str | None = option(
        None,
        _node_id,
        "node name in timeline records (default: the host name, the pod name on Kubernetes)",
        "NAME",
    )
    heartbeat_interval: float = option(
        "5m", duration, "time between timeline records while nothing changes", "DURATION"
    )
    timeline_segment_bytes: int = option(
        "1048576",
        integer(1024, 1 << 30),
        "size at which a timeline segment file is rotated",
        "BYTES",
    )
    timeline_retention: float = option(
        "7d",
        duration_between("36s", "3650d"),
        "timeline segments older than this are deleted",
        "DURATION",
        deprecated=(("timeline-retention-hours", _hours),),
    )


@dataclass(frozen=True, kw_only=True)
class AgentOptions(RetryOptions, _ServingOptions):
    """Every flag of the agent. The retry settings are the ones every rollguard network client
    shares; here they govern the retries of a transient JMX error within one round (never
    beyond --sample-timeout)."""

    def sampler(self) -> SamplerSettings:
        running = self.running_interval
        if running is None:
            running = RUNNING_INTERVALS[self.jmx_backend]
        return SamplerSettings(
            interval=self.sample_interval,
            running_interval=running,
            timeout=self.sample_timeout,
            max_age=self.max_sample_age,
        )

    def check(self) -> None:
        sampler = self.sampler()
        if sampler.max_age < sampler.running_interval + sampler.timeout:
            raise ConfigError(
                f"--max-sample-age {sampler.max_age:g} must be at least --running-interval plus "
                f"--sample-timeout ({sampler.running_interval + sampler.timeout:g}), or every "
                "RUNNING broker would be reported stale between two rounds"
            )
        super().check()  # the retry policy's ranges

    def settings(self) -> AgentSettings:
        """What the agent runs with; ConfigError naming the flag when java is not there, the
        JMX credentials cannot be read, or the ready file could never be written."""
        if find_java(self.java) is None:
            raise ConfigError(f"--java: {self.java!r} is not an executable on PATH")
        credentials = None
        if self.jmx_credentials_file is not None:
            path = self.jmx_credentials_file
            try:
                credentials = read_credentials(path)
            except OSError as exc:
                raise ConfigError(f"--jmx-credentials-file {path}: {exc.strerror}") from None
            except ValueError as exc:
                raise ConfigError(f"--jmx-credentials-file {path}: {exc}") from None
        if self.ready_file is not None:
            check_ready_file(self.ready_file)
        http = HttpLimits(self.header_timeout, self.idle_timeout, self.max_header_bytes)
        return AgentSettings(
            listen=self.listen,
            tls_cert=self.cert,
            tls_key=self.key,
            tls_ca=self.cacert,
            tls_reload_interval=self.cert_reload_interval,
            jmx_url=self.jmx,
            jmx_credentials=credentials,
            jmx_backend=self.jmx_backend,
            java=self.java,
            event_loop=self.event_loop,
            sampler=self.sampler(),
            probe_listen=self.probe_listen,
            ready_file=self.ready_file,
            log_level=self.log_level,
            log_format=self.log_format,
            retry=self.retry_policy(),
            data_dir=self.data_dir,
            node_id=self.node_id or socket.gethostname(),
            heartbeat_interval=self.heartbeat_interval,
            timeline_segment_bytes=self.timeline_segment_bytes,
            timeline_retention_seconds=self.timeline_retention,
            tls_crl=self.crl,
            max_connections=self.max_connections,
            probe_max_connections=self.probe_max_connections,
            handshake_timeout=self.handshake_timeout,
            api_http=http,
            probe_http=http,
        )


FLAGS = AgentOptions.flags()  # for the docs' test of every flag


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    AgentOptions.add_flags(parser, ENV_PREFIX)
    return parser


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> AgentSettings:
    """Resolve every flag (command line, then environment, then default) and check it."""
    return AgentOptions.load(args, environ, ENV_PREFIX).settings()


# Files the agent holds besides its connections: listening sockets, the JMX reader's pipes,
# timeline segments, TLS files being reloaded, Python's own.
RESERVED_FILES = 64


def raise_file_limit(settings: AgentSettings) -> int:
    """Raise the soft limit of open files to the hard one, and check that every connection the
    limits allow fits in it (otherwise a flood would make accept() fail on both ports at once).
    Returns the limit; ConfigError naming the flags if it is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = settings.max_connections + settings.probe_max_connections + RESERVED_FILES
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise ConfigError(
            f"--max-connections {settings.max_connections} and --probe-max-connections "
            f"{settings.probe_max_connections} need {needed} open files, but the limit is "
            f"{soft} (ulimit -n)"
        )
    return soft

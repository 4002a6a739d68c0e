"""The agent's settings: one frozen object, built once from flags and the environment.

Every flag `--some-flag` can also be given as `ROLLGUARD_AGENT_SOME_FLAG`; a flag on the command
line wins over the environment, which wins over the default. Each value is checked here, and a bad
one is a ConfigError that names the flag or variable it came from. Numbers are ASCII digits
(`rollguard.shared.settings`) and every number has a range: a value outside it is refused, not
clamped.
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
from rollguard.agent.sampler import SamplerSettings
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RETRY_SETTINGS, RetryPolicy, policy_from_settings
from rollguard.shared.settings import (
    Flag,
    add_flags,
    choice,
    duration,
    duration_between,
    integer,
    listen_address,
    resolve,
    retry_flags,
)

ENV_PREFIX = "ROLLGUARD_AGENT_"
DEFAULT_HTTP_LIMITS = HttpLimits(header_timeout=10.0, idle_timeout=15.0, max_header_bytes=8192)


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    listen: Address
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
    probe_listen: Address
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


def parse_address(text: str) -> Address:
    address = listen_address(text)
    return Address(address.host, address.port)


def _node_id(text: str) -> str:
    if not 0 < len(text) <= 253 or not text.isprintable() or text != text.strip():
        raise ValueError(f"{text[:60]!r} is not a node name (1 to 253 printable characters)")
    return text


def _level(text: str) -> str:
    if text.lower() not in ("debug", "info", "warning", "error"):
        raise ValueError(f"{text!r} is not one of debug, info, warning, error")
    return text.lower()


def _log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise ValueError(f"{text!r} is not 'text' or 'json'")
    return text


def _event_loop(text: str) -> str:
    if text not in ("uvloop", "asyncio"):
        raise ValueError(f"{text!r} is not uvloop or asyncio")
    return text


def _same(text: str) -> str:
    return text


def _hours(text: str) -> str:
    """--timeline-retention-hours N (before 0.2) as --timeline-retention Nh."""
    return f"{text.strip()}h"


FLAGS = (
    Flag("listen", "0.0.0.0:8443", parse_address, "HOST:PORT of the mutual-TLS API", "HOST:PORT"),
    # --cert, --key and --cacert: the names every rollguard command (and curl) uses; the agent
    # called them --tls-cert, --tls-key and --tls-ca before 0.2 (still accepted, with a warning).
    Flag(
        "cert",
        None,
        Path,
        "PEM certificate the API presents (the broker's own will do)",
        "PATH",
        required=True,
        deprecated=(("tls-cert", _same),),
    ),
    Flag(
        "key",
        None,
        Path,
        "PEM private key of --cert (unencrypted)",
        "PATH",
        required=True,
        deprecated=(("tls-key", _same),),
    ),
    Flag(
        "cacert",
        None,
        Path,
        "PEM CA bundle that client certificates must chain to",
        "PATH",
        required=True,
        deprecated=(("tls-ca", _same),),
    ),
    Flag(
        "crl",
        None,
        Path,
        "PEM file with the CRL of every CA in --cacert; revoked client certificates are "
        "refused (checked on every handshake, reloaded like the other TLS files)",
        "PATH",
        deprecated=(("tls-crl", _same),),
    ),
    Flag(
        "cert-reload-interval",
        "10s",
        duration,
        "time between checks of the TLS files for changes",
        "DURATION",
        deprecated=(("tls-reload-interval", _same),),
    ),
    Flag(
        "jmx",
        "127.0.0.1:9999",
        service_url,
        "the broker's JMX: HOST:PORT or a service:jmx: URL",
        "TARGET",
    ),
    Flag(
        "jmx-credentials-file",
        None,
        Path,
        "file with one line 'USERNAME PASSWORD' for JMX authentication",
        "PATH",
    ),
    Flag(
        "jmx-backend",
        "persistent",
        choice(*BACKENDS),
        "persistent (one JVM and one JMX connection held open) or jmxquery (a JVM per round)",
        "NAME",
    ),
    Flag("java", "java", str, "java executable that reads JMX", "PATH"),
    Flag(
        "event-loop",
        "uvloop",
        _event_loop,
        "uvloop (faster TLS and HTTP serving) or asyncio (the standard library's)",
        "NAME",
    ),
    Flag(
        "sample-interval",
        "1s",
        duration,
        "time between JMX rounds while the broker is not RUNNING",
        "DURATION",
    ),
    Flag(
        "running-interval",
        None,
        duration,
        "time between JMX rounds while the broker is RUNNING (default: 1s with the persistent "
        "backend, whose round costs about 2 ms of CPU, so a restart shows within a second or "
        "two; 10s with jmxquery, a JVM per round)",
        "DURATION",
    ),
    Flag("sample-timeout", "5s", duration, "hard time limit of one JMX round", "DURATION"),
    Flag(
        "max-sample-age",
        "30s",
        duration,
        "a sample older than this is not served (503 stale-sample)",
        "DURATION",
    ),
    Flag(
        "probe-listen",
        "127.0.0.1:8080",
        parse_address,
        "HOST:PORT of the plain-HTTP probe port (/v1/ready, /metrics)",
        "HOST:PORT",
    ),
    Flag(
        "max-connections",
        "64",
        integer(1, 10000),
        "connections the API port holds, handshakes included; when it is full, the oldest "
        "connection not yet answered is closed for a new one",
        "N",
    ),
    Flag(
        "probe-max-connections",
        "32",
        integer(1, 10000),
        "connections the probe port holds (the same rule)",
        "N",
    ),
    Flag(
        "handshake-timeout",
        "5s",
        duration_between("100ms", "1m"),
        "time a client has to complete the TLS handshake",
        "DURATION",
    ),
    Flag(
        "header-timeout",
        "10s",
        duration_between("100ms", "5m"),
        "time a request line and headers have to arrive, from the connection or from the "
        "request's first byte (both ports)",
        "DURATION",
    ),
    Flag(
        "idle-timeout",
        "15s",
        duration_between("1s", "1h"),  # uvicorn's keep-alive timer counts whole seconds
        "a keep-alive connection with no request for this long is closed (both ports)",
        "DURATION",
    ),
    Flag(
        "max-header-bytes",
        "8192",
        integer(1024, 1 << 20),
        "a request line and headers larger than this are answered 431 (both ports)",
        "BYTES",
    ),
    Flag("ready-file", None, Path, "file that exists exactly while the broker is ready", "PATH"),
    Flag("log-level", "info", _level, "debug, info, warning or error", "LEVEL"),
    Flag("log-format", "text", _log_format, "text, or json (one object a line)", "FORMAT"),
    # The retry settings every rollguard network client shares; here they govern the retries
    # of a transient JMX error within one round (never beyond --sample-timeout).
    Flag(
        "data-dir",
        None,
        Path,
        "folder for the durable recovery timeline (a persistent volume); unset: no timeline",
        "DIR",
    ),
    Flag(
        "node-id",
        None,
        _node_id,
        "node name in timeline records (default: the host name, the pod name on Kubernetes)",
        "NAME",
    ),
    Flag(
        "heartbeat-interval",
        "5m",
        duration,
        "time between timeline records while nothing changes",
        "DURATION",
    ),
    Flag(
        "timeline-segment-bytes",
        "1048576",
        integer(1024, 1 << 30),
        "size at which a timeline segment file is rotated",
        "BYTES",
    ),
    Flag(
        "timeline-retention",
        "7d",
        duration_between("36s", "3650d"),
        "timeline segments older than this are deleted",
        "DURATION",
        deprecated=(("timeline-retention-hours", _hours),),
    ),
    *retry_flags(),
)


# Between two rounds while the broker is RUNNING. A round is the only way a broken JMX connection
# (the broker restarted or died) is noticed, and until then the last sample is served: with the
# persistent backend a round costs ~2 ms of CPU, so it runs every second; jmxquery's costs a JVM.
RUNNING_INTERVALS = {"persistent": 1.0, "jmxquery": 10.0}


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_flags(parser, FLAGS, ENV_PREFIX)
    return parser


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> AgentSettings:
    """Resolve every flag (command line, then environment, then default) and check it."""
    values = resolve(args, environ, FLAGS, ENV_PREFIX)
    running_interval = values["running-interval"]
    if running_interval is None:
        running_interval = RUNNING_INTERVALS[values["jmx-backend"]]
    sampler = SamplerSettings(
        interval=values["sample-interval"],
        running_interval=running_interval,
        timeout=values["sample-timeout"],
        max_age=values["max-sample-age"],
    )
    if sampler.max_age < sampler.running_interval + sampler.timeout:
        raise ConfigError(
            f"--max-sample-age {sampler.max_age:g} must be at least --running-interval plus "
            f"--sample-timeout ({sampler.running_interval + sampler.timeout:g}), or every "
            "RUNNING broker would be reported stale between two rounds"
        )
    retry = policy_from_settings({s.name: values[s.name] for s in RETRY_SETTINGS})
    http = HttpLimits(values["header-timeout"], values["idle-timeout"], values["max-header-bytes"])
    java = values["java"]
    if find_java(java) is None:
        raise ConfigError(f"--java: {java!r} is not an executable on PATH")
    credentials = None
    if values["jmx-credentials-file"] is not None:
        path = values["jmx-credentials-file"]
        try:
            credentials = read_credentials(path)
        except OSError as exc:
            raise ConfigError(f"--jmx-credentials-file {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise ConfigError(f"--jmx-credentials-file {path}: {exc}") from None
    return AgentSettings(
        listen=values["listen"],
        tls_cert=values["cert"],
        tls_key=values["key"],
        tls_ca=values["cacert"],
        tls_reload_interval=values["cert-reload-interval"],
        jmx_url=values["jmx"],
        jmx_credentials=credentials,
        jmx_backend=values["jmx-backend"],
        java=java,
        event_loop=values["event-loop"],
        sampler=sampler,
        probe_listen=values["probe-listen"],
        ready_file=values["ready-file"],
        log_level=values["log-level"],
        log_format=values["log-format"],
        retry=retry,
        data_dir=values["data-dir"],
        node_id=values["node-id"] or socket.gethostname(),
        heartbeat_interval=values["heartbeat-interval"],
        timeline_segment_bytes=values["timeline-segment-bytes"],
        timeline_retention_seconds=values["timeline-retention"],
        tls_crl=values["crl"],
        max_connections=values["max-connections"],
        probe_max_connections=values["probe-max-connections"],
        handshake_timeout=values["handshake-timeout"],
        api_http=http,
        probe_http=http,
    )


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

"""The options of `rollguard connect ...` and `rollguard mm2 ...`, as typed `Options` dataclasses
(`rollguard.shared.settings`): each field is a flag `--name` and a variable
`ROLLGUARD_CONNECT_NAME` (`--connect-url` is `ROLLGUARD_CONNECT_URL`), its default written once,
here.

The variables have the tool's own prefix so that Connect's TLS settings cannot be taken for the
agents' (`ROLLGUARD_CACERT` is the roll's CA for agents). The names they had before,
`ROLLGUARD_<NAME>`, still work with a deprecation warning when the new one is not set; so does
the password variable, which never changed (`ROLLGUARD_CONNECT_PASSWORD`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rollguard.roller.connect.client import ConnectAuth, ConnectClient
from rollguard.roller.options import OutputOptions
from rollguard.shared.converters import HostPort, duration_between, integer, listen_address
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryStats
from rollguard.shared.retry_options import RetryOptions
from rollguard.shared.settings import option
from rollguard.shared.tls import client_context

ENV_PREFIX = "ROLLGUARD_CONNECT_"
LEGACY_PREFIX = "ROLLGUARD_"  # the variables' names before the tool had its own prefix
PASSWORD_ENV = "ROLLGUARD_CONNECT_PASSWORD"  # noqa: S105 (a variable name)


def namespaced(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME")
    return namespace, name


def max_restarts(text: str) -> int | None:
    if text in ("", "unlimited"):
        return None
    return integer(0)(text)


def connector_names(text: str) -> list[str] | None:
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names or None


@dataclass(frozen=True, kw_only=True)
class ConnectOptions(RetryOptions, OutputOptions):
    """How to reach Kafka Connect's REST API: every connect and mm2 command takes these."""

    connect_url: str = option(
        None,
        str,
        "Kafka Connect REST URL, http(s)://HOST:PORT",
        "URL",
        required=True,
        variable="URL",
    )
    cacert: Path | None = option(
        None, Path, "CA bundle for Connect's certificate (default: system)", "PATH"
    )
    cert: Path | None = option(None, Path, "client certificate (PEM) for mutual TLS", "PATH")
    key: Path | None = option(None, Path, "its unencrypted PEM private key", "PATH")
    user: str | None = option(None, str, "basic-auth user", "USER")
    password_file: Path | None = option(
        None, Path, f"basic-auth password file (or {PASSWORD_ENV})", "FILE"
    )
    timeout: float = option(
        "30s", duration_between("10ms", "1h"), "time for one request", "DURATION"
    )

    def check(self) -> None:
        super().check()
        if self.key is not None and self.cert is None:
            raise ConfigError("--key given without --cert")
        if self.cert is not None and self.key is None:
            raise ConfigError("--cert given without --key")

    def client(self, environ: Mapping[str, str], stats: RetryStats | None = None) -> ConnectClient:
        """The client; ConfigError naming the setting when TLS files or the password cannot be
        read, or the URL is not one."""
        tls = None
        if self.cert is not None or self.cacert is not None:
            tls = client_context(self.cacert, self.cert, self.key)
        password = environ.get(PASSWORD_ENV)
        if self.password_file is not None:
            try:
                password = self.password_file.read_text().rstrip("\n")
            except (OSError, UnicodeDecodeError) as exc:
                problem = getattr(exc, "strerror", None) or str(exc)
                raise ConfigError(f"--password-file {self.password_file}: {problem}") from None
        if password is not None and self.user is None:
            raise ConfigError("a Connect password is set but --user is not")
        try:
            return ConnectClient(
                self.connect_url,
                self.retry_policy(),
                tls=tls,
                auth=ConnectAuth(self.user, password),
                timeout=self.timeout,
                stats=stats,
            )
        except ValueError as exc:
            raise ConfigError(f"--connect-url: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class WaitOptions(ConnectOptions):
    """restart, stop and resume: how long `--wait` waits for the state they lead to."""

    wait_timeout: float = option(
        "2m",
        duration_between("10ms", "1d"),
        "with --wait: how long to wait for the target state",
        "DURATION",
    )


@dataclass(frozen=True, kw_only=True)
class AutoRestartOptions(ConnectOptions):
    connectors: list[str] | None = option(
        "", connector_names, "watch only these connectors (default: all)", "A,B"
    )
    config: Path | None = option(
        None, Path, "YAML of per-connector settings (maxRestarts, enabled)", "FILE"
    )
    max_restarts: int | None = option(
        "", max_restarts, "give up after this many restarts (empty: never)", "N"
    )
    interval: float = option(
        "1m", duration_between("10ms", "1d"), "time between two checks", "DURATION"
    )
    state_file: Path = option("rollguard-auto-restart.json", Path, "counts and times, kept", "FILE")
    state_configmap: tuple[str, str] | None = option(
        None, namespaced, "keep them in this ConfigMap instead", "NS/NAME"
    )
    metrics_listen: HostPort | None = option(
        None, listen_address, "serve Prometheus /metrics here", "HOST:PORT"
    )


@dataclass(frozen=True, kw_only=True)
class OffsetsOptions(ConnectOptions):
    connector: str = option(None, str, "the connector's name", "NAME", required=True)
    to: Path | None = option(None, Path, "list: folder to write the offsets key into", "DIR")
    to_configmap: tuple[str, str] | None = option(
        None, namespaced, "list: ConfigMap to write the key into", "NS/NAME"
    )
    from_: Path | None = option(
        None, Path, "alter: folder holding the key, or the file itself", "PATH"
    )
    from_configmap: tuple[str, str] | None = option(
        None, namespaced, "alter: ConfigMap holding the key", "NS/NAME"
    )
    stop_timeout: float = option(
        "1m",
        duration_between("10ms", "1d"),
        "with --stop: wait this long for STOPPED",
        "DURATION",
    )

    def check(self) -> None:
        super().check()
        if self.to is not None and self.to_configmap is not None:
            raise ConfigError("give --to or --to-configmap, not both")
        if self.from_ is not None and self.from_configmap is not None:
            raise ConfigError("give --from or --from-configmap, not both")

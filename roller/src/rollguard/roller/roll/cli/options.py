"""`rollguard roll` and `rollguard plan`'s options: the roll's choices (`RollChoices`, the
flags of `RollSettings`: choices.py), the connection's, and the command's own (gates, journal,
prediction, metrics), and the `RollSettings` they make.

Each flag says its section of --help and, when `plan` has no use for it (it restarts nothing,
waits for nothing and writes nothing), that it is `roll`'s alone (`ROLL`): `plan --help` then
leaves it out, and `plan` ignores it, with a warning when it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit

from rollguard.roller.options import (
    CONNECTION,
    OUTPUT,
    AgentOptions,
    KafkaOptions,
    OutputOptions,
    PlatformOptions,
)
from rollguard.roller.roll.cli.choices import BATCHES, NODES, ROLL, SAFETY, TIMING, RollChoices
from rollguard.roller.roll.gates.lag import LagLimit, lag_limit
from rollguard.roller.roll.gates.windows import Window, parse_window
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.converters import HostPort, boolean, duration_between, listen_address, names
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry_options import RETRIES
from rollguard.shared.settings import Group, option, repeated

PREDICTION = Group("prediction", "the roll's duration, predicted from recovery history")
CONFIGURATION = Group(
    "configuration",
    "on Kubernetes, each broker pod's desired server.properties: plan compares it, roll rolls it",
)
JOURNAL = Group("journal", "where a roll keeps its progress, to resume it after an interruption")
GATES = Group(
    "gates",
    "what holds a whole roll between restarts: alerts, consumer lag, restart windows "
    "(a node being restarted is still waited for)",
)
CANARY = Group(
    "canary",
    "the roll's own client: a producer and a consumer on a topic led by every broker, and "
    "what each restart costs them",
)


def _roll_id(text: str) -> str:
    if not (text.isascii() and text.replace("-", "").isalnum()) or len(text) > 40:
        raise ValueError(f"{text!r}: a roll id is letters, digits and dashes, 40 at most")
    return text.lower()


def _http_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: give an http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError("a URL with a password would show in the process list: not accepted")
    return text.strip().rstrip("/")


def _config_key(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty key: give the ConfigMap key, or the file's path in the pod")
    return text.strip()


def _topic(text: str) -> str:
    """A Kafka topic name: letters, digits, `.`, `_` and `-`, 249 at most (Kafka's rule)."""
    name = text.strip()
    if (
        not name
        or len(name) > 249
        or name in (".", "..")
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    ):
        raise ValueError(f"{text!r}: a topic name is letters, digits, '.', '_' and '-'")
    return name


def _query(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty query")
    return text.strip()


@dataclass(frozen=True, kw_only=True)
class RollOptions(AgentOptions, OutputOptions, PlatformOptions, KafkaOptions, RollChoices):
    """`rollguard roll` and `rollguard plan`: every option, each declared once (the roll's
    choices with `RollSettings`)."""

    sections = (
        CONNECTION,
        NODES,
        SAFETY,
        GATES,
        CANARY,
        TIMING,
        BATCHES,
        PREDICTION,
        CONFIGURATION,
        JOURNAL,
        OUTPUT,
        RETRIES,
    )

    restart_timeout: float = option(
        "5m",
        duration_between("10ms", "1d"),
        "time limit of an inventory restart command",
        "DURATION",
        group=TIMING,
        commands=ROLL,
    )
    gate_prometheus: str | None = option(
        None,
        _http_url,
        "Prometheus server of the --gate-query queries (http or https URL)",
        "URL",
        group=GATES,
    )
    gate_query: tuple[str, ...] = option(
        "",
        repeated(_query),
        "hold the roll while this PromQL query returns anything, e.g. "
        'ALERTS{alertstate="firing",rollguard="hold"} (needs --gate-prometheus)',
        "PROMQL",
        group=GATES,
        repeat=True,
    )
    gate_consumer_lag: tuple[LagLimit, ...] = option(
        "",
        repeated(lag_limit),
        "hold the roll while consumer group GROUP lags by more than MAX messages "
        "(committed offsets against end offsets)",
        "GROUP=MAX",
        group=GATES,
        repeat=True,
    )
    window: tuple[Window, ...] = option(
        "",
        repeated(parse_window),
        'start restarts only within this window, e.g. "Mon-Fri 22:00-05:00 Europe/Berlin" '
        "(days, a time range that may pass midnight, an IANA time zone)",
        "WINDOW",
        group=GATES,
        repeat=True,
    )
    canary: str | None = option(
        None,
        _topic,
        "produce to and consume from TOPIC for the whole roll (acks=all, a send every 100ms) "
        "and say what each restart cost; the next restart waits while its sends fail "
        "(created when absent: a partition led by each broker; an existing one is used as it is)",
        "TOPIC",
        group=CANARY,
        commands=ROLL,
    )
    canary_baseline: float = option(
        "5s",
        duration_between("1s", "10m"),
        "with --canary: how long the canary runs before the roll's first action, its idle baseline",
        "DURATION",
        group=CANARY,
        commands=ROLL,
    )
    canary_max_p99: float | None = option(
        None,
        duration_between("1ms", "10m"),
        "with --canary: the next restart (or batch) waits while the canary's send p99 over "
        "--canary-window is above this, e.g. 250ms (within --safety-wait, as at any gate)",
        "DURATION",
        group=CANARY,
        commands=ROLL,
    )
    canary_window: float = option(
        "10s",
        duration_between("1s", "10m"),
        "with --canary: the stretch of time before each restart the canary's gate judges "
        "(no send failed in it, one acknowledged at least, --canary-max-p99)",
        "DURATION",
        group=CANARY,
        commands=ROLL,
    )
    roll_id: str | None = option(
        None,
        _roll_id,
        "id of a new roll (default: time and random)",
        "ID",
        group=JOURNAL,
        commands=ROLL,
    )
    resume: str | None = option(
        None, _roll_id, "resume the roll with this id", "ID", group=JOURNAL, commands=ROLL
    )
    expectations: Path | None = option(
        None,
        Path,
        "expectations.json from rollguard-report: per-node recovery budgets from history "
        "(never above --max-recovery-wait) and a predicted roll duration",
        "FILE",
        group=PREDICTION,
    )
    restart_estimate: float = option(
        "1m",
        duration_between("10ms", "1d"),
        "with --expectations: time one restart takes without log recovery (stop, start, "
        "ISR catch-up), for the prediction",
        "DURATION",
        group=PREDICTION,
    )
    metrics_listen: HostPort | None = option(
        None,
        listen_address,
        "serve the roll's Prometheus metrics at http://HOST:PORT/metrics while it runs",
        "HOST:PORT",
        group=OUTPUT,
        commands=ROLL,
    )
    compare_config: bool = option(
        "false",
        boolean,
        "on Kubernetes: compare each broker pod's server.properties, from the ConfigMap its "
        "StatefulSet's template (or the pod) mounts, with what Kafka says it runs, and roll it "
        "(live where Kafka allows; a switch; on an inventory, each node's config: or "
        "config-command: does it)",
        switch=True,
        group=CONFIGURATION,
    )
    config_key: str = option(
        "server.properties",
        _config_key,
        "the properties file within the ConfigMap: its key, or the file name the pod sees, or "
        "its full path in the container (when two ConfigMaps hold that name)",
        "KEY|PATH",
        group=CONFIGURATION,
    )
    config_set_at_start: frozenset[str] = option(
        "",
        names,
        "keys a start script sets in the pod (comma-separated, e.g. advertised.listeners): not "
        "compared, as no value holding a placeholder is, nor a shared ConfigMap's node.id",
        "KEYS",
        group=CONFIGURATION,
    )
    state_dir: Path = option(
        ".rollguard",
        Path,
        "folder of roll journals and event logs",
        "DIR",
        group=JOURNAL,
        commands=ROLL,
    )

    def check(self) -> None:
        super().check()
        if self.gate_query and self.gate_prometheus is None:
            raise ConfigError("--gate-query needs --gate-prometheus URL (the server to ask)")
        if self.gate_prometheus is not None and not self.gate_query:
            raise ConfigError("--gate-prometheus needs at least one --gate-query PROMQL")
        if self.canary_max_p99 is not None and self.canary is None:
            raise ConfigError("--canary-max-p99 needs --canary TOPIC (the canary it bounds)")
        if self.compare_config and self.inventory is not None:
            raise ConfigError(
                "--compare-config is for pods on Kubernetes: an inventory names each node's "
                "desired file with config: (or config-command:)"
            )
        for other, given in (("--only", self.only), ("--skip", self.skip)):
            if both := sorted(self.hold & given):
                raise ConfigError(f"--hold and {other} both name {', '.join(both)}")

    def settings(self) -> RollSettings:
        """The roll's settings: the choices, as given."""
        return RollSettings(**{f.name: getattr(self, f.name) for f in fields(RollChoices)})

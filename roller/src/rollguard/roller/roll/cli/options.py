"""`rollguard roll` and `rollguard plan`'s options: every flag, with its default written once
(the roll's timings are `RollSettings`' defaults), and the `RollSettings` they make.

Each flag says its section of --help and, when `plan` has no use for it (it restarts nothing,
waits for nothing and writes nothing), that it is `roll`'s alone (`ROLL`): `plan --help` then
leaves it out, and `plan` ignores it, with a warning when it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rollguard.roller.options import (
    CONNECTION,
    OUTPUT,
    AgentOptions,
    KafkaOptions,
    OutputOptions,
    PlatformOptions,
    names,
)
from rollguard.roller.roll.gates.lag import LagLimit, lag_limit
from rollguard.roller.roll.gates.windows import Window, parse_window
from rollguard.roller.roll.rules.settings import OnAgentUnreachable, RollSettings
from rollguard.shared.converters import HostPort, listen_address
from rollguard.shared.errors import ConfigError
from rollguard.shared.settings import (
    RETRIES,
    Group,
    boolean,
    choice,
    default_of,
    duration_between,
    format_duration,
    integer,
    milliseconds_to_duration,
    option,
    repeated,
)

ROLL = ("roll",)  # the flags only a roll reads

NODES = Group("nodes", "which nodes a roll takes (default: those out of date; all of an inventory)")
SAFETY = Group("safety", "what may be restarted, and what a roll does when it cannot tell")
TIMING = Group("timing", "how long a roll waits for a node, and how often it looks")
BATCHES = Group("batches", "restarting several brokers at once")
PREDICTION = Group("prediction", "the roll's duration, predicted from recovery history")
JOURNAL = Group("journal", "where a roll keeps its progress, to resume it after an interruption")
GATES = Group(
    "gates",
    "what holds a whole roll between restarts: alerts, consumer lag, restart windows "
    "(a node being restarted is still waited for)",
)


def _roll_id(text: str) -> str:
    if not (text.isascii() and text.replace("-", "").isalnum()) or len(text) > 40:
        raise ValueError(f"{text!r}: a roll id is letters, digits and dashes, 40 at most")
    return text.lower()


# A Kafka release as Kafka names it (`4.4.0`, `4.1.0-rc2`): what a node's app-info reports.
KAFKA_RELEASE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(-[0-9A-Za-z.]{1,20})?")


def kafka_version(text: str) -> str:
    text = text.strip()
    if not KAFKA_RELEASE.fullmatch(text):
        raise ValueError(f"{text!r}: a Kafka version is MAJOR.MINOR.PATCH, such as 4.4.0")
    return text


def _on_agent_unreachable(text: str) -> OnAgentUnreachable:
    return OnAgentUnreachable(choice(*(o.value for o in OnAgentUnreachable))(text))


def _rack_aware(text: str) -> bool | None:
    """auto (None: on when brokers report racks), or true/false."""
    return None if text.strip().lower() == "auto" else boolean(text)


def _http_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: give an http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError("a URL with a password would show in the process list: not accepted")
    return text.strip().rstrip("/")


def _query(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty query")
    return text.strip()


def _default(name: str) -> str:
    """A RollSettings default in the option's syntax: the library's default is the CLI's."""
    value = default_of(RollSettings, name)
    return value.value if isinstance(value, OnAgentUnreachable) else format_duration(value)


def _duration(name: str, low: str, high: str, help: str, **kwargs: Any) -> Any:
    return option(_default(name), duration_between(low, high), help, "DURATION", **kwargs)


@dataclass(frozen=True, kw_only=True)
class RollOptions(AgentOptions, OutputOptions, PlatformOptions, KafkaOptions):
    """`rollguard roll` and `rollguard plan`: every option, with its default written once (the
    roll's timings are `RollSettings`' defaults)."""

    sections = (
        CONNECTION,
        NODES,
        SAFETY,
        GATES,
        TIMING,
        BATCHES,
        PREDICTION,
        JOURNAL,
        OUTPUT,
        RETRIES,
    )

    operation_timeout: float = _duration(
        "operation_timeout",
        "10ms",
        "7d",
        "how long a node not ready may go without progress (a new process, a state further "
        "on, the end of its recovery) before its agent decides",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),),
        group=TIMING,
    )
    poll_interval: float = _duration(
        "poll_interval",
        "10ms",
        "1h",
        "time between readiness, safety and agent checks",
        group=TIMING,
        commands=ROLL,
    )
    max_recovery_wait: float = _duration(
        "max_recovery_wait",
        "10ms",
        "30d",
        "longest wait for a broker in log recovery that makes progress",
        group=TIMING,
    )
    stall_timeout: float = _duration(
        "stall_timeout",
        "10ms",
        "7d",
        "a recovery with no progress for this long is stalled",
        group=TIMING,
        commands=ROLL,
    )
    restart_timeout: float = option(
        "5m",
        duration_between("10ms", "1d"),
        "time limit of an inventory restart command",
        "DURATION",
        group=TIMING,
        commands=ROLL,
    )
    safety_wait: float = _duration(
        "safety_wait",
        "10ms",
        "30d",
        "how long a roll waits without progress for a restart to become safe and for a "
        "restarted broker to rejoin its ISRs",
        group=SAFETY,
        commands=ROLL,
    )
    on_agent_unreachable: OnAgentUnreachable = option(
        _default("on_agent_unreachable"),
        _on_agent_unreachable,
        "a node whose agent cannot answer: wait (within --safety-wait) or force (restart it "
        "after --operation-timeout)",
        "wait|force",
        group=SAFETY,
    )
    max_clock_skew: float = _duration(
        "max_clock_skew",
        "10ms",
        "1d",
        "largest clock difference between the roller and an agent before anything is done",
        group=SAFETY,
    )
    only: frozenset[str] = option(
        "", names, "restart only these nodes (comma-separated names)", "NODES", group=NODES
    )
    skip: frozenset[str] = option(
        "", names, "never restart these nodes (comma-separated names)", "NODES", group=NODES
    )
    hold: frozenset[str] = option(
        "",
        names,
        "keep these nodes for later (comma-separated names): the roll ends without them and "
        "`roll --resume` takes those no longer held",
        "NODES",
        group=NODES,
    )
    all: bool = option(
        "false",
        boolean,
        "restart pods that are already up to date too, or with --kafka-version nodes that "
        "already run it (a switch)",
        switch=True,
        group=NODES,
    )
    kafka_version: str | None = option(
        None,
        kafka_version,
        "the Kafka version every node must run after its restart (an upgrade or a rollback): "
        "nodes already on it are left out unless --all, a node back on another version stops "
        "the roll; an inventory's `install` command gets it as ROLLGUARD_KAFKA_VERSION",
        "VERSION",
        group=NODES,
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
    max_batch_size: int = option(
        "1",
        integer(1, 100_000),
        "restart up to N brokers at once when no partition can spare fewer (1: one at a time)",
        "N",
        group=BATCHES,
    )
    rack_aware: bool | None = option(
        "auto",
        _rack_aware,
        "batches of one rack first (auto: when brokers report racks; false: ignore racks)",
        "auto|true|false",
        group=BATCHES,
    )
    elect_preferred_leaders: bool = option(
        "true",
        boolean,
        "after each batch, elect the preferred leaders of its brokers' partitions",
        "true|false",
        group=BATCHES,
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
        for other, given in (("--only", self.only), ("--skip", self.skip)):
            if both := sorted(self.hold & given):
                raise ConfigError(f"--hold and {other} both name {', '.join(both)}")

    def settings(self) -> RollSettings:
        return RollSettings(
            operation_timeout=self.operation_timeout,
            poll_interval=self.poll_interval,
            max_recovery_wait=self.max_recovery_wait,
            stall_timeout=self.stall_timeout,
            safety_wait=self.safety_wait,
            on_agent_unreachable=self.on_agent_unreachable,
            max_clock_skew=self.max_clock_skew,
            only=self.only,
            skip=self.skip,
            hold=self.hold,
            all_nodes=self.all,
            kafka_version=self.kafka_version,
            max_batch_size=self.max_batch_size,
            rack_aware=self.rack_aware,
            elect_preferred_leaders=self.elect_preferred_leaders,
        )

"""The roll's choices as flags: each `RollSettings` field a user decides, declared once with its
flag, its variable (`ROLLGUARD_<FLAG>`), default, conversion, help and section of --help, and
whether `plan` takes it too (`commands=ROLL`: `roll` alone). `RollOptions` (options.py)
composes them with the connection's and the command's own; tests/unit/test_settings.py holds
their defaults to `RollSettings()`'s, which a library user gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollguard.roller.roll.rules.settings import OnAgentUnreachable
from rollguard.roller.roll.upgrades.releases import kafka_version
from rollguard.shared.converters import (
    boolean,
    choice,
    duration_between,
    integer,
    milliseconds_to_duration,
    names,
)
from rollguard.shared.settings import Group, Options, option

ROLL = ("roll",)  # the flags only a roll reads

NODES = Group("nodes", "which nodes a roll takes (default: those out of date; all of an inventory)")
SAFETY = Group("safety", "what may be restarted, and what a roll does when it cannot tell")
TIMING = Group("timing", "how long a roll waits for a node, and how often it looks")
BATCHES = Group("batches", "restarting several brokers at once")


def _on_agent_unreachable(text: str) -> OnAgentUnreachable:
    return OnAgentUnreachable(choice(*(o.value for o in OnAgentUnreachable))(text))


def _rack_aware(text: str) -> bool | None:
    """auto (None: on when brokers report racks), or true/false."""
    return None if text.strip().lower() == "auto" else boolean(text)


def _duration(default: str, low: str, high: str, help: str, **kwargs: Any) -> Any:
    return option(default, duration_between(low, high), help, "DURATION", **kwargs)


@dataclass(frozen=True, kw_only=True)
class RollChoices(Options):
    """What a user decides about a roll, each with its flag (`rollguard roll` and `plan`)."""

    operation_timeout: float = _duration(
        "5m",
        "10ms",
        "7d",
        "how long a node not ready may go without progress (a new process, a state further "
        "on, the end of its recovery) before its agent decides",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),),
        group=TIMING,
    )
    poll_interval: float = _duration(
        "2s",
        "10ms",
        "1h",
        "time between readiness, safety and agent checks",
        group=TIMING,
        commands=ROLL,
    )
    max_recovery_wait: float = _duration(
        "6h",
        "10ms",
        "30d",
        "longest wait for a broker in log recovery that makes progress",
        group=TIMING,
    )
    stall_timeout: float = _duration(
        "10m",
        "10ms",
        "7d",
        "a recovery with no progress for this long is stalled",
        group=TIMING,
        commands=ROLL,
    )
    # waiting until a restart is safe: budget without progress
    safety_wait: float = _duration(
        "30m",
        "10ms",
        "30d",
        "how long a roll waits without progress for a restart to become safe and for a "
        "restarted broker to rejoin its ISRs",
        group=SAFETY,
        commands=ROLL,
    )
    on_agent_unreachable: OnAgentUnreachable = option(
        "wait",
        _on_agent_unreachable,
        "a node whose agent cannot answer: wait (within --safety-wait) or force (restart it "
        "after --operation-timeout)",
        "wait|force",
        group=SAFETY,
    )
    # between the roller and any agent, checked before acting
    max_clock_skew: float = _duration(
        "30s",
        "10ms",
        "1d",
        "largest clock difference between the roller and an agent before anything is done",
        group=SAFETY,
    )
    # node names; empty: every node that needs it
    only: frozenset[str] = option(
        "", names, "restart only these nodes (comma-separated names)", "NODES", group=NODES
    )
    skip: frozenset[str] = option(
        "", names, "never restart these nodes (comma-separated names)", "NODES", group=NODES
    )
    hold: frozenset[str] = option(  # kept for later: the roll ends without them
        "",
        names,
        "keep these nodes for later (comma-separated names): the roll ends without them and "
        "`roll --resume` takes those no longer held",
        "NODES",
        group=NODES,
    )
    all_nodes: bool = option(  # restart nodes that are already up to date too
        "false",
        boolean,
        "restart pods that are already up to date too, or with --kafka-version nodes that "
        "already run it (a switch)",
        switch=True,
        group=NODES,
        flag="all",
    )
    # The Kafka version every node must run after its restart (an upgrade, or a rollback):
    # nodes already on it are left out (unless all_nodes), a node back on another one stops the
    # roll. None: a roll for any other change, whatever version each node runs.
    kafka_version: str | None = option(
        None,
        kafka_version,
        "the Kafka version every node must run after its restart (an upgrade or a rollback): "
        "nodes already on it are left out unless --all, a node back on another version stops "
        "the roll; an inventory's `install` command gets it as ROLLGUARD_KAFKA_VERSION",
        "VERSION",
        group=NODES,
    )
    max_batch_size: int = option(  # brokers restarted together; 1 is the serial roll
        "1",
        integer(1, 100_000),
        "restart up to N brokers at once when no partition can spare fewer (1: one at a time)",
        "N",
        group=BATCHES,
    )
    rack_aware: bool | None = option(  # None: when brokers report racks
        "auto",
        _rack_aware,
        "batches of one rack first (auto: when brokers report racks; false: ignore racks)",
        "auto|true|false",
        group=BATCHES,
    )
    elect_preferred_leaders: bool = option(  # after each batch (--max-batch-size above 1)
        "true",
        boolean,
        "after each batch, elect the preferred leaders of its brokers' partitions",
        "true|false",
        group=BATCHES,
        commands=ROLL,
    )

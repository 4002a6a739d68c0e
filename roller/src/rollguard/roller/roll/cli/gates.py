"""The roll's gates from its options (`--gate-*`, `--window`, `--canary`) and its lease (a
pause), and their closing when the roll ends (a Prometheus gate keeps an HTTP client open)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.canary.client import Canary
from rollguard.roller.roll.canary.gate import CanaryGate
from rollguard.roller.roll.canary.watch import RollCanary
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.gates.keeper import Gate, Gates
from rollguard.roller.roll.gates.lag import ConsumerLagGate, LagReader
from rollguard.roller.roll.gates.prometheus import PrometheusGate
from rollguard.roller.roll.gates.windows import WindowGate
from rollguard.roller.roll.voice import EventLog

# A Prometheus query is asked once a poll, and a poll waits for its answer: a hung server
# costs at most this (or --operation-timeout, when shorter), then reads as closed.
PROMETHEUS_TIMEOUT = 10.0


def roll_canary(options: RollOptions, kafka: KafkaObserver, events: EventLog) -> RollCanary | None:
    """The roll's canary (`--canary`), None without one."""
    if options.canary is None:
        return None
    return RollCanary(
        Canary(kafka, options.canary),
        events,
        baseline=options.canary_baseline,
        window=options.canary_window,
        max_p99=options.canary_max_p99,
    )


def gates_from(
    options: RollOptions,
    lag: LagReader,
    *,
    extra: tuple[Gate, ...] = (),
    canary: RollCanary | None = None,
) -> Gates:
    """Every gate the options configure, in the order of --help, then `extra` (a pause), then
    the canary's (`canary`: the roll's, with --canary)."""
    gates: list[Gate] = []
    if options.gate_prometheus is not None:
        timeout = min(options.operation_timeout, PROMETHEUS_TIMEOUT)
        gates += [
            PrometheusGate(options.gate_prometheus, query, timeout=timeout)
            for query in options.gate_query
        ]
    gates += [ConsumerLagGate(limit, lag) for limit in options.gate_consumer_lag]
    if options.window:
        gates.append(WindowGate(options.window))
    return Gates((*gates, *extra, *((CanaryGate(canary),) if canary is not None else ())))


@runtime_checkable
class Closable(Protocol):
    """A gate holding a connection until the roll ends."""

    async def aclose(self) -> None: ...


async def close_gates(gates: Gates) -> None:
    """Close every gate that holds a connection (the roll's end, whatever its outcome)."""
    for gate in gates.gates:
        if isinstance(gate, Closable):
            await gate.aclose()

"""One-off operations on connectors: restart (on every worker version), stop, resume, and
waiting for the state they lead to.

- A restart with `--include-tasks` or `--only-failed` is one KIP-745 call on Kafka 3.0 and
  later. Older workers ignore both parameters and restart the connector object alone (204, as
  if all went well), so there the connector (when asked for) and each task are restarted one
  call at a time, from the status read just before, and each restart is reported.
- Stop (Kafka 3.5) is asynchronous: Connect answers 204 at once and shows STOPPED a little
  later, so everything that needs a stopped connector polls its status first, with a deadline.
- `--wait` polls the status until the target state or a timeout: stop until STOPPED; resume
  until the connector and its tasks are RUNNING; restart until nothing is RESTARTING or
  UNASSIGNED, and then fails if anything is FAILED.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rollguard.roller.connect.client import ConnectClient, ConnectorStatus
from rollguard.roller.connect.versions import (
    RESTART_PARAMS_SINCE,
    STOP_SINCE,
    parse_version,
    require,
)
from rollguard.shared.errors import RollguardError
from rollguard.shared.settings import format_duration

POLL = 0.25  # seconds between two status reads while waiting

Sleep = Callable[[float], Awaitable[object]]


class WaitTimeout(RollguardError):
    """A connector did not reach the state waited for in time; the message says where it is."""


class StateNotReached(RollguardError):
    """A restarted connector settled FAILED (or a resumed one FAILED): the message says which."""


def is_stopped(status: ConnectorStatus) -> bool:
    return status.state == "STOPPED"


def is_running(status: ConnectorStatus) -> bool:
    return status.state == "RUNNING" and all(t.state == "RUNNING" for t in status.tasks)


async def wait_for(
    client: ConnectClient,
    connector: str,
    reached: Callable[[ConnectorStatus], bool],
    what: str,
    *,
    timeout: float,
    poll: float = POLL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> ConnectorStatus:
    """Read the status until `reached(status)`; WaitTimeout naming the last state after
    `timeout` seconds."""
    deadline = clock() + timeout
    while True:
        status = await client.status(connector)
        if reached(status):
            return status
        if clock() >= deadline:
            raise WaitTimeout(
                f"connector {connector} is not {what} after {format_duration(timeout)}: "
                f"{status.describe()}"
            )
        await sleep(min(poll, max(0.0, deadline - clock())))


async def stop(client: ConnectClient, connector: str, *, wait: float | None) -> ConnectorStatus:
    """PUT stop (refused before 3.5, nothing sent); with `wait`, poll until STOPPED."""
    require(await client.version(), STOP_SINCE, "stopping a connector (PUT .../stop)")
    await client.stop(connector)
    if wait is None:
        return await client.status(connector)
    return await wait_for(client, connector, is_stopped, "STOPPED", timeout=wait)


async def resume(client: ConnectClient, connector: str, *, wait: float | None) -> ConnectorStatus:
    """PUT resume (a paused or a stopped connector); with `wait`, poll until all RUNNING."""
    await client.resume(connector)
    if wait is None:
        return await client.status(connector)
    status = await wait_for(
        client, connector, lambda s: is_running(s) or s.failed, "RUNNING", timeout=wait
    )
    if status.failed:
        raise StateNotReached(f"connector {connector} was resumed but {_failed(status)}")
    return status


@dataclass
class RestartReport:
    """What one restart did, for the command's output: `lines` in order, `states` as Connect
    showed them afterwards (the 202 plan, or the status after `--wait`)."""

    connector: str
    lines: list[str] = field(default_factory=list)
    states: ConnectorStatus | None = None


async def restart(
    client: ConnectClient,
    connector: str,
    *,
    include_tasks: bool,
    only_failed: bool,
    version: str | None = None,
    status: ConnectorStatus | None = None,
) -> RestartReport:
    """Restart `connector` as KIP-745 describes, on any worker version (see the docstring)."""
    report = RestartReport(connector)
    if not (include_tasks or only_failed):
        outcome = await client.restart(connector)
        report.lines.append(
            f"connector {connector}: restarted (HTTP {outcome.status}; the connector object "
            "only, its tasks were not: --include-tasks restarts them too)"
        )
        return report
    version = version if version is not None else await client.version()
    if parse_version(version) >= RESTART_PARAMS_SINCE:
        outcome = await client.restart(
            connector, include_tasks=include_tasks, only_failed=only_failed
        )
        report.states = outcome.states
        report.lines.append(f"connector {connector}: restart accepted (HTTP {outcome.status})")
        return report
    # Before KIP-745 the parameters are ignored: one call per instance, from the status.
    status = status if status is not None else await client.status(connector)
    report.lines.append(
        f"connector {connector}: worker {version} is older than Kafka 3.0 and ignores "
        "includeTasks/onlyFailed; restarting one by one"
    )
    if not only_failed or status.state == "FAILED":
        await client.restart(connector)
        report.lines.append(f"  connector  restarted (was {status.state})")
    if include_tasks:
        for task in status.tasks:
            if not only_failed or task.state == "FAILED":
                await client.restart_task(connector, task.id)
                report.lines.append(f"  task {task.id:<5} restarted (was {task.state})")
    if len(report.lines) == 1:
        report.lines.append("  nothing is FAILED: nothing restarted")
    return report


async def settle(client: ConnectClient, connector: str, *, timeout: float) -> ConnectorStatus:
    """After a restart: wait until nothing is RESTARTING or UNASSIGNED; StateNotReached when
    something is FAILED then."""
    status = await wait_for(client, connector, _settled, "settled", timeout=timeout)
    if status.failed:
        raise StateNotReached(f"connector {connector} was restarted but {_failed(status)}")
    return status


def _settled(status: ConnectorStatus) -> bool:
    return status.settled


def _failed(status: ConnectorStatus) -> str:
    parts = ["the connector"] if status.state == "FAILED" else []
    parts += [f"task {t}" for t in status.failed_tasks]
    trace = next((t for t in (status.trace, *(x.trace for x in status.tasks)) if t), "")
    first = trace.strip().splitlines()[0] if trace.strip() else ""
    return f"{' and '.join(parts)} FAILED" + (f" ({first})" if first else "")

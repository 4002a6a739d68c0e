"""One-off operations on connectors: restart (on every worker version), stop, resume, and
waiting for the state they lead to, judged from what the worker shows.

A worker's REST status lags what the worker does (measured on Kafka Connect 4.3.1; see
docs/operations.md, "Kafka Connect"): after a KIP-745 restart's 202 the restarted tasks keep
their old state (a FAILED task its old trace) for tens of ms, show RESTARTING for ~15 ms, then
their new state; after a stop's 204 the connector shows STOPPED 0.1-0.4 s before its tasks are
gone; after resuming a STOPPED connector it shows RUNNING with no tasks for 60-100 ms. So:

- A restart is settled once every instance it restarted has been seen out of the state it had
  before the restart, and nothing is RESTARTING or UNASSIGNED. While some have not, the status
  is read back to back (~6 ms a read) for at most `FAST_FOR`, then every `POLL`. After
  `FAST_FOR` an instance that was RUNNING and still is counts as restarted and is named ("its
  restart was not seen"): the state wanted is the one it shows. A FAILED one never does: still
  FAILED at the deadline, it "failed again at once or was never restarted" (Connect's status
  cannot tell which), and the restart failed.
  Synchronous restarts (204: the connector alone, and each call on a worker older than 3.0) are
  done when answered, so only their non-RUNNING instances must be seen to change, and one still
  FAILED after `FAST_FOR` failed again (the status lags by milliseconds, not seconds).
- A stop is done once the connector is STOPPED and no task is listed.
- A resume is done once the connector is RUNNING and lists exactly the tasks of its task
  configs (`GET .../tasks`, none until the connector made them), every one RUNNING; a FAILED
  instance ends the wait. A connector that makes no tasks never gets there: the deadline says so.
- A restart with `--include-tasks` or `--only-failed` is one KIP-745 call on Kafka 3.0 and
  later. Older workers ignore both parameters and restart the connector object alone (204, as
  if all went well), so there the connector (when asked for) and each task are restarted one
  call at a time, from the status read just before, and each restart is reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from rollguard.roller.connect.client import ConnectClient, ConnectError, ConnectorStatus
from rollguard.roller.connect.versions import (
    RESTART_PARAMS_SINCE,
    STOP_SINCE,
    parse_version,
    require,
)
from rollguard.shared.converters import format_duration
from rollguard.shared.errors import NodeFailed, RollguardError

POLL = 0.25  # seconds between two status reads while waiting
RESTART_POLL = 0.0  # back to back while a restarted instance has not been seen to change
FAST_FOR = 5.0  # ... for at most this long after the restart (RESTARTING shows ~15 ms)

Sleep = Callable[[float], Awaitable[object]]
T = TypeVar("T")


class WaitTimeout(NodeFailed):
    """A connector did not reach the state waited for in time; the message says where it is."""


class StateNotReached(NodeFailed):
    """A restarted connector settled FAILED (or a resumed one FAILED): the message says which."""


def instance_states(status: ConnectorStatus) -> dict[str, str]:
    """Each instance's state as the status shows it: "connector", "task 0", ..."""
    return {"connector": status.state, **{f"task {t.id}": t.state for t in status.tasks}}


def is_stopped(status: ConnectorStatus) -> bool:
    """STOPPED, and its tasks gone (the connector shows STOPPED before they are)."""
    return status.state == "STOPPED" and not status.tasks


def is_running(status: ConnectorStatus, task_ids: Sequence[int]) -> bool:
    """RUNNING with exactly the tasks of its task configs listed, each RUNNING (a resumed
    connector shows RUNNING before its tasks are listed; no task configs yet is not there)."""
    return (
        status.state == "RUNNING"
        and bool(task_ids)
        and sorted(t.id for t in status.tasks) == sorted(task_ids)
        and all(t.state == "RUNNING" for t in status.tasks)
    )


@dataclass
class RestartWatch:
    """What a restart must be seen to have done: each restarted instance ("connector",
    "task N") and the state it had before. Fed every status read (`see`); pure."""

    before: dict[str, str] = field(default_factory=dict)
    synchronous: bool = False  # the restart was done when answered (204)
    left: set[str] = field(default_factory=set)
    unseen: set[str] = field(default_factory=set)  # RUNNING before and after, never seen changing

    def see(self, status: ConnectorStatus) -> None:
        now = instance_states(status)
        self.left.update(key for key, old in self.before.items() if now.get(key) != old)

    def stop_looking(self) -> None:
        """After `FAST_FOR`: a restarted instance that was RUNNING and still is counts as
        restarted (its RESTARTING lasts ~15 ms and can fall between two reads; the wanted
        state is the one it shows), and is named in `unseen`. A FAILED one only when the
        restart was synchronous: done when answered, and the status lags by milliseconds, so
        after `FAST_FOR` its FAILED is the new one; after a 202 it never does."""
        for key, old in self.pending.items():
            if old == "RUNNING" or self.synchronous:
                self.unseen.add(key)
                self.left.add(key)

    @property
    def pending(self) -> dict[str, str]:
        """Restarted instances still seen only in their old state."""
        return {key: old for key, old in self.before.items() if key not in self.left}

    def settled(self, status: ConnectorStatus) -> bool:
        return not self.pending and status.settled


async def _poll(
    read: Callable[[], Awaitable[T]],
    reached: Callable[[T], bool],
    timed_out: Callable[[T], RollguardError],
    *,
    timeout: float,
    interval: Callable[[float], float] = lambda elapsed: POLL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """`read()` until `reached`; `timed_out(last)` is raised at the deadline."""
    start = clock()
    deadline = start + timeout
    while True:
        value = await read()
        if reached(value):
            return value
        if clock() >= deadline:
            raise timed_out(value)
        await sleep(min(interval(clock() - start), max(0.0, deadline - clock())))


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

    def timed_out(status: ConnectorStatus) -> RollguardError:
        return WaitTimeout(
            f"connector {connector} is not {what} after {format_duration(timeout)}: "
            f"{status.describe()}"
        )

    return await _poll(
        lambda: client.status(connector),
        reached,
        timed_out,
        timeout=timeout,
        interval=lambda elapsed: poll,
        clock=clock,
        sleep=sleep,
    )


async def stop(client: ConnectClient, connector: str, *, wait: float | None) -> ConnectorStatus:
    """PUT stop (refused before 3.5, nothing sent); with `wait`, poll until STOPPED with no
    task listed."""
    require(await client.version(), STOP_SINCE, "stopping a connector (PUT .../stop)")
    await client.stop(connector)
    if wait is None:
        return await client.status(connector)
    return await wait_for(client, connector, is_stopped, "STOPPED with no task", timeout=wait)


async def resume(client: ConnectClient, connector: str, *, wait: float | None) -> ConnectorStatus:
    """PUT resume (a paused or a stopped connector); with `wait`, `wait_resumed`."""
    await client.resume(connector)
    if wait is None:
        return await client.status(connector)
    return await wait_resumed(client, connector, timeout=wait)


async def wait_resumed(client: ConnectClient, connector: str, *, timeout: float) -> ConnectorStatus:
    """Poll until the connector is RUNNING with every task of its task configs listed RUNNING
    (`is_running`); StateNotReached when something FAILED. The task configs are read through
    the worker's herder, which answers 409 while the group rebalances: not there yet."""

    async def read() -> tuple[ConnectorStatus, list[int]]:
        status = await client.status(connector)
        ids: list[int] = []
        if status.state == "RUNNING":
            try:
                ids = await client.task_ids(connector)
            except ConnectError as exc:
                if exc.status != 409:
                    raise
        return status, ids

    def timed_out(last: tuple[ConnectorStatus, list[int]]) -> RollguardError:
        status, ids = last
        configs = f"{len(ids)} task config(s)" if ids else "no task configs yet"
        return WaitTimeout(
            f"connector {connector} is not RUNNING with all its tasks after "
            f"{format_duration(timeout)}: {status.describe()} ({configs})"
        )

    status, _ = await _poll(
        read, lambda last: is_running(*last) or last[0].failed, timed_out, timeout=timeout
    )
    if status.failed:
        raise StateNotReached(f"connector {connector} was resumed but {_failed(status)}")
    return status


@dataclass
class RestartReport:
    """What one restart did, for the command's output: `lines` in order, `states` as Connect
    showed them afterwards (the 202 plan, or the status after `--wait`), `watch` what `settle`
    must see it do."""

    connector: str
    lines: list[str] = field(default_factory=list)
    states: ConnectorStatus | None = None
    watch: RestartWatch = field(default_factory=RestartWatch)


async def restart(
    client: ConnectClient,
    connector: str,
    *,
    include_tasks: bool,
    only_failed: bool,
    version: str | None = None,
    status: ConnectorStatus | None = None,
) -> RestartReport:
    """Restart `connector` as KIP-745 describes, on any worker version (see the docstring).
    `status`: the status read just before (read here when not given)."""
    report = RestartReport(connector)
    before = status if status is not None else await client.status(connector)
    old = instance_states(before)
    if not (include_tasks or only_failed):
        outcome = await client.restart(connector)
        report.lines.append(
            f"connector {connector}: restarted (HTTP {outcome.status}; the connector object "
            "only, its tasks were not: --include-tasks restarts them too)"
        )
        report.watch = _synchronous(old, ["connector"])
        return report
    version = version if version is not None else await client.version()
    if parse_version(version) >= RESTART_PARAMS_SINCE:
        outcome = await client.restart(
            connector, include_tasks=include_tasks, only_failed=only_failed
        )
        report.states = outcome.states
        report.lines.append(f"connector {connector}: restart accepted (HTTP {outcome.status})")
        if outcome.states is not None:  # 202: the plan, each restarted instance RESTARTING
            planned = instance_states(outcome.states)
            report.watch = RestartWatch(
                {key: old.get(key, "") for key, state in planned.items() if state == "RESTARTING"}
            )
        else:  # 204: a worker that restarted the connector alone, synchronously
            report.watch = _synchronous(old, ["connector"])
        return report
    # Before KIP-745 the parameters are ignored: one call per instance, from the status.
    report.lines.append(
        f"connector {connector}: worker {version} is older than Kafka 3.0 and ignores "
        "includeTasks/onlyFailed; restarting one by one"
    )
    restarted = []
    if not only_failed or before.state == "FAILED":
        await client.restart(connector)
        restarted.append("connector")
        report.lines.append(f"  connector  restarted (was {before.state})")
    if include_tasks:
        for task in before.tasks:
            if not only_failed or task.state == "FAILED":
                await client.restart_task(connector, task.id)
                restarted.append(f"task {task.id}")
                report.lines.append(f"  task {task.id:<5} restarted (was {task.state})")
    if not restarted:
        report.lines.append("  nothing is FAILED: nothing restarted")
    report.watch = _synchronous(old, restarted)
    return report


def _synchronous(old: dict[str, str], restarted: Sequence[str]) -> RestartWatch:
    """A restart done when answered: its instances that were not RUNNING must still be seen to
    change (the status lags); RUNNING ones cannot be, and need not."""
    return RestartWatch(
        {k: old.get(k, "") for k in restarted if old.get(k) != "RUNNING"}, synchronous=True
    )


async def settle(
    client: ConnectClient,
    connector: str,
    *,
    timeout: float,
    watch: RestartWatch | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> ConnectorStatus:
    """After a restart: wait until every restarted instance has left its old state and nothing
    is RESTARTING or UNASSIGNED; StateNotReached when something is FAILED then, or when a
    restarted instance is still FAILED at the deadline."""
    watch = watch if watch is not None else RestartWatch()

    start = clock()

    async def read() -> ConnectorStatus:
        status = await client.status(connector)
        watch.see(status)
        if watch.pending and clock() - start >= FAST_FOR:
            watch.stop_looking()
        return status

    def interval(elapsed: float) -> float:
        return RESTART_POLL if watch.pending and elapsed < FAST_FOR else POLL

    def timed_out(status: ConnectorStatus) -> RollguardError:
        pending = watch.pending
        if not pending:
            return WaitTimeout(
                f"connector {connector} is not settled after {format_duration(timeout)}: "
                f"{status.describe()}"
            )
        named = ", ".join(f"{key} still {state}" for key, state in pending.items())
        if status.failed:
            return StateNotReached(
                f"connector {connector} was restarted but {named} "
                f"{format_duration(timeout)} later: Connect never showed it restarting, so it "
                f"failed again at once or was never restarted; {_failed(status)}"
            )
        return WaitTimeout(
            f"connector {connector}: the restart of {', '.join(pending)} was not seen in "
            f"{format_duration(timeout)} ({named}): {status.describe()}"
        )

    status = await _poll(
        read, watch.settled, timed_out, timeout=timeout, interval=interval, clock=clock, sleep=sleep
    )
    if status.failed:
        raise StateNotReached(f"connector {connector} was restarted but {_failed(status)}")
    return status


def _failed(status: ConnectorStatus) -> str:
    parts = ["the connector"] if status.state == "FAILED" else []
    parts += [f"task {t}" for t in status.failed_tasks]
    trace = next((t for t in (status.trace, *(x.trace for x in status.tasks)) if t), "")
    first = trace.strip().splitlines()[0] if trace.strip() else ""
    return f"{' and '.join(parts)} FAILED" + (f" ({first})" if first else "")

"""Live progress of a roll: a table on a terminal (rich), log lines otherwise.

The table is drawn on stderr and takes stderr's other lines (warnings, retries) above itself;
stdout is left alone, so that the roll's result still goes where stdout was sent.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rollguard.roller.model import Node
from rollguard.roller.roll.node.budgets import RecoveryTracker
from rollguard.roller.roll.voice import Progress
from rollguard.shared.cli import ExitCode, failure_json, report_failure
from rollguard.shared.converters import format_duration
from rollguard.shared.logs import PROGRESS
from rollguard.shared.retry import RetryStats

if TYPE_CHECKING:
    from rich.table import Table

    from rollguard.roller.roll.roller import RollResult

logger = logging.getLogger(__name__)
progress = logging.getLogger(PROGRESS)  # the roll's progress lines, on stderr


DETAIL_WIDTH = 72  # what a node waits on, cut to fit a terminal line
_AGENT_URL = re.compile(r"https://\S+?: ")  # `https://kafka-0:8443/v1/broker-state: ` in reasons


class LiveTable:
    """One row a node: state, what it waits on (partitions, brokers, its agent's answer), a
    recovery progress bar, ETA. Refreshed on every update."""

    def __init__(self, nodes: list[Node]) -> None:
        self.rows: dict[str, tuple[str, str, str, str]] = {
            n.name: ("pending", "", "", "") for n in nodes
        }
        # rich only here: a roll whose stderr is no terminal (most) does not pay its import.
        from rich.console import Console
        from rich.live import Live

        self._live = Live(
            self._table(), console=Console(stderr=True), auto_refresh=False, redirect_stdout=False
        )

    def __enter__(self) -> LiveTable:
        self._live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._live.__exit__(kind, value, tb)

    def update(self, node: Node, text: str, tracker: RecoveryTracker | None) -> None:
        bar, eta = "", ""
        if tracker is not None and tracker.points:
            first, last = tracker.points[0], tracker.points[-1]
            total = max(first.logs, 1)  # logs: segments count only the logs being recovered
            done = (total - last.logs) / total
            bar = "#" * int(done * 20) + "." * (20 - int(done * 20)) + f" {done:4.0%}"
            remaining = tracker.eta()
            eta = format_duration(remaining) if remaining is not None else "?"
        state, _, detail = text.partition(":")
        # The row names the node: its agent's URL would leave no room for what it said.
        detail = _AGENT_URL.sub("", detail.strip())
        if len(detail) > DETAIL_WIDTH:
            detail = detail[: DETAIL_WIDTH - 1] + "…"
        self.rows[node.name] = (state, detail, bar, eta)
        self._live.update(self._table(), refresh=True)

    def _table(self) -> Table:
        from rich.table import Table

        table = Table(title="rollguard roll")
        for column in ("node", "state", "waiting on", "recovery", "ETA"):
            table.add_column(column)
        for name, (state, detail, bar, eta) in self.rows.items():
            table.add_row(name, state, detail, bar, eta)
        return table


def on_terminal() -> bool:
    return sys.stderr.isatty()


PROGRESS_EVERY = 5.0  # seconds between two recovery progress lines of one node, off a terminal


def reporter(display: LiveTable | None, output: str) -> Progress:
    """Where progress goes: the live table (a terminal), one JSON object a line on stdout
    (`--output json`: the stream a program reads), else log lines on stderr (`--log-format`)."""
    last: dict[str, str] = {}
    last_line: dict[str, float] = {}

    def report(node: Node, text: str, tracker: RecoveryTracker | None) -> None:
        if display is not None:
            display.update(node, text, tracker)
        elif output == "json":
            entry: dict[str, Any] = {"node": node.name, "state": text}
            if tracker is not None and tracker.points:
                entry.update(
                    remainingLogs=tracker.points[-1].logs,
                    remainingSegments=tracker.points[-1].segments,
                    rate=tracker.rate(),
                    eta=tracker.eta(),
                )
            print(json.dumps(entry), flush=True)
        else:
            # One line per transition; while recovering, a progress line every few seconds.
            state = text.split(":")[0]
            now = time.monotonic()
            due = tracker is not None and now - last_line.get(node.name, 0.0) >= PROGRESS_EVERY
            if last.get(node.name) != state or due:
                last[node.name], last_line[node.name] = state, now
                progress.info("%s: %s", node.name, text)

    return report


def finish(
    output: str,
    state_dir: Path,
    roll_id: str,
    outcome: str,
    detail: str,
    stats: RetryStats,
    result: RollResult | None = None,
) -> None:
    """The roll's outcome: its result on stdout (a line, or an object that carries the error
    when it failed), and the same as the last line of stderr's progress (or its failure line),
    so that `roll > result` and `roll 2> progress.log` each end with it. Once, when both streams
    are one file (`> roll.log 2>&1`, or one terminal)."""
    line = f"roll {roll_id} {outcome}: {detail}; {stats.summary()}"
    if output == "json":
        result_json: dict[str, Any] = {
            "rollId": roll_id,
            "outcome": outcome,
            "detail": detail,
            "retries": stats.summary(),
            "operations": stats.to_json(),
            "stateDir": str(state_dir),
        }
        if result is not None:  # the whole roll's nodes, by name
            result_json.update(
                restarted=result.restarted,
                configured=result.configured,
                skipped=result.left_out,
                held=result.held,
            )
        if outcome == "failed":
            result_json.update(failure_json(detail, ExitCode.FAILED))
        print(json.dumps(result_json), flush=True)
    else:
        print(f"{line}; journal and events in {state_dir}", flush=True)
    if output == "json" or not _one_destination():
        if outcome == "failed":
            report_failure(line, ExitCode.FAILED)  # the JSON object above carries it
        else:
            progress.info("%s", line)


def _one_destination() -> bool:
    """stdout and stderr are the same open file."""
    try:
        return os.path.sameopenfile(sys.stdout.fileno(), sys.stderr.fileno())
    except (OSError, ValueError):  # not real files (captured): two destinations
        return False

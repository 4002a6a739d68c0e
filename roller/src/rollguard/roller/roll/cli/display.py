"""Live progress of a roll: a table on a terminal (rich), log lines otherwise.

The table is drawn on stderr and takes stderr's other lines (warnings, retries) above itself;
stdout is left alone, so that the roll's result still goes where stdout was sent.
"""

from __future__ import annotations

import logging
import re
import sys
from types import TracebackType
from typing import TYPE_CHECKING

from rollguard.roller.model import Node
from rollguard.roller.roll.rules.budgets import RecoveryTracker
from rollguard.shared.converters import format_duration

if TYPE_CHECKING:
    from rich.table import Table

logger = logging.getLogger(__name__)


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

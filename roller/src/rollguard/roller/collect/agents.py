"""Pulling one agent's recovery timeline: pages after the node's cursor, until caught up, failed
or out of time, each record a row of the dataset's timeline table (rollguard.shared.dataset).

When an agent's journal starts again (its data was lost: the agent's latest seq is below the
cursor, or another node id answers), the node's `journal` number goes up by one and it is read
from the start; the report orders records by (journal, seq).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rollguard.roller.agent_client import AgentClient, AgentUnavailable
from rollguard.roller.model import Node
from rollguard.shared.timeline import TimelineRecord
from rollguard.shared.wire import format_time


@dataclass
class NodeCursor:
    after: int = 0
    journal: int = 0
    node_id: str | None = None


@dataclass
class NodeResult:
    node: str
    url: str
    status: str = "ok"  # ok, unavailable, timed-out
    records: int = 0
    pages: int = 0
    after: int = 0
    message: str = ""
    expired: list[tuple[int, int]] = field(default_factory=list)
    # Records the agent could not write (a full disk): (fromTs, toTs, records), from gap markers
    # in the journal and from a page saying writes are failing now.
    unwritten: list[tuple[int, int, int]] = field(default_factory=list)
    reset: bool = False
    seconds: float = 0.0


async def pull(
    client: AgentClient,
    node: Node,
    cursor: NodeCursor,
    *,
    page_size: int,
    deadline: float,
    rows: list[dict[str, Any]],
) -> NodeResult:
    """Pages after the node's cursor, until caught up, failed or out of time. Rows go into
    `rows` as they arrive (so a slow agent keeps what it sent); `cursor` moves with them."""
    assert node.agent_url is not None
    result = NodeResult(node.name, node.agent_url, after=cursor.after)
    started = time.monotonic()
    reset_done = False
    try:
        async with asyncio.timeout(deadline):
            while True:
                page = await client.timeline(node.agent_url, cursor.after, page_size)
                if isinstance(page, AgentUnavailable):
                    status = f"HTTP {page.status}" if page.status else "no HTTP answer"
                    result.status = "unavailable"
                    result.message = f"{status}, {page.reason}: {page.message}"
                    break
                result.pages += 1
                other = page.records and cursor.node_id not in (None, page.records[0].node_id)
                if (page.latest < cursor.after or other) and not reset_done:
                    # The agent's journal started again (its data was lost, or it is another
                    # node's): a new journal number, read from the start.
                    cursor.journal, cursor.after, cursor.node_id = cursor.journal + 1, 0, None
                    result.reset = reset_done = True
                    continue
                if page.expired is not None:
                    result.expired.append(page.expired)
                new = [r for r in page.records if r.seq > cursor.after]
                for gap in (page.unwritten, *(r.unwritten for r in new)):
                    entry = (gap.from_ts, gap.to_ts, gap.records) if gap is not None else None
                    if entry is not None and entry not in result.unwritten:
                        result.unwritten.append(entry)
                for record in page.records:
                    if record.seq > cursor.after:
                        rows.append(_row(node.name, cursor.journal, record))
                        cursor.after, cursor.node_id = record.seq, record.node_id
                        result.records += 1
                if not page.records or cursor.after >= page.latest:
                    break
    except TimeoutError:
        result.status = "timed-out"
        result.message = f"not caught up within --agent-deadline {deadline:g}s; kept what came"
    result.after, result.seconds = cursor.after, time.monotonic() - started
    return result


def _row(node: str, journal: int, record: TimelineRecord) -> dict[str, Any]:
    """The record as a row of the timeline table (rollguard.shared.dataset.TIMELINE)."""
    return {
        "node": node,
        "nodeId": record.node_id,
        "journal": journal,
        "bootId": record.boot_id,
        "seq": record.seq,
        "ts": record.ts,
        "brokerState": record.broker_state,
        "remainingLogsToRecover": record.remaining_logs,
        "remainingSegmentsToRecover": record.remaining_segments,
        "recoveryPhase": None if record.recovery_phase is None else str(record.recovery_phase),
    }


def _utc(ms: int) -> str:
    return format_time(datetime.fromtimestamp(ms / 1000, UTC))


def describe(result: NodeResult) -> str:
    text = f"{result.status}: {result.records} new records in {result.pages} pages"
    text += f", cursor {result.after}"
    if result.reset:
        text += "; the agent's journal started again (new journal number), read from the start"
    for first, last in result.expired:
        text += f"; GAP: records {first}-{last} expired on the agent before they were collected"
    for start, end, count in result.unwritten:
        text += (
            f"; GAP: {count} records from {_utc(start)} to {_utc(end)} were never written "
            "(the agent's disk was failing)"
        )
    if result.message:
        text += f"; {result.message}"
    return text

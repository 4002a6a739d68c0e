"""The report page's pieces: people's durations and UTC times, anchors, tables and images."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

Row = dict[str, Any]


def duration(seconds: float | None) -> str:
    """`58m 12s`, `3h 05m`, `2d 4h`, `12.5s`: whole units a person reads at a glance."""
    if seconds is None:
        return "-"
    if seconds < 9.95:
        return f"{seconds:.1f}s"
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def when(ms: int | None) -> str:
    """UTC ISO 8601 to the second: 2026-11-23T14:05:09Z."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def anchor(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(str(p) for p in parts))


def img(png: str, alt: str, element_id: str = "") -> str:
    ident = f' id="{element_id}"' if element_id else ""
    return f'<img{ident} alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


# A column: key, title, kind (t: text, d: duration in seconds, ts: ms time, r: rate, n: number,
# h: HTML already escaped).
Column = tuple[str, str, str]


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "d":
        return duration(value)
    if kind == "ts":
        return when(value)
    if kind in ("h", "w"):
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return html.escape(", ".join(map(str, value)))
    return html.escape(str(value))


def table(rows: Sequence[Row], columns: Sequence[Column]) -> str:
    def cls(kind: str) -> str:
        return ' class="t"' if kind in ("t", "h", "ts") else (' class="why"' if kind == "w" else "")

    head = "".join(f"<th{cls(kind)}>{html.escape(title)}</th>" for _, title, kind in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td{cls(kind)}>{_cell(row.get(key), kind)}</td>" for key, _, kind in columns)
        + "</tr>"
        for row in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'

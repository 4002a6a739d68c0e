"""The report page's pieces: people's durations and UTC times, names that never wrap, anchors,
tables and images."""

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


def signed_duration(seconds: float | None) -> str:
    """`+30s`, `-1m 05s` (with U+2212, the minus sign): a difference, its sign always shown."""
    if seconds is None:
        return "-"
    return ("\N{MINUS SIGN}" if seconds < 0 else "+") + duration(abs(seconds))


def when(ms: int | None) -> str:
    """UTC ISO 8601 to the second: 2026-11-23T14:05:09Z."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def name(text: object) -> str:
    """A cluster or node name, escaped, that never breaks across lines (a list of names may)."""
    return whole(html.escape(str(text)))


def whole(markup: str) -> str:
    """HTML kept on one line, in a cell or a paragraph that may wrap around it."""
    return f'<span class="whole">{markup}</span>'


def anchor(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(str(p) for p in parts))


def img(png: str, alt: str, element_id: str = "") -> str:
    ident = f' id="{element_id}"' if element_id else ""
    return f'<img{ident} alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


# A column: key, title, kind (t: text, d: duration in seconds, ts: ms time, n: number, w: HTML
# already escaped, which may wrap between words). A list is names, each kept whole.
Column = tuple[str, str, str]


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(name(v) for v in value) or "-"
    if kind == "d":
        return duration(value)
    if kind == "ts":
        return when(value)
    if kind == "w":
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def table(
    rows: Sequence[Row],
    columns: Sequence[Column],
    group: str = "",
    detail: Sequence[tuple[str, str]] = (),
) -> str:
    """`rows` under `columns`. With `group` (a key the rows are sorted by), each run of rows with
    the same value is headed by a row across the table naming it, instead of a column repeating
    it: a cluster's name once, not on every line. `detail` (key, title) pairs are HTML shown on
    a line of their own under a row, across the table, when the row has any: long prose (a
    reason, a list of links) beside a long name would widen the table past the page."""

    def cls(kind: str) -> str:
        return ' class="t"' if kind in ("t", "ts") else (' class="why"' if kind == "w" else "")

    head = "".join(f"<th{cls(kind)}>{html.escape(title)}</th>" for _, title, kind in columns)
    body = []
    current: object = None
    for i, row in enumerate(rows):
        if group and (i == 0 or row.get(group) != current):
            current = row.get(group)
            body.append(
                f'<tr class="group"><th class="t" colspan="{len(columns)}">'
                f"{html.escape(group)} {name(current)}</th></tr>"
            )
        cells = "".join(
            f"<td{cls(kind)}>{_cell(row.get(key), kind)}</td>" for key, _, kind in columns
        )
        body.append(f"<tr>{cells}</tr>")
        notes = [f"{html.escape(title)}: {row[key]}" for key, title in detail if row.get(key)]
        if notes:
            body.append(
                f'<tr class="detail"><td class="why" colspan="{len(columns)}">'
                + "<br>".join(notes)
                + "</td></tr>"
            )
    return f'<div class="scroll"><table><tr>{head}</tr>{"".join(body)}</table></div>'

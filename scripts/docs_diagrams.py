"""The documentation's diagrams, drawn by Graphviz from what the code says: the architecture,
and the life of a node in a roll from the roller's own states (`node_life`, the one place that
names them, so that it is the one place to re-point when they move). scripts/docs_pictures.py
writes them into docs/img/; tests/unit/test_docs_reference.py checks the drawn states.
"""

from __future__ import annotations

import html
import inspect
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# ---- the life of a node ------------------------------------------------------------------


@dataclass(frozen=True)
class Life:
    """A node's states in a roll (name, what the code says of it, where it is kept) and the
    transitions between them (from, to, when)."""

    states: tuple[tuple[str, str, str], ...]
    transitions: tuple[tuple[str, str, str], ...]


def node_life() -> Life:
    """The roller's own states of a node and its transitions: the one place that imports them.

    A node's life in a roll is its record's `Phase` (rollguard.roller.roll.node.record), and
    every move the roll makes it take is that module's `TRANSITIONS` (tests/sim/test_node_life.py
    holds the roll's own steps to it): a renamed, removed or new phase is drawn as it is."""
    from rollguard.roller.roll.node.record import TRANSITIONS, Phase

    states = tuple((p.value, _comment(Phase, p.name), _where(p)) for p in Phase)
    transitions = tuple((str(a), str(b), _lines(why, 22)) for a, b, why in TRANSITIONS)
    life = Life(states, transitions)
    check_life(life)
    return life


def _where(phase: object) -> str:
    """Each phase's colour: before its restart, on its way back, or at an end."""
    name = str(phase)
    if name in ("done", "left-out", "held", "failed"):
        return "end"
    if name in ("restarting", "configuring", "catching-up"):
        return "back"
    return "before"


def _comment(enum: type, member: str) -> str:
    """The comment the enum's source gives a member (`READY = "ready"  # restarted: ...`)."""
    for line in inspect.getsource(enum).splitlines():
        if re.match(rf"\s*{member}\s*=", line) and "#" in line:
            said = line.split("#", 1)[1].replace("`", "")
            return re.sub(r"\s*\(issues? [\d, ]+\)", "", said).strip()
    return ""


def check_life(life: Life) -> None:
    names = {name for name, _, _ in life.states}
    for a, b, _ in life.transitions:
        if a not in names or b not in names:
            raise SystemExit(f"node_life: a transition {a} -> {b} names no state")
    placed = {a for a, _, _ in life.transitions} | {b for _, b, _ in life.transitions}
    if names - placed:
        raise SystemExit(
            f"node_life: states with no transition: {', '.join(sorted(names - placed))}"
            " (give them their moves in rollguard.roller.roll.node.record.TRANSITIONS)"
        )


def node_life_dot(life: Life) -> str:
    colors = {"before": "#eeeeee", "back": "#dbe7f7", "end": "#e3f2df"}
    ends = {"done", "left-out", "failed", "held"}
    out = [
        "digraph life {",
        '  graph [rankdir=TB, fontname="DejaVu Sans", fontsize=12, nodesep=0.25, ranksep=0.5,'
        ' bgcolor="white"];',
        '  node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=14,'
        ' margin="0.12,0.06"];',
        '  edge [fontname="DejaVu Sans", fontsize=11, color="#555555", fontcolor="#333333"];',
    ]
    for name, said, where in life.states:
        note = _wrap(said, 24)
        small = f"<br/><font point-size='10'>{note}</font>" if note else ""
        label = f"<<b>{name}</b>{small}>"
        extra = ", peripheries=2" if name in ends else ""
        out.append(f'  "{name}" [label={label}, fillcolor="{colors[where]}"{extra}];')
    for a, b, why in life.transitions:
        back = (a, b) in (
            ("failed", "new"),
            ("held", "new"),
            ("recovering", "restarting"),
            ("waiting", "pending"),
            ("recovering", "pending"),
            ("recovering", "waiting"),
        )
        style = ", style=dashed, constraint=false" if back else ""
        label = html.escape(why).replace("\n", "\\n")
        out.append(f'  "{a}" -> "{b}" [label="{label}"{style}];')
    out += [
        '  legend [shape=plaintext, style="", fontsize=12,'
        ' label=<<table border="0" cellspacing="4">'
        '<tr><td bgcolor="#eeeeee">  </td>'
        '<td align="left">before its restart</td></tr>'
        '<tr><td bgcolor="#dbe7f7">  </td>'
        '<td align="left">restarted (or changed live): never restarted again</td></tr>'
        '<tr><td bgcolor="#e3f2df">  </td>'
        '<td align="left">the roll is done with it (a resume takes a failed or held one again)'
        "</td></tr>"
        "</table>>];",
        "  {rank=sink; legend}",
        "}",
    ]
    return "\n".join(out) + "\n"


def _lines(text: str, width: int) -> str:
    """`text` in lines of about `width` characters (an edge's label)."""
    return _wrap(text, width).replace("<br/>", "\n")


def _wrap(text: str, width: int) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "<br/>".join(html.escape(x) for x in lines if x)


# ---- the architecture ----------------------------------------------------------------------


EDGE = '  edge [fontname="DejaVu Sans", fontsize=9, color="#555555", fontcolor="#333333"];'


def architecture_dot() -> str:
    """Who talks to whom: an agent beside each Kafka node, the roller, collect, the report."""

    def box(name: str, title: str, note: str, colour: str = "#ffffff", shape: str = "box") -> str:
        return (
            f'  {name} [label=<<b>{title}</b><br/><font point-size="9">{note}</font>>,'
            f' fillcolor="{colour}", shape={shape}];'
        )

    return (
        "\n".join(
            [
                "digraph architecture {",
                '  graph [rankdir=LR, fontname="DejaVu Sans", nodesep=0.3, ranksep=0.9,'
                ' bgcolor="white"];',
                '  node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=11,'
                ' margin="0.16,0.07"];',
                EDGE,
                box(
                    "roller",
                    "rollguard roll | plan",
                    "the roller: observe, decide (pure),<br/>restart one node at a time",
                    "#e3f2df",
                ),
                box(
                    "collect",
                    "rollguard collect",
                    "every agent's timeline,<br/>the rolls' events",
                    "#e3f2df",
                ),
                box(
                    "report",
                    "rollguard-report",
                    "Spark: report.html, tables,<br/>expectations.json",
                    "#f3e5f5",
                ),
                box(
                    "platform",
                    "Kubernetes API or inventory",
                    "delete a pod, or run<br/>the node's restart command",
                ),
                box(
                    "journal",
                    "journal, events, lease",
                    "--state-dir, or<br/>ConfigMaps and a Lease",
                    shape="cylinder",
                ),
                box("dataset", "dataset", "Parquet, by cluster and date", shape="cylinder"),
                "  subgraph cluster_node {",
                '    label="each Kafka node: a VM, or a pod"; style="rounded,filled";',
                '    fillcolor="#f4f6fa";',
                '    fontname="DejaVu Sans"; fontsize=10; color="#9aa5b8";',
                box(
                    "agent",
                    "rollguard-agent",
                    "broker state, log recovery,<br/>its recovery timeline",
                    "#dbe7f7",
                ),
                box("kafka", "Kafka", "broker and/or controller,<br/>JMX on loopback", "#fff4dc"),
                '    agent -> kafka [label="JMX"];',
                "  }",
                '  roller -> agent [label="GET /v1/broker-state\\n(mutual TLS)"];',
                '  roller -> kafka [label="Admin API: ISRs, min ISR,\\nquorum, reassignments"];',
                '  roller -> platform [label="restart"]; platform -> kafka;',
                "  roller -> journal;",
                '  collect -> agent [style=dashed, label="GET /v1/recovery-timeline"];',
                '  journal -> collect [style=dashed, label="events"];',
                "  collect -> dataset; dataset -> report;",
                '  report -> roller [style=dotted, label="--expectations", constraint=false];',
                "  {rank=same; roller; collect; report}",
                "}",
            ]
        )
        + "\n"
    )


def dot(source: str, out: Path) -> None:
    """`source` drawn by Graphviz into `out` (SVG)."""
    binary = shutil.which("dot")
    if binary is None:
        raise SystemExit("dot not found: `make docs-pictures` installs Debian's graphviz")
    done = subprocess.run(
        [binary, "-Tsvg"], input=source, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"dot failed: {done.stderr.strip()}")
    svg = re.sub(r"<!-- Generated by graphviz version [^>]*-->\n", "", done.stdout)
    out.write_text(svg)

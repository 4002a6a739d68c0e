"""The documentation's pictures, each made by a program from the code or from a real roll.

    .venv/bin/python scripts/docs_pictures.py [--reuse]      (`make docs-pictures`)

Into docs/img/:
- architecture.svg: the components and what flows between them (Graphviz `dot`);
- node-life.svg: the life of a node in a roll, drawn from the roller's own states and
  transitions (`node_life`, the one place that names them);
- live-view.png: the roll's live table, as a terminal showed it during `make demo`'s real roll
  (kafka-1 in its real log recovery): the demo is run under `script`, so that the roll draws on
  a terminal, and the frame nearest half-way through the recovery is replayed by pyte (a
  terminal emulator), written as HTML and photographed by headless Chromium;
- report.png: the top of that demo's report.html, photographed by headless Chromium;
- canary.svg: what each restart of that roll cost the canary (`--canary`, which the demo's roll
  gets from ROLLGUARD_CANARY), from the roll's own `canary-cost` events (matplotlib).

The real roll's output is kept in build/docs-pictures/ (the terminal's bytes, the events and
the report), so `--reuse` draws again without running the demo (about 4 minutes). The paths of
the machine it ran on are written relative to the repository in the pictures.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
WORK = ROOT / "build" / "docs-pictures"
DEMO = ROOT / "build" / "demo-roll"
COLUMNS, LINES = 118, 40  # the terminal the demo's roll draws on
CANARY_TOPIC = "rollguard-canary"


# ---- the life of a node ------------------------------------------------------------------


@dataclass(frozen=True)
class Life:
    """A node's states in a roll (name, what the code says of it, where it is kept) and the
    transitions between them (from, to, when)."""

    states: tuple[tuple[str, str, str], ...]
    transitions: tuple[tuple[str, str, str], ...]


def node_life() -> Life:
    """The roller's own states of a node, and its transitions: the one place that imports them.

    Today a node's life is kept in two places: its record in the roll's journal
    (`NodeStatus`, rollguard.roller.roll.stores.journal) and, while the roll waits for it, the
    phase of its wait (`Phase`, rollguard.roller.roll.rules.node_state). Neither module lists
    its transitions; they are written here, by the enums' members, from where the roller moves
    a node (roll/restarts.py, rules/node_wait.py, rules/node_back.py), so that a renamed or
    removed state fails this script and a new one must be placed (`check_life`)."""
    from rollguard.roller.roll.rules.node_state import Phase
    from rollguard.roller.roll.stores.journal import NodeStatus

    pending = "pending"
    states = (
        (pending, "not on record yet: the safety rules decide when", "the roll"),
        *((p.value, _comment(Phase, p.name), "wait") for p in Phase),
        *((s.value, _comment(NodeStatus, s.name), "journal") for s in NodeStatus),
    )
    s, p = NodeStatus, Phase
    transitions = (
        (pending, p.FOUND_NOT_READY, "found not ready"),
        (p.FOUND_NOT_READY, pending, "ready again"),
        (pending, s.RESTARTING, "safe: restart"),
        (p.FOUND_NOT_READY, s.RESTARTING, "not recovering past\n--operation-timeout: force"),
        (pending, s.CONFIGURING, "only live keys change"),
        (pending, s.SKIPPED, "nothing to do, --skip"),
        (pending, s.HELD, "--hold"),
        (s.RESTARTING, p.READY, "restarted (a log recovery\nis waited for here)"),
        (p.READY, p.QUORUM, "a controller"),
        (p.READY, p.ISR, "a broker"),
        (p.QUORUM, p.ISR, "also a broker"),
        (p.QUORUM, s.RESTARTED, "caught up"),
        (s.CONFIGURING, p.ISR, "set live, read back"),
        (p.ISR, s.RESTARTED, "back in every ISR"),
        (p.ISR, s.CONFIGURED, "back in every ISR\n(changed live)"),
        (p.FOUND_NOT_READY, s.FAILED, "recovery stalled"),
        (p.READY, s.FAILED, "not ready in time"),
        (p.ISR, s.FAILED, "no progress for\n--safety-wait"),
        (s.FAILED, pending, "roll --resume"),
        (s.HELD, pending, "roll --resume\nwithout --hold"),
    )
    life = Life(states, tuple((str(a), str(b), why) for a, b, why in transitions))
    check_life(life)
    return life


def _comment(enum: type, member: str) -> str:
    """The comment the enum's source gives a member (`READY = "ready"  # restarted: ...`)."""
    import inspect

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
            " (place them in scripts/docs_pictures.py's node_life)"
        )


def node_life_dot(life: Life) -> str:
    colors = {"the roll": "#eeeeee", "wait": "#dbe7f7", "journal": "#e3f2df"}
    ends = {"restarted", "configured", "skipped", "failed", "held"}
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
        back = a in ("failed", "held") or (a, b) == ("found-not-ready", "pending")
        style = ", style=dashed, constraint=false" if back else ""
        label = html.escape(why).replace("\n", "\\n")
        out.append(f'  "{a}" -> "{b}" [label="{label}"{style}];')
    out += [
        '  legend [shape=plaintext, style="", fontsize=12,'
        ' label=<<table border="0" cellspacing="4">'
        '<tr><td bgcolor="#dbe7f7">  </td>'
        '<td align="left">the roll waits for the node (Phase)</td></tr>'
        '<tr><td bgcolor="#e3f2df">  </td>'
        '<td align="left">on record in the journal (NodeStatus)</td></tr>'
        "</table>>];",
        "  {rank=sink; legend}",
        "}",
    ]
    return "\n".join(out) + "\n"


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


# ---- the real roll -------------------------------------------------------------------------


def run_demo() -> None:
    """`make demo`'s roll on a terminal (`script` gives it one), with a canary; its output kept."""
    WORK.mkdir(parents=True, exist_ok=True)
    environ = {
        **os.environ,
        "TERM": "xterm-256color",
        "COLUMNS": str(COLUMNS),
        "LINES": str(LINES),
        "ROLLGUARD_CANARY": CANARY_TOPIC,
    }
    command = f"stty cols {COLUMNS} rows {LINES}; {sys.executable} demo/roll_demo.py"
    typescript = WORK / "demo.typescript"
    print(f"running the demo's real roll on a terminal (about 4 minutes): {typescript}")
    done = subprocess.run(
        ["script", "-q", "-e", "-c", command, str(typescript)],
        cwd=ROOT,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the demo failed (exit {done.returncode}); its output: {typescript}")
    kept = WORK / "demo"
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir()
    shutil.copy(DEMO / "state" / "events-demo.jsonl", kept / "events-demo.jsonl")
    shutil.copytree(DEMO / "report", kept / "report")


def relative(text: str) -> str:
    """The machine's paths made relative to the repository, as the docs' commands are run."""
    return text.replace(f"{ROOT}/", "").replace(str(ROOT), ".")


def live_frame(typescript: Path) -> list[list[tuple[str, str, bool, bool]]]:
    """The terminal's screen at the redraw of the live table nearest half-way through the
    recovery, from the demo's roll command on: rows of (character, colour, bold, italics)."""
    import pyte

    raw = relative(typescript.read_bytes().decode("utf-8", "replace"))
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.Stream(screen)
    best: tuple[float, list[list[tuple[str, str, bool, bool]]]] | None = None
    for chunk in re.split(r"(?=\x1b\[2K)", raw):
        stream.feed(chunk)
        shown = screen.display
        bar = next((re.search(r"(\d+)%", line) for line in shown if "recovering" in line), None)
        if bar is None or "#" not in "".join(shown):
            continue
        distance = abs(int(bar[1]) - 50)
        if best is None or distance < best[0]:
            rows = [
                [
                    (c.data, c.fg, c.bold, c.italics)
                    for c in (screen.buffer[y][x] for x in range(COLUMNS))
                ]
                for y in range(LINES)
            ]
            best = (distance, rows)
    if best is None:
        raise SystemExit(f"{typescript}: no frame of the live table shows a log recovery")
    rows = best[1]
    text = ["".join(c[0] for c in row) for row in rows]
    start = next(i for i, line in enumerate(text) if line.startswith("== 4."))
    end = max(i for i, line in enumerate(text) if line.strip()) + 1
    return rows[start:end]


COLOURS = {
    "default": "#d8dee9",
    "red": "#ef6b73",
    "green": "#8fc97a",
    "yellow": "#e5c07b",
    "blue": "#61afef",
    "magenta": "#c678dd",
    "cyan": "#56b6c2",
    "white": "#ffffff",
}


def terminal_html(rows: Iterable[list[tuple[str, str, bool, bool]]]) -> str:
    lines = []
    for row in rows:
        out = []
        for char, colour, bold, italics in row:
            style = f"color:{COLOURS.get(colour, COLOURS['default'])}"
            style += ";font-weight:bold" if bold else ""
            style += ";font-style:italic" if italics else ""
            out.append(f'<span style="{style}">{html.escape(char)}</span>')
        lines.append("".join(out).rstrip())
    body = "\n".join(lines)
    return (
        "<!doctype html><meta charset=utf-8><style>body{margin:0;background:#1f2430}"
        "pre{margin:0;padding:14px 16px;font:13px/1.18 'DejaVu Sans Mono',monospace;"
        f"color:#d8dee9}}</style><pre>{body}</pre>"
    )


def chromium(page: Path, out: Path, width: int, height: int) -> None:
    """`page` as headless Chromium shows it in a `width` x `height` window, into `out` (PNG)."""
    binary = shutil.which("chromium")
    if binary is None:
        raise SystemExit("chromium not found: `make docs-pictures` installs Debian's chromium")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "--virtual-time-budget=5000",
                f"--screenshot={out}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium exit {done.returncode}: {done.stderr[-800:]}")


def live_view(typescript: Path, out: Path) -> None:
    rows = live_frame(typescript)
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "live.html"
        page.write_text(terminal_html(rows))
        chromium(page, out, width=COLUMNS * 8 + 40, height=len(rows) * 16 + 30)


def report_picture(report: Path, out: Path) -> None:
    """The top of the report: the roll's timeline, its recovery, what it cost the clients."""
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        page.write_text(relative(report.read_text()))
        chromium(page, out, width=1280, height=1450)


def canary_chart(events: Path, out: Path) -> None:
    """Each restart's send latency (p50, p99, max) and end-to-end p99 against the idle
    baseline's, from the roll's `canary-cost` events, in the roll's order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costs = [
        e
        for e in map(json.loads, events.read_text().splitlines())
        if e.get("action") == "canary-cost"
    ]
    if not costs:
        raise SystemExit(f"{events}: no canary-cost event (was the roll run with --canary?)")
    plt.rcParams.update({"svg.hashsalt": "rollguard", "font.family": "DejaVu Sans", "font.size": 9})
    figure, axes = plt.subplots(figsize=(7.2, 3.2))
    series = (
        ("p50Ms", "send p50", "#9db4d8"),
        ("p99Ms", "send p99", "#4a78c2"),
        ("maxMs", "slowest send", "#1f3f7a"),
        ("e2eP99Ms", "end to end p99", "#e3a23b"),
    )
    width = 0.8 / len(series)
    for i, (key, label, colour) in enumerate(series):
        xs = [n + (i - (len(series) - 1) / 2) * width for n in range(len(costs))]
        axes.bar(xs, [c[key] for c in costs], width, label=label, color=colour)
    baseline = costs[0]["baselineP99Ms"]
    axes.axhline(
        baseline,
        color="#c0392b",
        linestyle="--",
        linewidth=1,
        label=f"idle baseline send p99 ({baseline:.0f} ms)",
    )
    axes.set_xticks(range(len(costs)))
    axes.set_xticklabels([f"{c['node']}\n{c['failed']} failed of {c['sent']}" for c in costs])
    axes.set_ylabel("milliseconds")
    axes.set_title(f"What each restart cost the canary ({costs[0]['topic']}), in roll order")
    axes.legend(frameon=False, fontsize=8, ncol=2)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(out, format="svg", metadata={"Date": None})
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="draw from the demo's kept output, without running it again",
    )
    args = parser.parse_args()
    IMG.mkdir(parents=True, exist_ok=True)
    dot(architecture_dot(), IMG / "architecture.svg")
    dot(node_life_dot(node_life()), IMG / "node-life.svg")
    if not (args.reuse and (WORK / "demo.typescript").is_file()):
        run_demo()
    live_view(WORK / "demo.typescript", IMG / "live-view.png")
    report_picture(WORK / "demo" / "report" / "report.html", IMG / "report.png")
    canary_chart(WORK / "demo" / "events-demo.jsonl", IMG / "canary.svg")
    for name in ("architecture.svg", "node-life.svg", "live-view.png", "report.png", "canary.svg"):
        print(f"docs/img/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

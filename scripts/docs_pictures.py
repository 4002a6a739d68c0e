"""The documentation's pictures, each made by a program from the code or from a real roll.

    .venv/bin/python scripts/docs_pictures.py [--reuse]      (`make docs-pictures`)

Into docs/img/:
- architecture.svg: the components and what flows between them, and node-life.svg: the life of
  a node in a roll, drawn from the roller's own states and transitions, both by Graphviz
  (scripts/docs_diagrams.py);
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
from pathlib import Path

from docs_diagrams import architecture_dot, dot, node_life, node_life_dot

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
WORK = ROOT / "build" / "docs-pictures"
DEMO = ROOT / "build" / "demo-roll"
COLUMNS, LINES = 118, 40  # the terminal the demo's roll draws on
CANARY_TOPIC = "rollguard-canary"


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

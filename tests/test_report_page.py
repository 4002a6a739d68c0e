"""report.html as a browser shows it: headless Chromium (Debian's `chromium`) at 1280 px renders
a report written from hand-made tables, and a script injected before the page's own content
records every error (scripts, images that fail to load) and, once loaded, whether each chart is
decoded and displayed, whether the page is wider than the window and whether a name cell wraps;
--dump-dom then prints what it found. No Spark: write_report takes the job's rows.

When chromium is missing the setup installs it (`apt-get install -y chromium`, as root);
where it cannot, the test skips saying why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is part of the spark component")

from rollguard.shared.expectations import Expectations, node_expectation
from rollguard.spark.report import duration, when, write_report

WIDTH = 1280
T0 = 1_790_000_000_000

CHECK = """<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message || (e.target && (e.target.src || e.target.tagName)) || "error"));
  }, true);
  window.addEventListener("load", function () {
    var images = Array.prototype.map.call(document.images, function (img) {
      var box = img.getBoundingClientRect();
      return {alt: img.alt, complete: img.complete, natural: img.naturalWidth,
              width: box.width, height: box.height,
              shown: getComputedStyle(img).display !== "none" &&
                     getComputedStyle(img).visibility !== "hidden"};
    });
    var wrapped = [];
    document.querySelectorAll("td.t").forEach(function (cell) {
      var style = getComputedStyle(cell);
      var range = document.createRange();  // the text's own box: one line high, or more
      range.selectNodeContents(cell);
      var line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
      if (range.getBoundingClientRect().height > 1.5 * line) { wrapped.push(cell.textContent); }
    });
    var out = document.createElement("pre");
    out.id = "rollguard-check";
    out.textContent = JSON.stringify({errors: errors, images: images, wrapped: wrapped,
      pageWidth: document.documentElement.scrollWidth, windowWidth: window.innerWidth});
    document.body.appendChild(out);
  });
})();
</script>"""


def chromium() -> str:
    """The chromium binary; installed with apt-get when missing and this is root, else skip."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and cannot be here (not root, or no apt-get)")
    done = None
    install = ["apt-get", "install", "-y", "chromium"]
    for commands in ([install], [["apt-get", "update"], install]):  # then with fresh lists
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
        found = shutil.which("chromium")
        if found:
            return found
    last = (done.stderr.strip().splitlines() if done else []) or ["no output"]
    pytest.skip(f"chromium could not be installed with apt-get: {last[-1]}")


def episode(node: str, n: int, start: int, seconds: float, segments: int) -> dict[str, Any]:
    return {
        "cluster": "production-eu-west-1",
        "node": node,
        "episode": n,
        "start": start,
        "end": start + int(seconds * 1000),
        "lastSeen": start + int(seconds * 1000),
        "outcome": "completed",
        "durationSeconds": seconds,
        "elapsedSeconds": seconds,
        "logsAtStart": 40,
        "segmentsAtStart": segments,
        "meanRate": segments / seconds,
        "longestStallSeconds": 12.0,
        "rollerRestarts": 0,
        "skippedRestarts": 1 if n == 9 else 0,
        "missingRecords": 0,
    }


def tables() -> dict[str, list[dict[str, Any]]]:
    nodes = [f"kafka-broker-{i}.very-long-host-name.example.internal" for i in range(3)]
    episodes = [
        episode(node, n, T0 + n * 86_400_000, (300 + 40 * n) * (4 if i == 2 else 1), 30000 + n)
        for i, node in enumerate(nodes)
        for n in range(1, 10)
    ]
    roll_start = T0 + 9 * 86_400_000 - 60_000

    def phase(node: str, run: int, name: str, start: float, end: float, why: str = "") -> Any:
        at, until = roll_start + int(start * 1000), roll_start + int(end * 1000)
        return {"cluster": "production-eu-west-1", "rollId": "roll-2026-11-23", "node": node,
                "run": run, "phase": name, "reason": why, "start": at, "end": until,
                "seconds": end - start, "events": 1}  # fmt: skip

    phases = [
        phase(nodes[0], 1, "restart", 0, 30),
        phase(nodes[0], 2, "log recovery", 30, 500),
        phase(nodes[0], 3, "ISR catch-up", 500, 530),
        phase(nodes[1], 1, "deferred", 5, 531, "under-replicated partitions"),
        phase(nodes[1], 2, "restart", 531, 570),
        phase(nodes[1], 3, "readiness wait", 570, 600),
        phase(nodes[2], 1, "skipped", 1, 1, "already up to date"),
    ]
    daily = [
        {"cluster": "production-eu-west-1", "day": f"2026-09-{d:02d}", "completed": 3,
         "p50Seconds": 300.0 + d, "p90Seconds": 900.0 + d, "maxSeconds": 1200.0 + d}
        for d in range(1, 10)
    ]  # fmt: skip
    node_rows = [
        {"cluster": "production-eu-west-1", "node": node, "episodes": 9, "completed": 9,
         "p50Seconds": 400.0, "p90Seconds": 600.0, "p99Seconds": 700.0, "maxSeconds": 710.0,
         "meanRate": 80.0 / (4 if i == 2 else 1), "ratedEpisodes": 9,
         "medianRate": 80.0 / (4 if i == 2 else 1), "longestStallSeconds": 12.0,
         "clusterRate": 80.0, "slow": i == 2}
        for i, node in enumerate(nodes)
    ]  # fmt: skip
    rolls = [
        {"cluster": "production-eu-west-1", "rollId": "roll-2026-11-23", "start": roll_start,
         "end": roll_start + 601_000, "outcome": "completed", "durationSeconds": 601.0,
         "restarted": 2, "nodeSeconds": 599.0, "recoveryWaits": 1}
    ]  # fmt: skip
    return {
        "episodes": episodes,
        "nodes": node_rows,
        "daily": daily,
        "rolls": rolls,
        "roll_phases": phases,
        "eta_summary": [
            {"cluster": "production-eu-west-1", "progressPercent": 50, "episodes": 27,
             "medianAbsRelativeError": 0.12, "medianErrorSeconds": 30.0}
        ],
    }  # fmt: skip


def write(path: Path) -> None:
    rows = tables()
    waited = ("production-eu-west-1", rows["nodes"][0]["node"], 9)
    links = {("production-eu-west-1", "roll-2026-11-23", waited[1], 2): [waited]}
    curves = {waited: [(i * 10_000, 30000 - i * 600) for i in range(50)]}
    expected = Expectations(
        "2026-11-23T14:00:00Z",
        5,
        tuple(
            node_expectation("production-eu-west-1", n["node"], episodes=9 - 5 * (i == 1),
                             p50=400.0, p90=600.0, p99=700.0, rated_episodes=9, rate=80.0)
            for i, n in enumerate(rows["nodes"])
        ),
    )  # fmt: skip
    summary = {
        "records": 123456,
        "episodes": len(rows["episodes"]),
        "rolls": 1,
        "generatedAt": "2026-11-23T14:00:00Z",
        "dataset": "/data/rollguard",
        "clusters": [
            {"cluster": "production-eu-west-1", "episodes": 27, "completed": 27,
             "interrupted": 0, "running": 0, "p50Seconds": 400.0, "p90Seconds": 3505.2,
             "p99Seconds": 3600.0, "maxSeconds": 3700.0, "slowestNodes": ["kafka-broker-2"]}
        ],
    }  # fmt: skip
    write_report(path, summary, rows, links, curves, expected)


def test_durations_and_times_read_as_people_write_them() -> None:
    cases = {0.25: "0.2s", 12.4: "12s", 59.6: "1m 00s", 3492: "58m 12s", 3505.2: "58m 25s",
             7500: "2h 05m", 190000: "2d 4h", None: "-"}  # fmt: skip
    assert {k: duration(k) for k in cases} == cases
    assert when(T0) == "2026-09-21T14:13:20Z"


def test_the_page_in_headless_chromium_at_1280_px(tmp_path: Path) -> None:
    binary = chromium()
    report = tmp_path / "report.html"
    write(report)
    page = report.read_text()
    assert page.index("Roll roll-2026-11-23") < page.index("Expectations for the next roll")
    assert "not enough history" in page and "58m 25s" in page and "3,505.2" not in page
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("<head>", "<head>" + CHECK, 1))
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--window-size={WIDTH},900", "--virtual-time-budget=10000", "--dump-dom",
         checked.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    found = re.search(r'<pre id="rollguard-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium exit {done.returncode}: {done.stderr[-2000:]}"
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["errors"] == []
    charts = result["images"]
    assert len(charts) == page.count("<img")
    assert len(charts) == 7  # a roll timeline and its curves, daily, scatter, rates, 2 more
    for chart in charts:
        assert chart["complete"] and chart["natural"] > 300, chart["alt"]
        assert chart["shown"] and chart["width"] > 300 and chart["height"] > 100, chart["alt"]
        assert chart["width"] <= WIDTH, chart["alt"]
    assert result["wrapped"] == []
    assert result["pageWidth"] <= result["windowWidth"] == WIDTH

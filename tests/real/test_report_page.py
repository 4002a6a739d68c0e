"""report.html as a browser shows it: headless Chromium (Debian's `chromium`) at 1280 px renders
a report written from hand-made tables, and a script injected before the page's own content
records every error (scripts, images that fail to load) and, once loaded, whether each chart is
decoded and displayed, whether the page is wider than the window, whether any table is wider
than the page (or than the box it would scroll in) and whether a name wraps; --dump-dom then
prints what it found. What the page says, and in which order, is read from its HTML. No Spark:
write_report takes the job's rows.

`make chromium` installs Chromium (scripts/chromium-install, before `make test`'s tests); a
test never installs anything. Without it the page's test is a missing tier (helpers.missing_tier:
a failure under `make test`, else a skip)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from rollguard.shared.expectations import Expectations, node_expectation
from rollguard.spark import charts
from rollguard.spark.report import duration, slowest_shown, when, write_report

from helpers import missing_tier

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
    // name cells, and names (or an episode's link) kept whole in text that may wrap
    document.querySelectorAll("td.t, tr.group th, .whole").forEach(function (cell) {
      var style = getComputedStyle(cell);
      var range = document.createRange();  // the text's own box: one line high, or more
      range.selectNodeContents(cell);
      var line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
      if (range.getBoundingClientRect().height > 1.5 * line) { wrapped.push(cell.textContent); }
    });
    var body = document.body.getBoundingClientRect();
    var room = body.width - parseFloat(getComputedStyle(document.body).paddingLeft)
                          - parseFloat(getComputedStyle(document.body).paddingRight);
    var tables = Array.prototype.map.call(document.querySelectorAll("table"), function (t) {
      var box = t.parentElement, title = box;  // the nearest heading or text before it
      while (title.previousElementSibling && !/^(H[1-4]|P)$/.test(title.tagName)) {
        title = title.previousElementSibling;
      }
      return {before: title === box ? "" : title.textContent.slice(0, 60),
              width: t.getBoundingClientRect().width, room: room,
              scrolls: box.scrollWidth > box.clientWidth};
    });
    var out = document.createElement("pre");
    out.id = "rollguard-check";
    out.textContent = JSON.stringify({errors: errors, images: images, wrapped: wrapped,
      tables: tables, pageWidth: document.documentElement.scrollWidth,
      windowWidth: window.innerWidth});
    document.body.appendChild(out);
  });
})();
</script>"""


def chromium() -> str:
    """The chromium binary on PATH, which `make chromium` installs."""
    found = shutil.which("chromium")
    if found is None:
        missing_tier("chromium is not on PATH: `make chromium` installs it (Debian's chromium)")
    return found


CLUSTER, STAGING = "production-eu-west-1", "staging-us-east-2"


def episode(
    node: str,
    n: int,
    start: int,
    seconds: float,
    segments: int,
    cluster: str = CLUSTER,
    outcome: str = "completed",
    missing: int = 0,
) -> dict[str, Any]:
    done = outcome == "completed"
    return {
        "cluster": cluster,
        "node": node,
        "episode": n,
        "start": start,
        "end": start + int(seconds * 1000),
        "lastSeen": start + int(seconds * 1000),
        "outcome": outcome,
        "durationSeconds": seconds if done else None,
        "elapsedSeconds": seconds,
        "logsAtStart": 40,
        "segmentsAtStart": segments,
        "meanRate": segments / seconds,
        "longestStallSeconds": 12.0,
        "rollerRestarts": 0,
        "skippedRestarts": 1 if n == 9 else 0,
        "missingRecords": missing,
    }


def node_row(
    cluster: str, node: str, completed: int, rate: float, slow: bool = False
) -> dict[str, Any]:
    seconds = {"p50Seconds": 400.0, "p90Seconds": 600.0, "p99Seconds": 700.0, "maxSeconds": 710.0}
    return {"cluster": cluster, "node": node, "episodes": max(completed, 1),
            "completed": completed, **{k: v if completed else None for k, v in seconds.items()},
            "meanRate": rate, "ratedEpisodes": max(completed, 1), "medianRate": rate,
            "longestStallSeconds": 12.0, "clusterRate": 80.0, "slow": slow}  # fmt: skip


def tables() -> dict[str, list[dict[str, Any]]]:
    nodes = [f"kafka-broker-{i}.very-long-host-name.example.internal" for i in range(3)]
    episodes = [
        episode(node, n, T0 + n * 86_400_000, (300 + 40 * n) * (4 if i == 2 else 1), 30000 + n)
        for i, node in enumerate(nodes)
        for n in range(1, 10)
    ]
    # A second cluster: its episode seen through a gap and cut short is the slowest of all,
    # its other one the 10th slowest, listed second (under its cluster).
    episodes += [
        episode("kafka-0", 1, T0, 7500, 120_000, STAGING, "interrupted", missing=12),
        episode("kafka-1", 1, T0, 1500, 9_000, STAGING),
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
        node_row(CLUSTER, node, 9, 80.0 / (4 if i == 2 else 1), i == 2)
        for i, node in enumerate(nodes)
    ] + [node_row(STAGING, "kafka-0", 0, 16.0), node_row(STAGING, "kafka-1", 1, 45.0)]
    rolls = [
        {"cluster": "production-eu-west-1", "rollId": "roll-2026-11-23", "start": roll_start,
         "end": roll_start + 601_000, "outcome": "completed", "durationSeconds": 601.0,
         "restarted": 2, "nodeSeconds": 599.0, "recoveryWaits": 1}
    ]  # fmt: skip
    # The roll's canary: what its restarts cost clients, per roll and per node (the job's rows).
    impact = {"cluster": "production-eu-west-1", "rollId": "roll-2026-11-23",
              "start": roll_start + 30_000, "restarts": 2, "sent": 5_400, "failed": 12,
              "worstP99Ms": 950.0, "medianP99Ms": 565.0, "maxMs": 1_800.0,
              "baselineP99Ms": 12.0, "longestGapS": 2.5,
              "worstAgainstBaseline": 950.0 / 12.0}  # fmt: skip
    impact_nodes = [
        {"cluster": "production-eu-west-1", "node": node, "rolls": 1, "restarts": 1,
         "sent": 2_700, "failed": 12 * (i == 1), "worstP99Ms": (180.0, 950.0)[i],
         "medianP99Ms": (180.0, 950.0)[i], "maxMs": (420.0, 1_800.0)[i],
         "baselineP99Ms": 12.0, "longestGapS": (0.4, 2.5)[i],
         "worstAgainstBaseline": (180.0, 950.0)[i] / 12.0}
        for i, node in enumerate(nodes[:2])
    ]  # fmt: skip
    return {
        "episodes": episodes,
        "nodes": node_rows,
        "daily": daily,
        "rolls": rolls,
        "roll_phases": phases,
        "client_impact": [impact],
        "client_impact_nodes": impact_nodes,
        "eta_summary": [
            {"cluster": "production-eu-west-1", "progressPercent": 25, "episodes": 27,
             "medianAbsRelativeError": 0.31, "medianErrorSeconds": -65.0},
            {"cluster": "production-eu-west-1", "progressPercent": 50, "episodes": 27,
             "medianAbsRelativeError": 0.12, "medianErrorSeconds": 30.0},
        ],
    }  # fmt: skip


def write(path: Path, rows: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """The report of `rows` (`tables()` by default) at `path`; its HTML."""
    rows = rows or tables()
    waited = ("production-eu-west-1", rows["nodes"][0]["node"], 9)
    links = {("production-eu-west-1", "roll-2026-11-23", waited[1], 2): [waited]}
    curves = {waited: [(i * 10_000, 30000 - i * 600) for i in range(50)]}
    expected = Expectations(
        "2026-11-23T14:00:00Z",
        5,
        (
            *(
                node_expectation(CLUSTER, n["node"], episodes=9 - 5 * (i == 1), p50=400.0,
                                 p90=600.0, p99=700.0, rated_episodes=9, rate=80.0)
                for i, n in enumerate(rows["nodes"])
                if n["cluster"] == CLUSTER
            ),
            node_expectation(STAGING, "kafka-0", episodes=0, p50=None, p90=None, p99=None,
                             rated_episodes=1, rate=16.0),
            node_expectation(STAGING, "kafka-1", episodes=1, p50=200.0, p90=200.0, p99=200.0,
                             rated_episodes=1, rate=45.0),
        ),
    )  # fmt: skip
    summary = {
        "records": 123456,
        "episodes": len(rows["episodes"]),
        "rolls": 1,
        "rollsWithCanary": len(rows["client_impact"]),
        "generatedAt": "2026-11-23T14:00:00Z",
        "dataset": "/data/rollguard",
        "clusters": [
            # the job lists up to 3 nodes, slowest first: here every node of the cluster
            {"cluster": "production-eu-west-1", "episodes": 27, "completed": 27,
             "interrupted": 0, "running": 0, "p50Seconds": 400.0, "p90Seconds": 3505.2,
             "p99Seconds": 3600.0, "maxSeconds": 3700.0,
             "slowestNodes": [rows["nodes"][i]["node"] for i in (2, 0, 1)]},
            {"cluster": STAGING, "episodes": 2, "completed": 1, "interrupted": 1, "running": 0,
             "p50Seconds": 200.0, "p90Seconds": 200.0, "p99Seconds": 200.0, "maxSeconds": 200.0,
             "slowestNodes": ["kafka-1"]},
        ],
    }  # fmt: skip
    write_report(path, summary, rows, links, curves, expected)
    return path.read_text()


def test_durations_and_times_read_as_people_write_them() -> None:
    cases = {0.25: "0.2s", 12.4: "12s", 59.6: "1m 00s", 3492: "58m 12s", 3505.2: "58m 25s",
             7500: "2h 05m", 190000: "2d 4h", None: "-"}  # fmt: skip
    assert {k: duration(k) for k in cases} == cases
    assert when(T0) == "2026-09-21T14:13:20Z"


def test_the_page_in_headless_chromium_at_1280_px(tmp_path: Path) -> None:
    binary = chromium()
    report = tmp_path / "report.html"
    page = write(report)
    assert page.index("Roll roll-2026-11-23") < page.index("Expectations for the next roll")
    assert "not enough history" in page and "58m 25s" in page and "3,505.2" not in page
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("<head>", "<head>" + CHECK, 1))
    profile = tmp_path / "chromium-profile"  # new and empty: nothing of another run's
    profile.mkdir()
    # Debian's Chromium headless here: no sandbox (root, in a container), no GPU, and none of
    # its own network calls (QUIC, background fetches, component updates, sync) to wait on.
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}",
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
    # a roll timeline and its curves, daily, scatter, rates, 2 more, the client impact's
    assert len(charts) == 8
    for chart in charts:
        assert chart["complete"] and chart["natural"] > 300, chart["alt"]
        assert chart["shown"] and chart["width"] > 300 and chart["height"] > 100, chart["alt"]
        assert chart["width"] <= WIDTH, chart["alt"]
    assert result["wrapped"] == []
    assert result["pageWidth"] <= result["windowWidth"] == WIDTH
    # Every table fits the page as it is, with names of 50 characters: none is cut off at the
    # page's edge or scrolls inside its box.
    assert len(result["tables"]) == page.count("<table") == 8
    too_wide = [t for t in result["tables"] if t["scrolls"] or t["width"] > t["room"] + 0.5]
    assert too_wide == []


def section(page: str, heading: str) -> str:
    """The page's HTML from the heading that starts with `heading` to the next h2."""
    start = page.index(f"<h2>{heading}")
    end = page.find("<h2>", start + 4)
    return page[start : end if end > 0 else None]


def text(markup: str) -> str:
    """What a reader sees of `markup`: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_the_expectations_say_how_to_give_them_to_the_next_roll(tmp_path: Path) -> None:
    seen = text(section(write(tmp_path / "report.html"), "Expectations for the next roll"))
    file = tmp_path.resolve() / "expectations.json"
    assert f"rollguard roll --expectations {file} ..." in seen
    assert f"rollguard plan --expectations {file} ... # the prediction; restarts nothing" in seen
    assert "up to that node's budget, p99 \N{MULTIPLICATION SIGN} 1.5 + 60 s" in seen
    assert "never more than --max-recovery-wait" in seen
    # the budget of each node with enough history: p99 700 s * 1.5 + 60 s
    assert "18m 30s" in seen and "not enough history" in seen


def test_the_eta_error_says_what_its_sign_means(tmp_path: Path) -> None:
    with_sign = text(section(write(tmp_path / "report.html"), "ETA accuracy"))
    assert "The error is the predicted finish minus the actual one" in with_sign
    assert "positive (+), the recovery finished earlier than predicted" in with_sign
    assert "negative (\N{MINUS SIGN}), it finished later" in with_sign
    assert "median error (predicted \N{MINUS SIGN} actual finish)" in with_sign
    assert "\N{MINUS SIGN}1m 05s" in with_sign and "+30s" in with_sign  # -65 s and 30 s, signed


def test_a_clusters_slowest_nodes_are_its_slowest_tenth_not_every_node(tmp_path: Path) -> None:
    clusters = section(write(tmp_path / "report.html"), "Clusters")
    assert "slowest nodes (the slowest 10 %, 1 to 3), longest recovery first" in text(clusters)
    production = next(r for r in clusters.split("<tr>") if CLUSTER in r)
    # the job's list of 3 is every node of this 3-node cluster: the page shows the slowest
    assert "kafka-broker-2.very" in production
    assert "kafka-broker-0.very" not in production and "kafka-broker-1.very" not in production
    shown = {0: 1, 1: 1, 3: 1, 10: 1, 11: 2, 20: 2, 21: 3, 3890: 3}
    assert {n: slowest_shown(n) for n in shown} == shown


def test_the_rate_chart_draws_the_slowest_node_at_the_top(tmp_path: Path) -> None:
    nodes = [
        {"cluster": "c", "node": f"n{i:02d}", "medianRate": float(100 - i), "slow": i > 35}
        for i in range(40)
    ]
    figure = charts.rates_figure(nodes)
    figure.canvas.draw()
    axes = figure.axes[0]
    top_down = sorted(axes.get_yticklabels(), key=lambda t: -t.get_window_extent().y0)
    assert [t.get_text() for t in top_down] == [f"c/n{i:02d}" for i in range(39, 9, -1)]
    assert figure.get_suptitle() == (
        "Median recovery rate per node, slowest at the top (the 30 slowest of 40)"
    )
    assert axes.get_xlabel() == "median recovery rate (segments per second)"
    trends = text(section(write(tmp_path / "report.html"), "Trends and diagnosis"))
    assert "the slowest node is at the top" in trends and "segments recovered per second" in trends


def test_the_slowest_episodes_say_how_many_grouped_by_cluster_slowest_first(tmp_path: Path) -> None:
    slowest = section(write(tmp_path / "report.html"), "The 25 slowest recovery episodes")
    groups = re.findall(r'<tr class="group">.*?</tr>', slowest)
    assert [text(g) for g in groups] == [f"cluster {STAGING}", f"cluster {CLUSTER}"]
    durations = [
        text(cells[3])
        for row in re.findall(r"<tr>(.*?)</tr>", slowest)
        if len(cells := re.findall(r"<td[^>]*>(.*?)</td>", row)) > 3
    ]
    assert durations[:4] == ["2h 05m", "25m 00s", "44m 00s", "41m 20s"]
    assert "missing records: 12: the episode was seen through gaps" in text(slowest)


def test_the_client_impact_chart_draws_failed_sends_first_then_the_worst_p99() -> None:
    def node(i: int, failed: int, worst: float | None) -> dict[str, Any]:
        return {"cluster": "c", "node": f"n{i:02d}", "failed": failed, "worstP99Ms": worst,
                "medianP99Ms": worst, "baselineP99Ms": 10.0 + i}  # fmt: skip

    # 35 measured: n00-n02 with failed sends (n01 the most), the others by p99 (n34 the worst),
    # and n35 never measured (no p99, nothing failed): not drawn, not counted.
    nodes = [node(i, (0, 5, 2)[i] if i < 3 else 0, 100.0 + i) for i in range(35)]
    figure = charts.client_impact_figure([*nodes, node(35, 0, None)])
    figure.canvas.draw()
    axes = figure.axes[0]
    top_down = sorted(axes.get_yticklabels(), key=lambda t: -t.get_window_extent().y0)
    want = ["c/n01", "c/n02", *(f"c/n{i:02d}" for i in range(34, 6, -1))]
    assert [t.get_text() for t in top_down] == want
    assert figure.get_suptitle() == (
        "What a restart costs clients, per node, the worst at the top (the 30 worst of 35)"
    )
    assert sorted(a.get_text() for a in axes.texts) == [" 2 failed", " 5 failed"]
    # the baseline: the median of the drawn nodes' baseline p99s, one dashed line
    [line] = [ln for ln in axes.get_lines() if ln.get_linestyle() == "--"]
    shown = sorted(10.0 + int(label[3:]) for label in want)
    assert line.get_xdata()[0] == shown[len(shown) // 2]


def test_the_client_impact_says_the_worst_against_the_baseline_and_rolls_without_a_canary(
    tmp_path: Path,
) -> None:
    impact = text(section(write(tmp_path / "report.html"), "What restarts cost clients"))
    assert "Rolls without a canary are left out" in impact
    assert "rolls: 1 (1 with a canary)" in text(write(tmp_path / "report.html"))
    assert "Per roll (the latest 1 of 1)" in impact and "Per node, across the fleet" in impact
    # worst p99 950 ms against the baseline's 12 ms; the node without failures, 180 / 12
    assert "79.2 \N{MULTIPLICATION SIGN}" in impact and "15.0 \N{MULTIPLICATION SIGN}" in impact
    none = {**tables(), "client_impact": [], "client_impact_nodes": []}
    without = text(section(write(tmp_path / "none.html", none), "What restarts cost clients"))
    assert "No roll in the dataset ran with a canary" in without and "0 failed" not in without
    assert "rolls: 1 (0 with a canary)" in text((tmp_path / "none.html").read_text())
    assert "<table" not in section((tmp_path / "none.html").read_text(), "What restarts cost")

"""`make demo-cluster` prints commands for a newcomer to paste: each one parses with its own
command's parser (a renamed flag would fail here, not in someone's first afternoon), the shell
lines split back into exactly those arguments, and the inventory it writes loads with the
roller's own reader. The cluster itself (three Kafka JVMs) is not started here."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from rollguard.roller.cli import build_parser as roller_parser
from rollguard.roller.collect.cli import CollectOptions
from rollguard.roller.inventory import read_inventory
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.shared.settings import Options
from rollguard.spark.cli import ReportOptions
from rollguard.spark.cli import build_parser as report_parser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "demo"))
import cluster_demo  # noqa: E402  (demo/cluster_demo.py)

STARTED = cluster_demo.Started(
    bin=".venv/bin",
    folder="build/demo-cluster",
    inventory="build/demo-cluster/inventory.yaml",
    bootstrap="127.0.0.1:21001,127.0.0.1:21002,127.0.0.1:21003",
    agents=("https://127.0.0.1:40001", "https://127.0.0.1:40002", "https://127.0.0.1:40003"),
    probes=("http://127.0.0.1:41001", "http://127.0.0.1:41002", "http://127.0.0.1:41003"),
    ca="build/demo-cluster/pki/ca.crt",
    cert="build/demo-cluster/pki/roller.crt",
    key="build/demo-cluster/pki/roller.key",
)
TLS = ["--cert", STARTED.cert, "--key", STARTED.key, "--cacert", STARTED.ca]


def by_flag(options: type[Options], args: argparse.Namespace) -> dict[str, Any]:
    """Each option's value as the command reads it, by flag name."""
    values = options.read(args, {}, "ROLLGUARD_")
    return {flag.name: values[flag.field] for flag in options.flags()}


def test_every_rollguard_command_printed_parses_with_its_own_parser() -> None:
    shown = {}
    for _, command in cluster_demo.commands(STARTED):
        program, *args = command
        if program == ".venv/bin/rollguard":
            parsed = roller_parser().parse_args(args)
            shown[parsed.command] = parsed
            assert [parsed.cert, parsed.key, parsed.cacert] == TLS[1::2], parsed.command
        elif program == ".venv/bin/rollguard-report":
            shown["report"] = report_parser().parse_args(args)
        else:
            assert program == "curl", program
    assert set(shown) == {"state", "plan", "roll", "collect", "report"}
    assert shown["state"].urls == list(STARTED.agents)
    # The values too, as the commands resolve them.
    roll = by_flag(RollOptions, shown["roll"])
    collect = by_flag(CollectOptions, shown["collect"])
    # collect reads the events where the roll writes them, and writes where the report reads
    assert [roll["state-dir"]] == collect["events"] == [Path("build/demo-cluster/state")]
    report = ReportOptions.load(shown["report"])
    assert collect["out"] == report.dataset == Path("build/demo-cluster/dataset")
    assert collect["cluster"] == "demo"


def test_curl_presents_the_rollers_certificate_to_an_agent() -> None:
    curls = [c for _, c in cluster_demo.commands(STARTED) if c[0] == "curl"]
    api = next(c for c in curls if "--cert" in c)
    assert api == ["curl", *TLS, f"{STARTED.agents[0]}/v1/broker-state"]
    assert any(c[-1] == f"{STARTED.probes[0]}/metrics" for c in curls)


def test_the_printed_lines_split_back_into_the_commands_and_stay_narrow() -> None:
    text = cluster_demo.render(STARTED)
    blocks = text.split("\n\n")[1:]
    assert len(blocks) == len(cluster_demo.commands(STARTED))
    for block, (_, command) in zip(blocks, cluster_demo.commands(STARTED), strict=True):
        shell = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
        assert shlex.split(shell.replace("\\\n", " ")) == command
        assert all(len(line) <= 100 for line in block.splitlines()), block


def test_a_path_with_a_space_is_quoted() -> None:
    line = cluster_demo.shell(["rollguard", "state", "--cert", "my certs/roller.crt", "https://a"])
    assert shlex.split(line.replace("\\\n", " ")) == [
        "rollguard", "state", "--cert", "my certs/roller.crt", "https://a",
    ]  # fmt: skip


def test_the_inventory_is_yaml_the_roller_reads_with_the_cluster_named_demo(
    tmp_path: Path,
) -> None:
    nodes = [
        {"id": n, "name": f"kafka-{n}", "roles": ["broker", "controller"],
         "agent": f"https://127.0.0.1:4000{n}",
         "restart": f"curl -sf -X POST http://127.0.0.1:39999/restart/{n}",
         "health": f"curl -sf http://127.0.0.1:39999/health/{n}"}
        for n in range(3)
    ]  # fmt: skip
    source = tmp_path / "cluster.json"
    source.write_text(json.dumps({"cluster": "demo", "nodes": nodes}))
    path = cluster_demo.write_inventory(source, tmp_path / "inventory.yaml")
    assert not path.read_text().lstrip().startswith("{")  # YAML, not JSON
    inventory = read_inventory(path)
    assert inventory.cluster == "demo"
    assert [n.restart for n in inventory.nodes] == [n["restart"] for n in nodes]
    assert [n.node.name for n in inventory.nodes] == ["kafka-0", "kafka-1", "kafka-2"]

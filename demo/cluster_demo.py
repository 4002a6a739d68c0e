"""`make demo-cluster`: a real 3-node Kafka cluster with an agent beside each node, left running
for you to try rollguard's commands on, until Ctrl-C.

The same real processes as `make demo` (demo/roll_demo.py), without the scripted roll: Apache
Kafka 4.4.0 from Maven Central's jars (three combined KRaft nodes on 127.0.0.1, small heaps,
topics with replication 3 and min ISR 2, some data), a `rollguard-agent` beside each node over
mutual TLS reading its JMX, fresh certificates, and an inventory file whose `restart` and
`health` commands reach a small control server in this process, which plays each host's
`systemctl restart kafka`. The first restart of kafka-1 comes back into a real log recovery, so
the first `rollguard roll` shows the roller waiting for it.

Everything is in build/demo-cluster/ (made afresh at each start): the inventory, the
certificates, the roll journals, each node's kafka.log. Once the cluster is up the commands to
try are printed, with this cluster's ports and paths, to run from the repository's root in
another terminal.

Exit codes: 0 stopped by Ctrl-C or SIGTERM once the cluster was up (the demo runs until it is
stopped: that is its normal end); 3 interrupted while starting; 1 the cluster did not start.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "demo-cluster"
RECOVERING_NODE = 1  # comes back from its first restart into a real log recovery


@dataclass(frozen=True, slots=True)
class Started:
    """What the printed commands need to know of the running cluster (paths relative to the
    repository's root, where they are run)."""

    bin: str  # the folder of the rollguard commands, e.g. .venv/bin
    folder: str
    inventory: str
    bootstrap: str
    agents: tuple[str, ...]  # each agent's API URL, in node order
    probes: tuple[str, ...]  # each agent's plain-HTTP probe URL
    ca: str
    cert: str
    key: str


def commands(started: Started) -> list[tuple[str, list[str]]]:
    """The commands to try, in order: (what it shows, the command's arguments)."""
    from rollguard.peers.commandline import rollguard_args  # the tests' command lines too

    tls = ["--cert", started.cert, "--key", started.key, "--cacert", started.ca]
    rollguard = f"{started.bin}/rollguard"
    state_dir = f"{started.folder}/state"

    def on_cluster(command: str, state_dir: str | None = None) -> list[str]:
        return rollguard_args(
            command,
            inventory=started.inventory,
            bootstrap=started.bootstrap,
            tls=tls,
            state_dir=state_dir,
            rollguard=rollguard,
        )

    return [
        (
            "every agent's answer, as rollguard's client reads it",
            [rollguard, "state", *tls, *started.agents],
        ),
        (
            "one agent through curl, with the roller's certificate",
            ["curl", *tls, f"{started.agents[0]}/v1/broker-state"],
        ),
        (
            "the agent's Prometheus metrics (plain HTTP, on loopback)",
            ["curl", "-s", f"{started.probes[0]}/metrics"],
        ),
        ("what a roll would do now, in order, and why", on_cluster("plan")),
        (
            f"a roll: kafka-{RECOVERING_NODE} comes back into a real log recovery (the first "
            "time), and the roller waits for it instead of restarting it again",
            on_cluster("roll", state_dir=state_dir),
        ),
        (
            "the agents' recovery timelines and the rolls' events, into a Parquet dataset",
            [
                rollguard,
                "collect",
                "--inventory",
                started.inventory,
                *tls,
                "--events",
                state_dir,
                "--out",
                f"{started.folder}/dataset",
                "--cluster",
                "demo",
            ],
        ),
        (
            "the Spark recovery report of that dataset (local mode, a minute or so)",
            [
                f"{started.bin}/rollguard-report",
                "--dataset",
                f"{started.folder}/dataset",
                "--out",
                f"{started.folder}/report",
            ],
        ),
    ]


def shell(command: list[str], width: int = 100) -> str:
    """`command` as a shell line, continued with backslashes so that no line is wider than
    `width` where it can be helped; a flag stays on the line of its value."""
    words: list[str] = []
    for word in map(shlex.quote, command):
        if words and words[-1].startswith("--") and " " not in words[-1] and word[0] != "-":
            words[-1] += f" {word}"
        else:
            words.append(word)
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) + 2 > width:
            lines.append(f"    {word}")
        else:
            lines[-1] += f" {word}"
    return " \\\n".join(lines)


def render(started: Started) -> str:
    lines = ["Try, from the repository's root in another terminal:"]
    for what, command in commands(started):
        lines += ["", *(f"# {line}" for line in textwrap.wrap(what, 98)), shell(command)]
    return "\n".join(lines)


def write_inventory(source: Path, path: Path) -> Path:
    """The inventory the cluster wrote (JSON, a YAML subset) as YAML with a heading, the way
    an operator keeps one."""
    nodes = json.loads(source.read_text())
    heading = (
        "# rollguard's inventory of the demo cluster (make demo-cluster). Each restart and health\n"
        "# command reaches the demo's control server, standing in for\n"
        "# `ssh HOST sudo systemctl restart kafka` and `ssh HOST systemctl is-active kafka`.\n"
    )
    path.write_text(heading + yaml.safe_dump(nodes, sort_keys=False, width=100))
    return path


class _Stopped(BaseException):
    """SIGTERM, raised where the demo waits (as Python raises KeyboardInterrupt for SIGINT)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="demo/cluster_demo.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--data-mb", type=int, default=100, help="MB written to topic bulk (default: 100)"
    )
    args = parser.parse_args(argv)
    # Imported here: the peers need a checkout's `make` (the unit tests import this file alone).
    from rollguard.peers.processes import BIN, make_pki
    from rollguard.peers.realcluster import real_cluster
    from rollguard.peers.realkafka import KafkaJarsMissing

    signal.signal(signal.SIGTERM, _on_sigterm)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    began = time.monotonic()
    up = False
    print(
        f"Starting 3 Kafka nodes, {args.data_mb} MB of data and an agent beside each node "
        f"in {WORK.relative_to(ROOT)}/ (half a minute or more)...",
        flush=True,
    )
    try:
        pki = make_pki(WORK / "pki", "rollguard demo CA")
        with real_cluster(WORK, pki, data_mb=args.data_mb, combined=3, name="demo") as cluster:
            cluster.recover_on_next_restart(RECOVERING_NODE)
            inventory = write_inventory(cluster.inventory(), WORK / "inventory.yaml")
            agents = [cluster.agents[n] for n in sorted(cluster.agents)]

            def here(path: Path) -> str:
                return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

            started = Started(
                bin=here(BIN),
                folder=here(WORK),
                inventory=here(inventory),
                bootstrap=cluster.kafka.bootstrap,
                agents=tuple(a.api for a in agents),
                probes=tuple(a.probe for a in agents),
                ca=here(pki.ca),
                cert=here(pki.client_cert),
                key=here(pki.client_key),
            )
            up = True
            print(f"\nUp in {time.monotonic() - began:.0f}s: cluster `demo`, Kafka at "
                  f"{cluster.kafka.bootstrap}; each node's log in "
                  f"{here(WORK / 'kafka')}/node-N/kafka.log.\n", flush=True)  # fmt: skip
            print(render(started), flush=True)
            print("\nThe cluster runs until Ctrl-C.", flush=True)
            while True:
                time.sleep(3600)
    except (KeyboardInterrupt, _Stopped):
        # Leaving real_cluster stopped the agents and Kafka's JVMs (each node's data is thrown
        # away: the next start makes a new cluster).
        print(f"\nStopped{'' if up else ' while starting'}; nothing is left running.")
        return 0 if up else 3
    except KafkaJarsMissing as exc:
        print(f"demo-cluster: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

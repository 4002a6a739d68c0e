"""Benchmark of the agent: HTTP over mutual TLS, JMX sampling cost, CPU and memory.

    .venv/bin/python bench/agent.py [--seconds 10] [--runs 3] [--samples 30]

Runs on this machine only (127.0.0.1): the Java test broker, a real `rollguard-agent` process,
and `bench/loadgen.py` as the client in its own process. Each measurement is repeated `--runs`
times, interleaved, and the median is reported. The figures go to stdout as a Markdown table and
to build/bench/agent.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file is named like the `agent` package it measures: take its own folder off the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import make_pki  # noqa: E402

from agent.jmx import JVM_OPTIONS, JmxQueryBackend  # noqa: E402
from agent.readings import QUERIES  # noqa: E402

from helpers import Agent, Broker, wait_until  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def loadgen(mode: str, url: str, pki, connections: int, seconds: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    command = [
        sys.executable,
        str(ROOT / "bench" / "loadgen.py"),
        mode,
        "--url",
        url,
        "--ca",
        str(pki.ca),
        "--cert",
        str(pki.client_cert),
        "--key",
        str(pki.client_key),
        "--connections",
        str(connections),
        "--seconds",
        str(seconds),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def process_cpu(pid: int) -> tuple[float, float]:
    """(own CPU, CPU of waited-for children) in seconds, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICKS, (cutime + cstime) / TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def jmx_rounds(url: str, options: tuple[str, ...], count: int) -> tuple[float, float, float]:
    """Median wall ms and CPU ms of a JMX round, and the largest JVM RSS in MB."""
    import agent.jmx as jmx

    saved = jmx.JVM_OPTIONS
    jmx.JVM_OPTIONS = options
    backend = JmxQueryBackend(url, queries=QUERIES)
    walls, cpus = [], []
    try:
        for _ in range(count):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            asyncio.run(backend.read(10))
            walls.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    finally:
        jmx.JVM_OPTIONS = saved
    max_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000, max_rss


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10, help="length of each HTTP run")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument("--samples", type=int, default=30, help="JMX rounds per configuration")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=30,
        help="how long to watch the agent's CPU with a RUNNING broker",
    )
    args = parser.parse_args()
    work = ROOT / "build" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    pki = make_pki(work / "pki")
    results: dict[str, object] = {
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": " ".join(["bench/agent.py", *sys.argv[1:]]),
    }

    with Broker("--state", "3", "--dirs", "2", "--threads", "2") as broker:
        # JMX cost first, with no agent running: jmxquery with rollguard's JVM flags and without.
        tuned, plain = [], []
        for _ in range(args.runs):
            tuned.append(jmx_rounds(broker.url, JVM_OPTIONS, args.samples // args.runs))
            plain.append(jmx_rounds(broker.url, (), args.samples // args.runs))
        results["jmx_jmxquery_tuned"] = {
            "wall_ms": median([t[0] for t in tuned]),
            "cpu_ms": median([t[1] for t in tuned]),
            "jvm_rss_mb": round(max(t[2] for t in tuned), 1),
            "jvm_flags": " ".join(JVM_OPTIONS),
        }
        results["jmx_jmxquery_plain"] = {
            "wall_ms": median([p[0] for p in plain]),
            "cpu_ms": median([p[1] for p in plain]),
        }

        with Agent(pki, broker.address, interval="1", running_interval="10", timeout="5") as agent:
            wait_until(lambda: agent.state().status == 200, timeout=30, what="a first 200")
            pid = agent.process.pid
            url = agent.api + "/v1/broker-state"

            cpu0, child0 = process_cpu(pid)
            time.sleep(args.idle_seconds)
            cpu1, child1 = process_cpu(pid)
            results["idle_running"] = {
                "seconds": args.idle_seconds,
                "agent_cpu_percent": round(100 * (cpu1 - cpu0) / args.idle_seconds, 2),
                "jmx_children_cpu_percent": round(100 * (child1 - child0) / args.idle_seconds, 2),
            }
            results["agent_rss_mb_idle"] = round(rss_mb(pid), 1)

            runs: dict[str, list[dict[str, float]]] = {
                "keepalive_1": [],
                "keepalive_16": [],
                "new_connections_4": [],
            }
            for _ in range(args.runs):
                runs["keepalive_1"].append(loadgen("keepalive", url, pki, 1, args.seconds))
                runs["keepalive_16"].append(loadgen("keepalive", url, pki, 16, args.seconds))
                runs["new_connections_4"].append(loadgen("connect", url, pki, 4, args.seconds))
            for name, measured in runs.items():
                results[name] = {
                    key: median([m[key] for m in measured])
                    for key in ("requests_per_second", "p50_ms", "p99_ms", "errors")
                }
                results[name]["runs"] = [m["requests_per_second"] for m in measured]  # type: ignore[index]
            results["agent_rss_mb_after_load"] = round(rss_mb(pid), 1)

    (work / "agent.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

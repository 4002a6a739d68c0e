"""Benchmark of the agent: JMX cost per backend, agent CPU and memory, HTTPS against nginx.

    .venv/bin/python bench/agent.py [--runs 3] [--seconds 10] [--cpu-seconds 60]
                                    [--rounds 10] [--persistent-rounds 1000] [--only jmx|cpu|http]

Runs on this machine only (127.0.0.1), with the Java test broker, real `rollguard-agent`
processes, and `bench/loadgen.py` as the client in its own process. Three parts:

- jmx: one sampling round (7 MBeans: a broker in RECOVERY with 2 dirs x 2 threads) with each
  backend, runs interleaved: wall time, CPU of the JVM and of the Python side, JVM RSS; the
  persistent reader measured warm, after 200 rounds, and its start-up separately;
- cpu: an agent with each backend (1 s / 10 s intervals, a --data-dir timeline) watched for
  --cpu-seconds with the broker RUNNING and in RECOVERY: CPU of the agent and every JVM it
  starts, agent and reader RSS;
- http: the agent on uvloop, the agent on the asyncio loop and nginx (`bench/nginx.py`: one
  worker, `ssl_verify_client on`, the agent's own JSON body), same certificates, servers pinned
  to CPU 0 and the client to CPU 1, interleaved: keep-alive requests/s at 1 and 16 connections,
  new TLS connections/s.

Medians go to stdout and build/bench/agent.json.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rollguard.agent.jmx_jmxquery import JmxQueryBackend
from rollguard.agent.jmx_persistent import PersistentJmxBackend
from rollguard.agent.jvm import reader_classpath
from rollguard.agent.readings import QUERIES
from rollguard.peers.processes import Agent, Broker, make_pki, wait_until

ROOT = Path(__file__).resolve().parent.parent

TICKS = os.sysconf("SC_CLK_TCK")


def loadgen(mode: str, url: str, pki, connections: int, seconds: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    command = [
        "taskset",
        "-c",
        str(CLIENT_CPU),
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


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process, its reaped children and its live descendants."""
    own, reaped = process_cpu(pid)
    return own + reaped + sum(tree_cpu(child) for child in children(pid))


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(c) for c in text]
    return found


def jmx_cost(backend_name: str, url: str, rounds: int, warmup: int) -> dict[str, float]:
    """Median wall ms per round, CPU ms per round (JVM and this Python process), JVM RSS, and
    for the persistent reader the CPU of its start (JVM start, connection, first read)."""
    walls: list[float] = []
    python_cpu = 0.0
    jvm_cpu = 0.0
    rss = 0.0
    start_cpu = 0.0

    async def measure() -> None:
        nonlocal python_cpu, jvm_cpu, rss, start_cpu
        if backend_name == "persistent":
            backend: Any = PersistentJmxBackend(
                url, classpath=reader_classpath("java"), queries=QUERIES
            )
        else:
            backend = JmxQueryBackend(url, queries=QUERIES)
        try:
            await backend.read(10)  # the persistent reader's JVM starts and connects here
            jvm = backend._process.pid if backend_name == "persistent" else None
            start_cpu = sum(process_cpu(jvm)) if jvm else 0.0
            for _ in range(warmup):  # a reader runs for days: measure it warm
                await backend.read(10)
            jvm_before = sum(process_cpu(jvm)) if jvm else 0.0
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            python_before = time.process_time()
            for _ in range(rounds):
                started = time.perf_counter()
                await backend.read(10)
                walls.append(time.perf_counter() - started)
            python_cpu = time.process_time() - python_before
            if jvm:
                jvm_cpu = sum(process_cpu(jvm)) - jvm_before
                rss = rss_mb(jvm)
            else:
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                jvm_cpu = (
                    after.ru_utime + after.ru_stime
                    - children_before.ru_utime - children_before.ru_stime
                )  # fmt: skip
                rss = after.ru_maxrss / 1024
        finally:
            await backend.close()

    asyncio.run(measure())
    return {
        "rounds": rounds,
        "wall_ms": round(statistics.median(walls) * 1000, 3),
        "jvm_cpu_ms": round(1000 * jvm_cpu / rounds, 3),
        "python_cpu_ms": round(1000 * python_cpu / rounds, 3),
        "cpu_ms": round(1000 * (jvm_cpu + python_cpu) / rounds, 3),
        "jvm_rss_mb": round(rss, 1),
        "start_cpu_ms": round(1000 * start_cpu, 1),
    }


RECOVERING = ("--starting-ms", "0", "--recovery-ms", "3600000", "--dirs", "2", "--threads", "2",
              "--logs", "500", "--segments", "20000")  # fmt: skip


def agent_cpu(pki: Any, backend: str, state: str, seconds: float, data: Path) -> dict[str, Any]:
    """A real agent's CPU (with every JVM it starts) over `seconds`, and its memory."""
    flags = ("--state", "3") if state == "running" else RECOVERING
    with Broker(*flags) as broker:
        if state == "recovery":
            broker.output.wait_for("^LOADING recovery$")
        shutil.rmtree(data, ignore_errors=True)
        with Agent(
            pki, broker.address, "--jmx-backend", backend, "--data-dir", str(data),
            interval="1", running_interval="10", timeout="5",
        ) as agent:  # fmt: skip
            want = 3 if state == "running" else 2
            wait_until(
                lambda: (a := agent.state()).status == 200 and a.json()["brokerState"] == want,
                timeout=30,
                what=f"the agent to report {state}",
            )
            time.sleep(3)  # past start-up work (JIT of the first rounds)
            pid = agent.process.pid
            before, started = tree_cpu(pid), time.monotonic()
            time.sleep(seconds)
            used, elapsed = tree_cpu(pid) - before, time.monotonic() - started
            jvm_rss = sum(rss_mb(c) for c in children(pid))
            return {
                "backend": backend,
                "broker": state,
                "seconds": round(elapsed, 1),
                "cpu_percent": round(100 * used / elapsed, 3),
                "agent_rss_mb": round(rss_mb(pid), 1),
                "reader_jvm_rss_mb": round(jvm_rss, 1),
            }


def http_runs(url: str, pki: Any, seconds: float) -> dict[str, dict[str, float]]:
    return {
        "keepalive_1": loadgen("keepalive", url, pki, 1, seconds),
        "keepalive_16": loadgen("keepalive", url, pki, 16, seconds),
        "new_connections_4": loadgen("connect", url, pki, 4, seconds),
    }


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10, help="length of each HTTP run")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each HTTP measurement")
    parser.add_argument("--rounds", type=int, default=10, help="jmxquery rounds per run")
    parser.add_argument(
        "--persistent-rounds", type=int, default=1000, help="persistent reader rounds per run"
    )
    parser.add_argument(
        "--cpu-seconds", type=float, default=60, help="how long to watch each agent's CPU"
    )
    parser.add_argument(
        "--only", choices=("jmx", "cpu", "http"), action="append", help="run only these parts"
    )
    args = parser.parse_args()
    parts = set(args.only or ("jmx", "cpu", "http"))
    work = ROOT / "build" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    pki = make_pki(work / "pki")
    results: dict[str, Any] = {
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": " ".join(["bench/agent.py", *sys.argv[1:]]),
    }

    if "jmx" in parts:
        # CPU and wall time of one sampling round, each backend, runs interleaved; the broker in
        # RECOVERY with 2 dirs x 2 threads: 7 MBeans a round.
        with Broker(*RECOVERING) as broker:
            broker.output.wait_for("^LOADING recovery$")
            runs: dict[str, list[dict[str, float]]] = {"persistent": [], "jmxquery": []}
            for _ in range(args.runs):
                runs["persistent"].append(
                    jmx_cost("persistent", broker.url, args.persistent_rounds, 200)
                )
                runs["jmxquery"].append(jmx_cost("jmxquery", broker.url, args.rounds, 0))
            results["jmx_round"] = {
                name: {key: median([m[key] for m in measured]) for key in measured[0]}
                for name, measured in runs.items()
            }
            print(json.dumps(results["jmx_round"], indent=2), flush=True)

    if "cpu" in parts:
        results["agent_cpu"] = [
            agent_cpu(pki, backend, state, args.cpu_seconds, work / "agent-data")
            for state in ("running", "recovery")
            for backend in ("persistent", "jmxquery")
        ]
        print(json.dumps(results["agent_cpu"], indent=2), flush=True)

    if "http" in parts:
        results["http"] = http_comparison(pki, args.seconds, args.runs)
        print(json.dumps(results["http"], indent=2), flush=True)

    (work / "agent.json").write_text(json.dumps(results, indent=2))
    print(f"results: {work / 'agent.json'}")
    return 0


SERVER_CPU, CLIENT_CPU = 0, 1


def http_comparison(pki: Any, seconds: float, runs: int) -> dict[str, Any]:
    """The agent (uvloop, and the asyncio loop) against nginx, same certificates and body.

    Servers run on CPU 0 and the load generator on CPU 1, so each server has one core of its
    own, as a sidecar with one core would; nginx runs one worker process.
    """
    nginx_module = _load_nginx()
    nginx_module.ensure_nginx()
    os.sched_setaffinity(0, {SERVER_CPU})  # inherited by the servers started below
    measured: dict[str, list[dict[str, dict[str, float]]]] = {}
    with Broker("--state", "3") as broker:
        agents = {
            loop: Agent(pki, broker.address, "--event-loop", loop, running_interval="10",
                        interval="1", timeout="5")
            for loop in ("uvloop", "asyncio")
        }  # fmt: skip
        try:
            for agent in agents.values():
                wait_until(lambda a=agent: a.state().status == 200, timeout=30, what="a 200")
            body = agents["uvloop"].state().body.encode()
            with nginx_module.Nginx(pki.ca, pki.server_cert, pki.server_key, body) as nginx:
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
                urls = {
                    "agent (uvloop)": agents["uvloop"].api + "/v1/broker-state",
                    "agent (asyncio)": agents["asyncio"].api + "/v1/broker-state",
                    "nginx": nginx.url + "/v1/broker-state",
                }
                for run in range(runs):
                    order = list(urls) if run % 2 == 0 else list(urls)[::-1]
                    for name in order:
                        measured.setdefault(name, []).append(http_runs(urls[name], pki, seconds))
                rss = {name: round(rss_mb(agent.process.pid), 1) for name, agent in agents.items()}
                rss["nginx"] = round(
                    rss_mb(nginx.pid) + sum(rss_mb(w) for w in nginx.worker_pids()), 1
                )
        finally:
            for agent in agents.values():
                agent.stop()
    out: dict[str, Any] = {"rss_mb_after_load": rss}
    for name, per_run in measured.items():
        out[name] = {
            mode: {
                key: median([r[mode][key] for r in per_run])
                for key in ("requests_per_second", "p50_ms", "p99_ms", "errors")
            }
            | {"runs": [r[mode]["requests_per_second"] for r in per_run]}
            for mode in per_run[0]
        }
    for mode in ("keepalive_1", "keepalive_16", "new_connections_4"):
        nginx_rate = out["nginx"][mode]["requests_per_second"]
        out["agent (uvloop)"][mode]["of_nginx"] = round(
            out["agent (uvloop)"][mode]["requests_per_second"] / nginx_rate, 2
        )
    return out


def _load_nginx() -> Any:
    spec = importlib.util.spec_from_file_location("bench_nginx", ROOT / "bench" / "nginx.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())

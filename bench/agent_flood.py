"""Benchmark of the agent under a connection flood: memory, and what honest clients see.

    .venv/bin/python bench/agent_flood.py [--runs 3] [--plain 3000] [--slow 1000] [--hold 10]
                                          [--event-loop uvloop|asyncio] [-- AGENT FLAGS...]

On this machine only (127.0.0.1): the Java test broker, a real `rollguard-agent` with its
default limits (or the flags after `--`), and the flood of `tests/sim/test_agent_limits.py` in its
own process: `--plain` TCP connections that never send a byte, then `--slow` mutual-TLS
connections sending a request head one line a second (slowloris), held for `--hold` seconds.
Meanwhile, from this process: the roller's pattern (requests on one keep-alive connection,
every 20 ms), a new TLS connection and request every 10th round once the flood's connections
are all made, and `/v1/ready` and `/metrics` on the probe port. Each run starts a new agent.

Reported (medians over the runs): the agent's RSS at rest, at the flood's peak and 3 s after
it; latencies of each kind of request, at rest and during the flood; what the agent dropped,
by reason. Figures go to stdout and build/bench/agent_flood.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from rollguard.peers.flood import (
    KeepAlive,
    api_connections,
    flood_result,
    fresh_get,
    metric,
    p,
    probe_get,
    raise_file_limit,
    rss,
    select_ready,
    start_flood,
)
from rollguard.peers.processes import Agent, Broker, Pki, make_pki, wait_until

ROOT = Path(__file__).resolve().parent.parent

MB = 2**20


def ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values) * 1000, 2),
        "p99_ms": round(p(values, 0.99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "n": len(values),
    }


def one_run(pki: Pki, broker: Broker, args: argparse.Namespace) -> dict[str, Any]:
    flags = ["--event-loop", args.event_loop, *args.agent_flags]
    with Agent(pki, broker.address, *flags) as agent:
        pid = agent.process.pid
        wait_until(lambda: agent.state().status == 200, timeout=20, what="a first 200")
        roller = KeepAlive(agent, pki)
        rest_keep = [roller.get()[1] for _ in range(300)]
        rest_fresh = [fresh_get(agent, pki)[1] for _ in range(30)]
        time.sleep(1)
        resting = rss(pid)
        flooding = start_flood(agent, pki, plain=args.plain, slow=args.slow, hold=args.hold)
        keep: list[float] = []
        fresh: list[float] = []
        probes: list[float] = []
        peak, held, all_in = 0, 0.0, False
        while flooding.poll() is None:
            peak = max(peak, rss(pid))
            keep.append(roller.get()[1])
            if len(keep) % 10 == 0:
                probes += [probe_get(agent, "/v1/ready")[1], probe_get(agent, "/metrics")[1]]
                held = max(held, api_connections(agent))
                all_in = all_in or select_ready(flooding)
                if all_in:
                    fresh.append(fresh_get(agent, pki)[1])
            time.sleep(0.02)
        roller.close()
        flood = flood_result(flooding, timeout=120)
        time.sleep(3)
        after = rss(pid)
        drops = {
            reason: metric(
                agent, f'rollguard_agent_connections_dropped_total{{port="api",reason="{reason}"}}'
            )
            for reason in ("evicted", "refused", "header-timeout")
        }
    return {
        "rss_rest_mb": round(resting / MB, 1),
        "rss_peak_mb": round(peak / MB, 1),
        "rss_after_mb": round(after / MB, 1),
        "api_connections_max": held,
        "keep_alive_rest": ms(rest_keep),
        "keep_alive_flood": ms(keep),
        "new_connection_rest": ms(rest_fresh),
        "new_connection_flood": ms(fresh) if fresh else None,
        "probe_flood": ms(probes),
        "flood": flood.__dict__,
        "dropped": drops,
    }


def median_of(runs: list[dict[str, Any]], *path: str) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        values.append(value)
    return round(statistics.median(values), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plain", type=int, default=3000)
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=10)
    parser.add_argument("--event-loop", default="uvloop", choices=["uvloop", "asyncio"])
    parser.add_argument("agent_flags", nargs="*", help="more rollguard-agent flags, after --")
    args = parser.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    raise_file_limit(hard if hard != resource.RLIM_INFINITY else args.plain + args.slow + 512)
    out = ROOT / "build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    pki = make_pki(out / "flood-pki")
    runs = []
    with Broker("--state", "3") as broker:
        for run in range(args.runs):
            runs.append(one_run(pki, broker, args))
            print(f"run {run + 1}: {json.dumps(runs[-1])}", flush=True)
    kinds = ("keep_alive_rest", "keep_alive_flood", "new_connection_rest",
             "new_connection_flood", "probe_flood")  # fmt: skip
    summary = {key: median_of(runs, key) for key in ("rss_rest_mb", "rss_peak_mb", "rss_after_mb")}
    for kind in kinds:
        if all(run[kind] for run in runs):
            for stat in ("p50_ms", "p99_ms", "max_ms"):
                summary[f"{kind}_{stat}"] = median_of(runs, kind, stat)
    print(json.dumps({"event_loop": args.event_loop, "median": summary}, indent=2))
    name = f"agent_flood-{args.event_loop}.json"
    (out / name).write_text(json.dumps({"args": vars(args), "runs": runs, "median": summary}))


if __name__ == "__main__":
    main()

"""A thundering herd: many roller clients retrying against one agent that refuses for a while.

Used by tests/sim/test_retry_herd.py (jitter must flatten the peak) and `bench/retry_herd.py`
(figures). Every client is the production `AgentClient` with the shared retry policy, over
mutual TLS with its own keep-alive connection, so the retries are exactly what rollers would
send. The refusing agent runs in a process of its own (uvloop and httptools), so that recording
an arrival costs microseconds and does not wait for the clients' event loop.

    python -m rollguard.peers.herd --cert agent.crt --key agent.key --ca ca.crt --refuse-for 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rollguard.peers.processes import LineReader, Pki
from rollguard.roller.agent_client import AgentClient, AgentReport
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.tls import client_context

WINDOW = 0.05


class RefusingAgent:
    """503 on /v1/broker-state until `refuse_for` seconds after POST /start; records arrivals.

    GET /warmup answers 200 without being recorded; GET /arrivals returns what was recorded.
    """

    def __init__(self, refuse_for: float) -> None:
        self.refuse_for = refuse_for
        self.start = float("inf")
        self.arrivals: list[tuple[float, str, int]] = []

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        now = time.monotonic()
        path = scope["path"]
        status, body = 200, b'{"brokerState": 3}'
        if path == "/v1/broker-state":
            self.arrivals.append((now, *scope["client"]))
            if now < self.start + self.refuse_for:
                status, body = 503, b'{"error": "no-sample-yet", "message": "starting"}'
        elif path == "/start":
            self.start = now
        elif path == "/arrivals":
            body = json.dumps([(t - self.start, h, p) for t, h, p in self.arrivals]).encode()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class HerdResult:
    jitter: float
    clients: int
    peak_retries_per_window: int
    wave_peaks: tuple[int, ...]
    retry_arrivals: int
    reported: int
    seconds: float


def peak(times: list[float], window: float = WINDOW) -> int:
    """The largest number of `times` within any window of `window` seconds."""
    times = sorted(times)
    best, low = 0, 0
    for high, moment in enumerate(times):
        while moment - times[low] >= window:
            low += 1
        best = max(best, high - low + 1)
    return best


def retry_waves(arrivals: list[tuple[float, str, int]]) -> list[list[float]]:
    """Arrival times of retries by wave: wave `n` holds every connection's retry number `n`.

    Each connection's first request opens the herd and is not a retry.
    """
    sent: dict[tuple[str, int], int] = {}
    waves: list[list[float]] = []
    for moment, host, port in sorted(arrivals):
        retry = sent.get((host, port), -1)
        sent[(host, port)] = retry + 1
        if retry >= 0:
            if retry == len(waves):
                waves.append([])
            waves[retry].append(moment)
    return waves


async def _herd(pki: Pki, jitter: float, clients: int, url: str) -> HerdResult:
    policy = RetryPolicy(max_retries=8, jitter_factor=jitter)
    tls = client_context(pki.ca, pki.client_cert, pki.client_key)
    rollers = [AgentClient(tls, policy, timeout=10) for _ in range(clients)]
    control = AgentClient(tls, RetryPolicy(max_retries=0))
    try:
        # every connection is opened and its TLS handshake done before the herd starts
        await asyncio.gather(*(r.broker_state(url + "/warmup") for r in rollers))
        await control.broker_state(url + "/start")
        started = time.monotonic()
        answers = await asyncio.gather(*(r.broker_state(url) for r in rollers))
        seconds = time.monotonic() - started
        arrivals = await control._http.get(url + "/arrivals")
    finally:
        await asyncio.gather(*(r.aclose() for r in [*rollers, control]))
    waves = retry_waves([tuple(a) for a in arrivals.json()])
    retries = [moment for wave in waves for moment in wave]
    return HerdResult(
        jitter=jitter,
        clients=clients,
        peak_retries_per_window=peak(retries),
        wave_peaks=tuple(peak(wave) for wave in waves),
        retry_arrivals=len(retries),
        reported=sum(isinstance(a, AgentReport) for a in answers),
        seconds=round(seconds, 3),
    )


def run_herd(pki: Pki, jitter: float, clients: int = 100, refuse_for: float = 2.0) -> HerdResult:
    server = subprocess.Popen(
        [sys.executable, __file__, "--cert", str(pki.server_cert), "--key", str(pki.server_key),
         "--ca", str(pki.ca), "--refuse-for", str(refuse_for)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        port = LineReader(server.stdout).wait_for(r"^PORT (\d+)$").group(1)
        return asyncio.run(_herd(pki, jitter, clients, f"https://127.0.0.1:{port}"))
    finally:
        server.terminate()
        server.wait(10)


def serve() -> None:
    import socket

    import uvicorn

    from rollguard.shared.tls import server_context

    parser = argparse.ArgumentParser()
    for name in ("--cert", "--key", "--ca"):
        parser.add_argument(name, type=Path, required=True)
    parser.add_argument("--refuse-for", type=float, default=2.0)
    args = parser.parse_args()
    tls = server_context(args.cert, args.key, args.ca)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        RefusingAgent(args.refuse_for), log_config=None, access_log=False, lifespan="off",
        loop="uvloop", http="httptools", backlog=256,
        ssl_certfile="unused", ssl_context_factory=lambda config, default: tls,
    )  # fmt: skip
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    serve()

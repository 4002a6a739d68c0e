"""A small HTTPS load generator with client certificates (wrk, h2load and hey have none).

    python bench/loadgen.py keepalive --url https://127.0.0.1:8443/v1/broker-state \
        --ca ca.crt --cert roller.crt --key roller.key --connections 16 --seconds 10
    python bench/loadgen.py connect ...   # a new TLS connection for every request

Prints one JSON object: requests, seconds, requests_per_second, p50_ms, p99_ms, errors, cpu_s.
Each connection sends a request, reads the whole response (Content-Length), and sends the next:
no pipelining. It runs on uvloop and low-level protocols to stay out of the way of the server;
it is still Python, so on a small machine it shares the CPU with the server it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import statistics
import time
from urllib.parse import urlsplit

import uvloop


class Exchange(asyncio.Protocol):
    """One keep-alive connection: request, full response, request again, until told to stop."""

    def __init__(self, request: bytes, latencies: list[float], stop_at: float) -> None:
        self.request = request
        self.latencies = latencies
        self.stop_at = stop_at
        self.buffer = b""
        self.sent = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.sent = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(body) < length:
            return
        self.buffer = body[length:]
        now = time.perf_counter()
        self.latencies.append(now - self.sent)
        if not head.startswith(b"HTTP/1.1 200"):
            self.done.set_exception(RuntimeError(head.split(b"\r\n")[0].decode()))
            return
        if now >= self.stop_at:
            assert self.transport is not None
            self.transport.close()
        else:
            self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def keepalive(args: argparse.Namespace, context: ssl.SSLContext) -> dict[str, float]:
    host, port, request = target(args.url)
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    stop_at = started + args.seconds
    exchanges = []
    for _ in range(args.connections):
        _, protocol = await loop.create_connection(
            lambda: Exchange(request, latencies, stop_at),
            host,
            port,
            ssl=context,
            server_hostname=host,
        )
        exchanges.append(protocol)
    await asyncio.gather(*(e.done for e in exchanges))
    return summary(latencies, time.perf_counter() - started, 0)


async def connect(args: argparse.Namespace, context: ssl.SSLContext) -> dict[str, float]:
    host, port, request = target(args.url)
    request = request.replace(b"keep-alive", b"close")
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()
    stop_at = started + args.seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < stop_at:
            begin = time.perf_counter()
            try:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host
                )
                writer.write(request)
                response = await reader.read()
                writer.close()
                if not response.startswith(b"HTTP/1.1 200"):
                    errors += 1
                    continue
            except OSError:
                errors += 1
                continue
            latencies.append(time.perf_counter() - begin)

    await asyncio.gather(*(worker() for _ in range(args.connections)))
    return summary(latencies, time.perf_counter() - started, errors)


def target(url: str) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    request = (
        f"GET {parts.path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: loadgen\r\n"
        "Connection: keep-alive\r\n\r\n"
    ).encode()
    return host, port, request


def summary(latencies: list[float], seconds: float, errors: int) -> dict[str, float]:
    ordered = sorted(latencies) or [float("nan")]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "requests": len(latencies),
        "seconds": round(seconds, 3),
        "requests_per_second": round(len(latencies) / seconds, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "errors": errors,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["keepalive", "connect"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.ca)
    context.load_cert_chain(args.cert, args.key)
    run = keepalive if args.mode == "keepalive" else connect
    print(json.dumps(uvloop.run(run(args, context))))


if __name__ == "__main__":
    main()

"""Many clients against one agent: a flood of plain and slow TLS connections in a process of its
own (`python -m rollguard.peers.flood flood PORT PKI_DIR ...`), honest clients beside it, and
the agent's figures (RSS, metrics, connection counts). Used by tests/sim/test_agent_limits.py and
bench/agent_flood.py."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from rollguard.peers.processes import Agent, Pki


def raise_file_limit(needed: int) -> int:
    """Raise this process's soft limit of open files towards the hard one; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, needed))
    if target != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def client_context(pki: Pki, *, certificate: bool = True) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(pki.ca)
    if certificate:
        context.load_cert_chain(pki.client_cert, pki.client_key)
    return context


@dataclass
class FloodResult:
    plain_opened: int = 0
    plain_failed: int = 0
    slow_authenticated: int = 0
    slow_failed: int = 0
    closed_by_agent: int = 0
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)


async def flood(
    port: int, pki: Pki, *, plain: int, slow: int, hold: float, drip: float = 1.0
) -> FloodResult:
    """`plain` TCP connections that never send a byte, then `slow` mutual-TLS connections that
    send a request head one header line every `drip` seconds (slowloris), at most 200 plain and
    32 TLS connects in flight (so that the slow ones get through their handshakes and are held,
    not only pushed out by each other); every connection the agent leaves open is held until
    `hold` seconds after the start, then closed."""
    result = FloodResult()
    started = time.monotonic()
    context = client_context(pki)
    gate, tls_gate = asyncio.Semaphore(200), asyncio.Semaphore(32)
    writers: list[asyncio.StreamWriter] = []
    stop = asyncio.Event()

    def failed(exc: BaseException) -> None:
        name = type(exc).__name__
        result.errors[name] = result.errors.get(name, 0) + 1

    async def watch(reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(4096):
                pass
        except (OSError, ssl.SSLError):
            pass
        result.closed_by_agent += 1

    async def one_plain() -> None:
        try:
            async with gate:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), 10
                )
        except (OSError, TimeoutError) as exc:
            result.plain_failed += 1
            failed(exc)
            return
        result.plain_opened += 1
        writers.append(writer)
        await watch(reader)

    async def one_slow() -> None:
        try:
            async with tls_gate:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        "127.0.0.1", port, ssl=context, server_hostname="localhost"
                    ),
                    10,
                )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            result.slow_failed += 1
            failed(exc)
            return
        result.slow_authenticated += 1
        writers.append(writer)
        watcher = asyncio.create_task(watch(reader))
        try:
            writer.write(b"GET /v1/broker-state HTTP/1.1\r\nhost: localhost\r\n")
            while not watcher.done() and not stop.is_set():
                await asyncio.wait([watcher], timeout=drip)
                writer.write(b"x-slow: 1\r\n")
        except (OSError, ssl.SSLError):
            pass
        await watcher

    tasks = [asyncio.create_task(one_plain()) for _ in range(plain)]
    while result.plain_opened + result.plain_failed < plain:
        await asyncio.sleep(0.01)
    tasks += [asyncio.create_task(one_slow()) for _ in range(slow)]
    while result.slow_authenticated + result.slow_failed < slow:
        await asyncio.sleep(0.01)
    print("flooded", flush=True)  # every connection is made: from here on they are only held
    await asyncio.sleep(max(0.0, hold - (time.monotonic() - started)))
    stop.set()
    for writer in writers:
        writer.transport.abort()
    await asyncio.gather(*tasks, return_exceptions=True)
    result.seconds = time.monotonic() - started
    return result


def flood_main(argv: list[str] | None = None) -> None:
    """`python -m rollguard.peers.flood flood PORT PKI_DIR --plain N --slow N --hold S`:
    prints "started", then the FloodResult as one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("pki", type=Path)
    parser.add_argument("--plain", type=int, default=3000)
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=10)
    args = parser.parse_args(argv)
    raise_file_limit(args.plain + args.slow + 256)
    folder = args.pki
    pki = Pki(folder / "ca.crt", folder / "agent.crt", folder / "agent.key",
              folder / "roller.crt", folder / "roller.key")  # fmt: skip
    print("started", flush=True)
    result = asyncio.run(flood(args.port, pki, plain=args.plain, slow=args.slow, hold=args.hold))
    print(json.dumps(result.__dict__), flush=True)


def start_flood(
    agent: Agent, pki: Pki, *, plain: int, slow: int, hold: float
) -> subprocess.Popen[str]:
    port = agent.api.rsplit(":", 1)[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "rollguard.peers.flood", "flood", port, str(pki.ca.parent),
         "--plain", str(plain), "--slow", str(slow), "--hold", str(hold)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    return process


def flood_result(process: subprocess.Popen[str], timeout: float) -> FloodResult:
    out, _ = process.communicate(timeout=timeout)
    return FloodResult(**json.loads(out.strip().splitlines()[-1]))


def rss(pid: int) -> int:
    """Resident memory of a process, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    assert found
    return int(found.group(1)) * 1024


class KeepAlive:
    """An honest client as the roller is one: one mutual-TLS connection, requests on it."""

    def __init__(self, agent: Agent, pki: Pki) -> None:
        port = int(agent.api.rsplit(":", 1)[1])
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as curl and httpx do
        self.sock = client_context(pki).wrap_socket(raw, server_hostname="localhost")

    def get(self, path: str = "/v1/broker-state") -> tuple[int, float]:
        """(status, seconds) of one request on the open connection."""
        started = time.perf_counter()
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            assert chunk, "the agent closed the honest connection"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
        while len(body) < length:
            body += self.sock.recv(65536)
        return int(head.split()[1]), time.perf_counter() - started

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KeepAlive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fresh_get(agent: Agent, pki: Pki) -> tuple[int, float]:
    """A request on a new connection (`rollguard state`, curl): status and seconds."""
    started = time.perf_counter()
    client = KeepAlive(agent, pki)
    try:
        status, _ = client.get()
    finally:
        client.close()
    return status, time.perf_counter() - started


def probe_get(agent: Agent, path: str) -> tuple[int, float]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(agent.probe + path, timeout=10) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.perf_counter() - started


def metric(agent: Agent, name: str) -> float:
    text = urllib.request.urlopen(agent.probe + "/metrics", timeout=10).read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def api_connections(agent: Agent) -> float:
    """Connections the API port holds now, every stage."""
    text = urllib.request.urlopen(agent.probe + "/metrics", timeout=10).read().decode()
    pattern = r'^rollguard_agent_connections\{port="api",stage="\w+"\} (\S+)$'
    return sum(float(value) for value in re.findall(pattern, text, re.MULTILINE))


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---- the slot policy (pure) ----------------------------------------------------------------


def select_ready(process: subprocess.Popen[str]) -> bool:
    """True once the flood process has said "flooded" (all its connections are made)."""
    import select

    assert process.stdout is not None
    if select.select([process.stdout], [], [], 0)[0]:
        return process.stdout.readline().strip() == "flooded"
    return False


if __name__ == "__main__" and sys.argv[1:2] == ["flood"]:
    flood_main(sys.argv[2:])

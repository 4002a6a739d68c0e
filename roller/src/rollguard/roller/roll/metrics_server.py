"""The roll's metrics server (`--metrics-listen`): just enough HTTP/1.1 for a scrape, in the
roll's own event loop, with bounds on what a client can hold.

GET /metrics only (404 elsewhere, 405 for another method); one request a connection; at most
`MAX_CONNECTIONS` at once (the next is answered 503 and closed at once: no task waits on it); a
request head of at most `MAX_HEAD` bytes that must arrive within `READ_TIMEOUT`, and an answer
that must leave within it. prometheus_client's own server starts a thread a connection, without
a bound: not used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from rollguard.shared.converters import HostPort
from rollguard.shared.errors import ConfigError

__all__ = ["MetricsServer"]

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what generate_latest writes
MAX_CONNECTIONS = 4  # Prometheus scrapes with one; a person's curl or two beside it
READ_TIMEOUT = 5.0  # seconds for a request's head to arrive whole, and for the answer to leave
MAX_HEAD = 8192  # bytes of request line and headers
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _response(
    status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", *extra: str
) -> bytes:
    head = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class MetricsServer:
    """GET /metrics over plain HTTP in the running event loop; `render` gives the body."""

    def __init__(
        self,
        render: Callable[[], bytes],
        *,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT,
        max_head: int = MAX_HEAD,
    ) -> None:
        self.render = render
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.max_head = max_head
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[Any]] = set()

    @property
    def connections(self) -> int:
        """Connections being served now."""
        return len(self._open)

    async def start(self, where: HostPort) -> HostPort:
        """Listen on `where` (port 0: any free one); the address listened on. A ConfigError
        naming the address when it cannot be (in use, not this host's)."""
        try:
            self._server = await asyncio.start_server(
                self._serve,
                where.host,
                where.port,
                limit=self.max_head,
                backlog=self.max_connections,
            )
        except OSError as exc:
            raise ConfigError(f"--metrics-listen {where}: {exc.strerror or exc}") from None
        host, port = self._server.sockets[0].getsockname()[:2]
        return HostPort(host, port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # each connection is served by a task of its own
        if len(self._open) >= self.max_connections:
            # Beyond the bound: said at once and closed, the request unread (a client that
            # sent it already may see the connection reset instead).
            writer.write(_response(503, b"too many connections\n"))
            writer.close()
            return
        self._open.add(task)
        try:
            answer = await self._answer(reader)
            if answer is not None:
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), self.read_timeout)
        except (OSError, TimeoutError):
            pass  # the client went away, or does not read its answer
        except asyncio.CancelledError:
            pass  # `stop`: the roll is over; the connection ends quietly, not as an error
        finally:
            self._open.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout)
        except TimeoutError:
            return _response(408, b"request head not received in time\n")
        except asyncio.LimitOverrunError:
            return _response(431, b"request head too large\n")
        except asyncio.IncompleteReadError:
            return None  # closed before a whole request
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response(400, b"not an HTTP request\n")
        method, target = parts[0], parts[1]
        if target.split("?", 1)[0] != "/metrics":
            return _response(404, b"only /metrics is served here\n")
        if method != "GET":
            return _response(405, b"only GET\n", "text/plain; charset=utf-8", "Allow: GET")
        try:
            body = self.render()
        except Exception:  # a scrape never stops the roll: said, and answered 500
            logger.warning("the roll's metrics could not be rendered", exc_info=True)
            return _response(500, b"the metrics could not be rendered\n")
        return _response(200, body, CONTENT_TYPE)

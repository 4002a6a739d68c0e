"""uvicorn's HTTP protocol with the bounds it lacks: header deadline, header size, a slot.

uvicorn (httptools) waits for a request's headers for ever and buffers them without a limit: a
client that connects and sends nothing, or one byte every few seconds (slowloris), holds its
connection for good, and one 100 MB header is read into memory whole. This protocol adds:

- a header deadline: from the connection's start, or from the first byte of each later request,
  its request line and headers must arrive whole within `header_timeout`, else the connection
  is closed (counted as `header-timeout`). Bytes trickling in do not extend it;
- a header size limit: more than `max_header_bytes` before the end of the headers is answered
  431 with a JSON body and the connection closed (counted as `header-too-large`); at most one
  read beyond the limit is ever buffered;
- a slot in its port's `ConnectionLimiter`: taken on the plain probe port when the connection
  is made, handed over by the TLS gate on the API port; the connection becomes PROVEN once a
  response has been sent.

Between requests uvicorn's own keep-alive timer (the agent's `--idle-timeout`) closes an idle
connection. Requests themselves are answered from memory at once, so no deadline covers them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from rollguard.agent.connections import Port, Slot, Stage


class BoundedHttpProtocol(HttpToolsProtocol):
    port: Port  # set on the subclass `bound_protocol()` makes, or given per connection

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        port: Port | None = None,
        slot: Slot | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if port is not None:
            self.port = port
        self._slot = slot
        self._awaiting_headers = True
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._rejected = False

    # ---- the connection --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._slot is None:
            self._slot = self.port.limiter.admit(transport.abort, Stage.UNPROVEN)
            if self._slot is None:
                transport.abort()
                return
        else:
            self.port.limiter.advance(self._slot, Stage.UNPROVEN, transport.abort)
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        if self._slot is not None:
            self.port.limiter.release(self._slot)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        if self._awaiting_headers:
            self._header_bytes += len(data)
            if self._header_bytes > self.port.http.max_header_bytes:
                self._reject_large_header()
                return
        super().data_received(data)
        if self._awaiting_headers and self._header_timer is None and self._header_bytes:
            self._start_header_timer()

    # ---- httptools callbacks -----------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        self._cancel_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_headers = True  # what comes next is the next request's head

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._slot is not None and self._slot.stage is not Stage.PROVEN:
            self.port.limiter.advance(self._slot, Stage.PROVEN)

    # ---- the bounds ----------------------------------------------------------------------------
    def _start_header_timer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(
                self.port.http.header_timeout, self._header_timed_out
            )

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self._awaiting_headers and not self.transport.is_closing():
            self.port.dropped("header-timeout")
            self.transport.close()

    def _reject_large_header(self) -> None:
        self._rejected = True
        self._cancel_header_timer()
        self.port.dropped("header-too-large")
        limit = self.port.http.max_header_bytes
        body = json.dumps(
            {
                "error": "header-too-large",
                "message": f"the request line and headers exceed {limit} bytes",
            }
        ).encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\ncache-control: no-store\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()


def bound_protocol(port: Port) -> type[BoundedHttpProtocol]:
    """The protocol class uvicorn instantiates for each connection of a plain-HTTP port."""
    return type(f"BoundedHttpProtocol_{port.name}", (BoundedHttpProtocol,), {"port": port})

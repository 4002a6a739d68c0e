"""The API port's front door: a connection slot, the TLS handshake, and a TLS alert on refusal.

Why the agent does the handshake itself instead of handing uvicorn an SSL context: both event
loops' TLS protocols (asyncio's `sslproto` and uvloop's copy of it) drop the TLS alert OpenSSL
writes when a handshake fails. `_do_handshake` sends OpenSSL's output only while the handshake
wants more data; on a failure `_on_handshake_complete` calls `_fatal_error`, which force-closes
the socket with the alert still in the outgoing buffer. A client without a certificate, or with
an untrusted one, sees the connection end ("unexpected eof"), the same as an agent that crashed,
and cannot tell "refused" from "down". The loops also hold a handshake for 60 s, accept any
number of them, and say nothing about who was refused.

So each accepted TCP connection meets a `TlsGate` first. It takes a slot (`connections.py`),
starts TLS with `loop.start_tls()` on the current context (`tls_reload.py`: a rotated CA or CRL
applies to the next handshake, and sessions die with the context that made them), with a short
handshake timeout. Contexts create `AlertingSSLObject`s: when OpenSSL fails the handshake, the
object reports the failure to its gate and tells the loop "want read", which makes the loop send
what OpenSSL wrote, the alert (`certificate required`, `unknown ca`, `certificate revoked`...);
the gate then closes the connection. Each refusal is counted by reason and logged, rate-limited
(`refusals.py`). A connection whose handshake succeeds is handed to `BoundedHttpProtocol`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ssl
import weakref
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar, cast

from uvicorn.config import Config
from uvicorn.server import ServerState

from rollguard.agent.connections import Port, Slot, Stage
from rollguard.agent.http_protocol import BoundedHttpProtocol
from rollguard.agent.refusals import Refusals

# Links the SSL object OpenSSL's handshake runs in to its gate. The loop creates the object in a
# callback that runs in the context connection_made() ran in (uvloop: the transport's; asyncio:
# a copy start_tls() takes). A weak reference: the context lives as long as the transport, and
# a strong one would be a cycle that keeps every closed connection until a full collection.
_GATE: contextvars.ContextVar[weakref.ref[TlsGate] | None] = contextvars.ContextVar(
    "tls_gate", default=None
)

# X509 verification results (OpenSSL's X509_V_ERR_*) worth their own reason.
_VERIFY_REASONS = {
    9: "certificate-not-yet-valid",  # often a clock that is wrong on one side
    10: "certificate-expired",
    23: "certificate-revoked",
    2: "unknown-ca",
    18: "unknown-ca",
    19: "unknown-ca",
    20: "unknown-ca",
    21: "unknown-ca",
    3: "crl-problem",
    11: "crl-problem",
    12: "crl-problem",
}
REASONS = (
    "no-certificate",
    "unknown-ca",
    "certificate-expired",
    "certificate-not-yet-valid",
    "certificate-revoked",
    "crl-problem",
    "bad-certificate",
    "protocol",
    "timeout",
    "closed",
)
# Refusals of a certificate are what an operator must see; the rest is mostly scanners and
# TCP health checks, logged at INFO.
CERTIFICATE_REASONS = frozenset(REASONS[:7])


def classify(error: BaseException) -> tuple[str, str]:
    """(reason, detail) of a failed handshake: a metrics label and a line for people."""
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = _VERIFY_REASONS.get(error.verify_code, "bad-certificate")
        return reason, f"certificate verify failed: {error.verify_message}"
    if isinstance(error, ssl.SSLError) and type(error) is ssl.SSLError:
        if error.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "no-certificate", "the client sent no certificate"
        if error.reason in ("CERTIFICATE_VERIFY_FAILED", "SSLV3_ALERT_BAD_CERTIFICATE"):
            return "bad-certificate", str(error.reason).lower().replace("_", " ")
        return "protocol", str(error.reason or error).lower().replace("_", " ")
    if isinstance(error, ConnectionAbortedError) and "taking longer" in str(error):
        return "timeout", "the handshake did not finish in time"
    return "closed", "the client closed the connection during the handshake"


class AlertingSSLObject(ssl.SSLObject):
    """An SSL object that gets the alert of a failed handshake sent (see the module doc)."""

    _gate: weakref.ref[TlsGate] | None = None
    _bound = False
    _failed = False

    def do_handshake(self) -> None:
        if not self._bound:  # the first call runs where the object was made: find the gate
            self._bound, self._gate = True, _GATE.get()
        if self._failed:
            # More data after the failure (TLS 1.3 clients send their request at once): keep
            # waiting for the gate's close, which sends the alert first; failing here would
            # make the loop drop the alert still queued for writing.
            raise ssl.SSLWantReadError("the handshake failed; closing")
        try:
            super().do_handshake()
        except ssl.SSLError as exc:
            gate = self._gate() if self._gate is not None else None
            if gate is None or type(exc) not in (ssl.SSLError, ssl.SSLCertVerificationError):
                raise  # want read/write, EOF: the loop's own handling is right
            self._failed = True  # not the exception: its traceback would make a reference cycle
            gate.refused(exc)
            raise ssl.SSLWantReadError("sending the alert of a failed handshake") from None


T = TypeVar("T")


class Eager(Generic[T]):
    """An awaitable that runs its coroutine's first step at once, where it is created, instead
    of on a later turn of the loop as a task would (Python 3.11 has no eager tasks)."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._yielded: Any = None
        self._done = False
        self._result: T | None = None
        self._error: BaseException | None = None
        self._advance(functools.partial(coroutine.send, None))

    def _advance(self, step: Callable[[], Any]) -> None:
        try:
            self._yielded = step()
        except StopIteration as stop:
            self._done, self._result = True, stop.value
        except BaseException as exc:  # kept, and raised where it is awaited
            self._done, self._error = True, exc

    def __await__(self) -> Generator[Any, Any, T]:
        while not self._done:
            try:
                sent = yield self._yielded
            except BaseException as exc:  # cancellation goes into the coroutine
                self._advance(functools.partial(self._coroutine.throw, exc))
            else:
                self._advance(functools.partial(self._coroutine.send, sent))
        # Let go of the coroutine, its result and its error: the error's traceback holds the
        # frames that raised it, and a frame holding the error (as this object or a local
        # variable) would make a cycle that only a full collection frees.
        del self._coroutine
        if self._error is not None:
            raise self._take_error()
        result, self._result = self._result, None
        return cast(T, result)

    def _take_error(self) -> BaseException:
        error, self._error = self._error, None
        assert error is not None
        return error


class _Pending(asyncio.Protocol):
    """Holds what arrives between the end of the handshake and the HTTP protocol taking over
    (the asyncio loop delivers the first data before start_tls() returns)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class TlsPort:
    """What every gate of the API port shares."""

    def __init__(
        self,
        port: Port,
        context: Callable[[], ssl.SSLContext],
        *,
        handshake_timeout: float,
        refusals: Refusals,
    ) -> None:
        self.port = port
        self.context = context
        self.handshake_timeout = handshake_timeout
        self.refusals = refusals

    def protocol_class(self) -> type[TlsGate]:
        """The class uvicorn instantiates for each accepted connection."""
        return type("ApiTlsGate", (TlsGate,), {"tls_port": self})


class TlsGate(asyncio.Protocol):
    tls_port: TlsPort

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._http_args = (config, server_state, app_state, _loop)
        self._loop = _loop or asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = "unknown"
        self.failure: tuple[str, str] | None = None
        self.evicted = False
        self.slot: Slot | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"[{peer[0]}]:{peer[1]}" if ":" in str(peer[0]) else f"{peer[0]}:{peer[1]}"
        tls_port = self.tls_port
        self.slot = tls_port.port.limiter.admit(self._evict, Stage.HANDSHAKE)
        if self.slot is None:
            transport.abort()
            return
        _GATE.set(weakref.ref(self))
        pending = _Pending()
        # start_tls() must take the transport over now, before this method returns: uvloop
        # starts reading right after connection_made(), and a ClientHello that reached this
        # protocol would be lost (the handshake would then hang until its timeout).
        starting = Eager(
            self._loop.start_tls(
                transport,
                pending,
                tls_port.context(),
                server_side=True,
                ssl_handshake_timeout=tls_port.handshake_timeout,
            )
        )
        self._task = self._loop.create_task(self._handshake(starting, pending, self.slot))

    def connection_lost(self, exc: Exception | None) -> None:
        # Only before start_tls() has replaced this protocol (evicted at once, or refused).
        if self.slot is not None:
            self.tls_port.port.limiter.release(self.slot)

    def _evict(self) -> None:
        self.evicted = True
        if self.transport is not None:
            self.transport.abort()

    def refused(self, error: ssl.SSLError) -> None:
        """Called by the SSL object when OpenSSL fails the handshake: the alert goes out with
        the current write, then the connection closes."""
        self.failure = classify(error)
        if self.transport is not None:
            self._loop.call_soon(self.transport.close)

    async def _handshake(self, starting: Eager[Any], pending: _Pending, slot: Slot) -> None:
        tls_port = self.tls_port
        limiter = tls_port.port.limiter
        transport = self.transport
        assert transport is not None
        try:
            secure = cast(asyncio.Transport | None, await starting)
        except Exception as exc:  # every way a handshake can fail ends here, with its reason
            limiter.release(slot)
            if not self.evicted:
                reason, detail = self.failure or classify(exc)
                tls_port.refusals.record(reason, self.peer, detail)
            transport.abort()
            return
        except BaseException:  # cancelled: the agent is stopping
            limiter.release(slot)
            transport.abort()
            raise
        if self.failure is not None or secure is None or transport.is_closing():
            # The loops end a start_tls() whose connection closed mid-handshake without an
            # error: refused by OpenSSL (the alert is out), or closed by the client.
            limiter.release(slot)
            if not self.evicted:
                reason, detail = self.failure or classify(EOFError())
                tls_port.refusals.record(reason, self.peer, detail)
            (secure or transport).abort()
            return
        if pending.lost or self.evicted:
            limiter.release(slot)
            secure.abort()
            return
        http = BoundedHttpProtocol(*self._http_args, port=tls_port.port, slot=slot)
        secure.set_protocol(http)
        http.connection_made(secure)  # takes over the slot (UNPROVEN) and its closing
        for chunk in pending.chunks:
            http.data_received(chunk)

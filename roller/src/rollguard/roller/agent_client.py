"""The roller's client for agents: `GET /v1/broker-state` (and, for the collector,
`GET /v1/recovery-timeline`) over mutual TLS, with retries.

Proposal 048's rule shapes the answer: a report when the agent says 200 with a valid body,
otherwise `AgentUnavailable`, and the caller "continues with the previous behaviour". So
nothing here raises for an agent that is down, slow or broken: it is an answer like any other.

Transport errors (refused, reset, timed out) and 5xx answers that are not the agent's (a proxy's
502, a crash's 500) are retried with the shared retry policy, each retry announced as it
happens; 4xx answers and malformed bodies are not, because asking again will not change them.

A 503 with the agent's JSON reason (`jmx-unreachable`, `stale-sample`...: `shared.wire`) is an
answer, not an agent that cannot be reached: its broker is not ready, and asking five times in
twelve seconds will not make it so. It is returned at once and counted as "answered not ready",
apart from failures. One reason is worth a short wait: `no-sample-yet`, said by an agent that
has just started, before its first sample (due within its sample interval). That one is asked
again at most `NO_SAMPLE_YET_RETRIES` times, after the agent's Retry-After (capped at the
policy's maximum backoff), and only by calls that retry at all (not `once` polls).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx

from rollguard.roller.model import AgentAnswer, AgentReport, AgentUnavailable, Node, Unavailable
from rollguard.shared.errors import WireFormatError
from rollguard.shared.retry import (
    NotReady,
    Retrying,
    RetryPolicy,
    RetryStats,
    announce,
    describe_error,
    retry_async,
)
from rollguard.shared.timeline import TIMELINE_PATH, Page
from rollguard.shared.wire import BROKER_STATE_PATH, BrokerStateReport, KafkaBuild

__all__ = [
    "AgentAnswer",
    "AgentClient",
    "AgentReport",
    "AgentUnavailable",
    "Probe",
    "broker_state_url",
    "timeline_url",
]

OPERATION = "agent-broker-state"
TIMELINE_OPERATION = "agent-timeline"
_ONCE = RetryPolicy(max_retries=0)
NO_SAMPLE_YET = "no-sample-yet"
NO_SAMPLE_YET_RETRIES = 3  # the agent's first sample is due within its interval (default 5s)


@dataclass(frozen=True, slots=True)
class Probe:
    """One request to an agent before a roll: its answer, and its clock (the HTTP Date header)
    against ours at the moment the answer came."""

    answer: AgentAnswer
    skew: float | None  # agent's clock minus ours, in seconds; None when it sent no Date


class _ServerError(Exception):
    """A 5xx answer that is not the agent's (a proxy's, a crash's), raised inside the retry loop
    so that it is retried like an agent that cannot be reached."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}: {response.text[:100]}")
        self.response = response


class _NotReady(NotReady):
    """A 503 with the agent's reason: an answer (counted apart), retried only when it is
    `no-sample-yet`."""

    def __init__(self, response: httpx.Response, reason: str, message: str) -> None:
        super().__init__(f"HTTP 503 {reason}: {message}", retry_after(response))
        self.response = response
        self.reason = reason


def broker_state_url(url: str) -> str:
    """`https://host:8443` means that agent's broker-state endpoint; a full URL is kept."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{url!r} is not an https:// URL of an agent")
    if parts.path in ("", "/"):
        return url.rstrip("/") + BROKER_STATE_PATH
    return url


def timeline_url(url: str) -> str:
    """The agent's timeline endpoint, from its base URL or its broker-state URL."""
    state = broker_state_url(url)
    base = state[: -len(BROKER_STATE_PATH)] if state.endswith(BROKER_STATE_PATH) else state
    return base.rstrip("/") + TIMELINE_PATH


class AgentClient:
    def __init__(
        self,
        tls: ssl.SSLContext,
        policy: RetryPolicy | None = None,
        *,
        stats: RetryStats | None = None,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        uniform: Callable[[], float] = random.random,
        on_retry: Callable[[Retrying], object] = announce,
    ) -> None:
        # httpx drops a cert= tuple given beside a CA path: the context carries both.
        self._http = httpx.AsyncClient(verify=tls, timeout=timeout, transport=transport)
        self.policy = policy or RetryPolicy()
        self.stats = stats or RetryStats()
        self._sleep = sleep
        self._uniform = uniform
        self._on_retry = on_retry  # every retry is announced (a warning) as it happens

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def broker_state(self, url: str, *, once: bool = False) -> AgentAnswer:
        """The agent's report, or why there is none. `once`: a single attempt, for polls that
        come round again anyway (readiness checks)."""
        url = broker_state_url(url)
        response = await self._get(url, None, _ONCE if once else self.policy, OPERATION)
        if isinstance(response, AgentUnavailable):
            return response
        return _read(url, response)

    async def ask(self, node: Node) -> AgentAnswer | None:
        """What `node`'s agent says now, in one attempt (None: it has no agent): a look at a
        node comes round again anyway."""
        if node.agent_url is None:
            return None
        return await self.broker_state(node.agent_url, once=True)

    async def probe(self, url: str) -> Probe:
        """A single request, with the agent's clock: for the check before any action."""
        url = broker_state_url(url)
        response = await self._get(url, None, _ONCE, OPERATION)
        if isinstance(response, AgentUnavailable):
            return Probe(response, None)
        skew = None
        date = response.headers.get("date")
        if date:
            try:
                skew = parsedate_to_datetime(date).timestamp() - time.time()
            except (TypeError, ValueError):
                skew = None
        return Probe(_read(url, response), skew)

    async def timeline(self, url: str, after: int, limit: int) -> Page | AgentUnavailable:
        """One page of the agent's recovery timeline after the cursor `after`."""
        url = timeline_url(url)
        params = {"after": str(after), "limit": str(limit)}
        response = await self._get(url, params, self.policy, TIMELINE_OPERATION)
        if isinstance(response, AgentUnavailable):
            return response
        if response.status_code != 200:
            return _unavailable(url, response)
        try:
            return Page.from_wire(json.loads(response.content))
        except (ValueError, WireFormatError) as exc:
            return AgentUnavailable(url, 200, "malformed-timeline", str(exc)[:300])

    async def _get(
        self, url: str, params: dict[str, str] | None, policy: RetryPolicy, operation: str
    ) -> httpx.Response | AgentUnavailable:
        async def attempt() -> httpx.Response:
            response = await self._http.get(url, params=params)
            if response.status_code >= 500:
                said = _agent_error(response)
                if response.status_code == 503 and said is not None:
                    raise _NotReady(response, said.reason, said.message)
                raise _ServerError(response)
            return response

        no_sample_yet = 0

        def retriable(error: BaseException) -> bool:
            nonlocal no_sample_yet
            if isinstance(error, _NotReady):
                no_sample_yet += error.reason == NO_SAMPLE_YET
                return error.reason == NO_SAMPLE_YET and no_sample_yet <= NO_SAMPLE_YET_RETRIES
            return isinstance(error, httpx.TransportError | _ServerError)

        try:
            return await retry_async(
                attempt,
                policy,
                operation=operation,
                retriable=retriable,
                stats=self.stats,
                sleep=self._sleep,
                uniform=self._uniform,
                target=url,
                describe=_describe,
                on_retry=self._on_retry,
            )
        except (_NotReady, _ServerError) as exc:
            return exc.response
        except TRANSPORT_ERRORS as exc:
            return AgentUnavailable(url, None, classify(exc), describe_transport_error(exc))


def _describe(error: BaseException) -> str:
    """An error's words in retry lines: a transport error by its innermost cause."""
    if isinstance(error, TRANSPORT_ERRORS):
        return describe_transport_error(error)
    if isinstance(error, _NotReady | _ServerError):
        return str(error)
    return describe_error(error)


class _Said(NamedTuple):
    """An agent's `{"error": reason, "message": ...}` body, with what it runs if it says."""

    reason: str
    message: str
    kafka: KafkaBuild | None


def _agent_error(response: httpx.Response) -> _Said | None:
    """The agent's error body, or None when it is not one."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return None
    return _Said(body["error"], str(body.get("message", "")), KafkaBuild.from_wire(body))


def retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta-seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _unavailable(url: str, response: httpx.Response) -> AgentUnavailable:
    # a controller-only node's `broker-state-missing` says what it runs
    said = _agent_error(response) or _Said(
        f"http-{response.status_code}", response.text[:300], None
    )
    return AgentUnavailable(url, response.status_code, *said)


def _read(url: str, response: httpx.Response) -> AgentAnswer:
    if response.status_code != 200:
        return _unavailable(url, response)
    try:
        return AgentReport(url, BrokerStateReport.from_json(response.content))
    except WireFormatError as exc:
        return AgentUnavailable(url, 200, "malformed-report", str(exc))


# OpenSSL's names for the alerts a server sends when it refuses the client's certificate.
_REFUSAL_ALERTS = (
    "CERTIFICATE_REQUIRED",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_REVOKED",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_UNKNOWN",
    "UNSUPPORTED_CERTIFICATE",
    "ACCESS_DENIED",
    "DECRYPT_ERROR",
)


# httpx does not wrap every TLS failure: a TLS alert that arrives while the response is read
# (TLS 1.3 refuses a client certificate after the handshake) comes out of anyio as a bare
# ssl.SSLError. Both are "no HTTP answer", classified below.
# A host name that is not a valid DNS name (`prod-kafka-0..kafka.svc`, from an empty
# `{service}`) fails before any connection, as a bare UnicodeError from the IDNA codec, or as
# httpx.InvalidURL: no HTTP answer either, and one that no retry will change.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.TransportError,
    ssl.SSLError,
    httpx.InvalidURL,
    UnicodeError,
)


def classify(exc: BaseException) -> str:
    """`unresolved` when the URL's host has no address, `tls-untrusted` when our check of the
    agent's certificate failed, `tls-refused` when the agent sent a TLS alert refusing ours,
    else `unreachable`: the first three are configuration errors (a roll must not start), the
    last may be a node that is down."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror | UnicodeError | httpx.InvalidURL):
            return Unavailable.UNRESOLVED
        if isinstance(cause, ssl.SSLCertVerificationError):
            return Unavailable.TLS_UNTRUSTED
        if isinstance(cause, ssl.SSLError):
            text = f"{cause.reason or ''} {cause}".upper()
            if any(alert in text for alert in _REFUSAL_ALERTS):
                return Unavailable.TLS_REFUSED
        cause = cause.__cause__ or cause.__context__
    return Unavailable.UNREACHABLE


def describe_transport_error(exc: BaseException) -> str:
    """The innermost cause, which says what a person can act on (refused, certificate...)."""
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    text = str(cause) or type(cause).__name__
    return f"{type(exc).__name__}: {text}"[:300]

"""The roller's client for agents: `GET /v1/broker-state` (and, for the collector,
`GET /v1/recovery-timeline`) over mutual TLS, with retries.

Proposal 048's rule shapes the answer: a report when the agent says 200 with a valid body,
otherwise `AgentUnavailable`, and the caller "continues with the previous behaviour". So
nothing here raises for an agent that is down, slow or broken: it is an answer like any other.

Transport errors (refused, reset, timed out) and 5xx answers are retried with the shared retry
policy (an agent that has just started says 503 `no-sample-yet`); 4xx answers and malformed
bodies are not, because asking again will not change them.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx

from rollguard.roller.model import AgentAnswer, AgentReport, AgentUnavailable, Unavailable
from rollguard.shared.errors import WireFormatError
from rollguard.shared.retry import RetryPolicy, RetryStats, retry_async
from rollguard.shared.timeline import TIMELINE_PATH, Page
from rollguard.shared.wire import BROKER_STATE_PATH, BrokerStateReport

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


@dataclass(frozen=True, slots=True)
class Probe:
    """One request to an agent before a roll: its answer, and its clock (the HTTP Date header)
    against ours at the moment the answer came."""

    answer: AgentAnswer
    skew: float | None  # agent's clock minus ours, in seconds; None when it sent no Date


class _ServerError(Exception):
    """A 5xx answer, raised inside the retry loop so that it is retried."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


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
    ) -> None:
        # httpx drops a cert= tuple given beside a CA path: the context carries both.
        self._http = httpx.AsyncClient(verify=tls, timeout=timeout, transport=transport)
        self.policy = policy or RetryPolicy()
        self.stats = stats or RetryStats()
        self._sleep = sleep
        self._uniform = uniform

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
                raise _ServerError(response)
            return response

        try:
            return await retry_async(
                attempt,
                policy,
                operation=operation,
                retriable=(httpx.TransportError, _ServerError),
                stats=self.stats,
                sleep=self._sleep,
                uniform=self._uniform,
            )
        except _ServerError as exc:
            return exc.response
        except TRANSPORT_ERRORS as exc:
            return AgentUnavailable(url, None, classify(exc), describe_transport_error(exc))


def _unavailable(url: str, response: httpx.Response) -> AgentUnavailable:
    reason, message = f"http-{response.status_code}", response.text[:300]
    try:
        body = json.loads(response.content)
        reason, message = str(body["error"]), str(body.get("message", ""))
    except (ValueError, KeyError, TypeError):
        pass
    return AgentUnavailable(url, response.status_code, reason, message)


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
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError, ssl.SSLError)


def classify(exc: BaseException) -> str:
    """`tls-untrusted` when our check of the agent's certificate failed, `tls-refused` when the
    agent sent a TLS alert refusing ours, else `unreachable`: the first two are configuration
    errors (a roll must not start), the last may be a node that is down."""
    cause: BaseException | None = exc
    while cause is not None:
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

"""The Prometheus gate (`--gate-prometheus URL --gate-query PROMQL`, the query repeatable).

Closed while an instant query returns any series: an alert firing for the cluster
(`ALERTS{alertstate="firing",rollguard="hold"}`), an SLO burning, whatever the operator says
must not be made worse by a restart. Its deficit is the number of series, so that alerts
resolving one by one count as progress within --safety-wait.

Unknown is closed: Prometheus unreachable, an HTTP error, an answer that is not Prometheus'
JSON, or `"status": "error"` (a query it cannot parse) each hold the roll with a reason saying
that Prometheus cannot be read. A query whose result is a scalar or a string can never say
"nothing is wrong": closed too, naming the mistake, and the roll fails at --safety-wait.

One HTTP client for every check (its connections kept alive), closed by `aclose` when the roll
ends. TLS is verified against the system's CAs (`rollguard.shared.tls.client_context`); the URL
carries no credentials (`--gate-prometheus` refuses a password) and messages show it without
its query string.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.shared.tls import client_context

logger = logging.getLogger(__name__)

SHOWN_SERIES = 3  # series whose labels a reason lists
MAX_LABELS_TEXT = 160  # characters of one series' labels in a reason
MAX_ERROR_TEXT = 200  # characters of Prometheus' own error in a reason


class PrometheusGate:
    """Closed while `query` returns series at `url` (`GET /api/v1/query`)."""

    kind = GateKind.PROMETHEUS

    def __init__(
        self,
        url: str,
        query: str,
        *,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url, self.name, self.timeout = url.rstrip("/"), query, timeout
        self.shown_url = shown(self.url)
        # A path prefix (a proxy's) and query parameters (a tenant's) are kept around the API's.
        parts = urlsplit(self.url)
        path = f"{parts.path.rstrip('/')}/api/v1/query"
        self.endpoint = urlunsplit(parts._replace(path=path, query="", fragment=""))
        self._params = parse_qsl(parts.query, keep_blank_values=True)
        self._transport = transport  # tests: httpx.MockTransport
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                verify=client_context(None),  # the system's CAs, host names checked
                timeout=self.timeout,
                transport=self._transport,
                headers={"accept": "application/json"},
            )
        return self._http

    async def check(self) -> Closed | None:
        data = await self._query()
        if isinstance(data, str):
            logger.debug("prometheus gate %s: %s: %s", self.name, self.shown_url, data)
            return self._closed(f"Prometheus at {self.shown_url} cannot be read: {data}")
        kind, result = data.get("resultType"), data.get("result")
        if kind not in ("vector", "matrix"):
            return self._closed(
                f"query {self.name} returns a {kind or 'missing'} result: a gate query must "
                "return series (a vector), e.g. ALERTS{...} or a comparison such as x > 0"
            )
        if not isinstance(result, list):
            return self._closed(
                f"Prometheus at {self.shown_url} cannot be read: its {kind} result is not a list"
            )
        if not result:
            return None
        reason = f"query {self.name} {series_text(result)}"
        return Closed(self.kind, self.name, reason, deficit=len(result))

    def _closed(self, reason: str) -> Closed:
        return Closed(self.kind, self.name, reason)

    async def _query(self) -> Mapping[str, Any] | str:
        """The `data` of a successful answer, or why there is none, in a few words."""
        # Prometheus' own limit a little under ours: a slow query answers with its error.
        limit = f"{max(self.timeout * 0.9, 0.1):.3f}"  # seconds
        params = (*self._params, ("query", self.name), ("timeout", limit))
        try:
            answer = await self._client().get(self.endpoint, params=params)
        except httpx.TimeoutException:
            return f"no answer within {self.timeout:g} s"
        except httpx.HTTPError as exc:  # the library's boundary: refused, reset, TLS, ...
            return _transport_error(exc)
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            what = f"HTTP {answer.status_code}" if answer.is_error else "its answer"
            return f"{what}, not Prometheus' JSON"
        if body.get("status") != "success":
            error = f"{body.get('errorType') or 'error'}: {body.get('error') or 'no detail'}"
            return f"HTTP {answer.status_code}, {_short(error, MAX_ERROR_TEXT)}"
        data = body.get("data")
        if not isinstance(data, dict):
            return "a successful answer without data"
        return data

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def series_text(result: Sequence[Any]) -> str:
    """`returns 2 series: {alertname="A", ...}, {...}`: the count, the first ones' labels."""
    labels = [_labels(s.get("metric") if isinstance(s, dict) else None) for s in result]
    text = ", ".join(labels[:SHOWN_SERIES])
    if len(labels) > SHOWN_SERIES:
        text += f" and {len(labels) - SHOWN_SERIES} more"
    return f"returns {len(result)} series: {text}"


def _labels(metric: object) -> str:
    """A series' labels as Prometheus writes them, without `__name__`."""
    if not isinstance(metric, dict):
        return "{}"
    pairs = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return _short("{" + pairs + "}", MAX_LABELS_TEXT)


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _transport_error(exc: httpx.HTTPError) -> str:
    """A connection error in a few words: the socket's own error where httpx wraps one (its
    "All connection attempts failed" hides a refusal), else httpx's text, else its kind."""
    text = str(exc).strip()
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            text = "connection refused"
            break
        if isinstance(cause, socket.gaierror):
            text = f"does not resolve ({cause.strerror or cause})"
            break
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {_short(text, 120)}" if text else "cannot connect"
    return _short(text, 120) if text else type(exc).__name__


def shown(url: str) -> str:
    """The URL for messages: without its query string or fragment (they may hold a token)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="", fragment=""))

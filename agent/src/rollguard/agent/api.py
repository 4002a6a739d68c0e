"""The agent's HTTP surface: the mutual-TLS API and the plain-HTTP probe port.

Handlers only read what the sampler has already rendered; nothing on the request path touches
JMX, formats JSON for a sample, or allocates more than a response. `/v1/broker-state`, the
request rollers repeat, is answered by `BrokerStateEndpoint` alone, with messages prepared once
per sample; `ApiApp` hands it GET and HEAD before Starlette's routing runs.

    API (mTLS)    GET /v1/broker-state       200 report | 503 {"error": reason, "message": ...}
                  GET /v1/recovery-timeline  200 page | 400 bad-parameter | 404 no-timeline
    probe (HTTP)  GET /v1/ready              204 ready | 503 {"error": ..., "message": ...}
                  GET /metrics               Prometheus text format
    both          unknown path or version 404, other methods 405, with a JSON body
"""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rollguard.agent.metrics import CONTENT_TYPE, AgentMetrics
from rollguard.agent.sampler import Sample, Sampler, Unavailable
from rollguard.agent.timeline_store import TimelineStore
from rollguard.shared.timeline import MAX_LIMIT, TIMELINE_PATH
from rollguard.shared.wire import BROKER_STATE_PATH

JSON = "application/json"
NO_STORE = {"cache-control": "no-store"}
_READS = frozenset({"GET", "HEAD"})  # the methods `/v1/broker-state` answers
_NO_BODY: dict[str, object] = {"type": "http.response.body", "body": b""}  # HEAD's


def _error(
    status: int, error: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    body = json.dumps({"error": error, "message": message}).encode()
    return Response(body, status, {**NO_STORE, **(headers or {})}, JSON)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return _error(404, "not-found", f"no such resource: {request.url.path}; {_served(request)}")
    if exc.status_code == 405:
        return _error(
            405,
            "method-not-allowed",
            f"{request.method} is not allowed on {request.url.path}",
            dict(exc.headers or {}),
        )
    return _error(exc.status_code, "http-error", str(exc.detail))


def _served(request: Request) -> str:
    paths = [route.path for route in request.app.routes if isinstance(route, Route)]
    return "this port serves GET " + ", GET ".join(paths)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """A query parameter of ASCII digits (str.isdigit() also takes other scripts' digits, and
    int() refuses more than 4300 of them with its own message), within [low, high]."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    digits = len(str(high))
    if not (0 < len(raw) <= digits and raw.isascii() and raw.isdigit()) or not (
        low <= int(raw) <= high
    ):
        shown = raw if len(raw) <= 24 else f"{raw[:20]}... ({len(raw)} characters)"
        raise ValueError(f"'{name}' must be a whole number from {low} to {high}, got {shown!r}")
    return int(raw)


class BrokerStateEndpoint:
    """`GET /v1/broker-state` (and HEAD): the one place its status, headers and body come from.

    The messages are built once per sample (`_messages`) and sent as they are: a request costs
    the sampler's staleness check, an identity comparison and two sends. An ASGI app rather than
    a Starlette endpoint, so that no Request or Response is built per call.
    """

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self._rendered: tuple[object, dict[str, object], dict[str, object]] | None = None

    def messages(self, method: str) -> tuple[dict[str, object], dict[str, object]]:
        """The response start and body messages for a GET or a HEAD."""
        current = self.sampler.current()
        rendered = self._rendered
        if rendered is None or rendered[0] is not current:
            rendered = self._rendered = (current, *_messages(current))
        return rendered[1], rendered[2] if method == "GET" else _NO_BODY

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start, body = self.messages(scope["method"])
        await send(start)
        await send(body)


def _messages(current: Sample | Unavailable) -> tuple[dict[str, object], dict[str, object]]:
    """The answer to `current` as its two ASGI messages: 200 with the report, or 503 with the
    reason and `retry-after: 1`; JSON, never cached."""
    headers = [
        (b"content-length", str(len(current.body)).encode()),
        (b"content-type", JSON.encode()),
        (b"cache-control", b"no-store"),
    ]
    status = 200
    if not isinstance(current, Sample):
        status = 503
        headers.append((b"retry-after", b"1"))
    start = {"type": "http.response.start", "status": status, "headers": headers}
    return start, {"type": "http.response.body", "body": current.body}


class ApiApp:
    """The API port's app: GET and HEAD of `/v1/broker-state` go straight to its endpoint,
    everything else to the Starlette app.

    The Starlette app routes the same path to the same endpoint object, for what only a router
    knows: 405 with `Allow` for other methods, and the path in the 404 message. Skipping it for
    the one hot request saves its middleware stack and route matching on every call.
    """

    def __init__(self, router: Starlette, broker_state: BrokerStateEndpoint) -> None:
        self.router = router
        self.broker_state = broker_state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == BROKER_STATE_PATH
            and scope["method"] in _READS
        ):
            # The endpoint's own messages, sent here: one coroutine fewer per request.
            start, body = self.broker_state.messages(scope["method"])
            await send(start)
            await send(body)
        else:
            await self.router(scope, receive, send)


def create_api_app(sampler: Sampler, timeline: TimelineStore | None = None) -> ApiApp:
    async def recovery_timeline(request: Request) -> Response:
        if timeline is None:
            return _error(404, "no-timeline", "this agent keeps no timeline (no --data-dir)")
        try:
            after = _int_param(request, "after", 0, 0, 2**63 - 1)
            limit = _int_param(request, "limit", 1000, 1, MAX_LIMIT)
        except ValueError as exc:
            return _error(400, "bad-parameter", str(exc))
        page = await asyncio.to_thread(timeline.read, after, limit)
        return Response(json.dumps(page.to_wire()).encode(), 200, NO_STORE, JSON)

    broker_state = BrokerStateEndpoint(sampler)
    router = Starlette(
        routes=[
            Route(BROKER_STATE_PATH, broker_state, methods=["GET"]),
            Route(TIMELINE_PATH, recovery_timeline, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},
    )
    return ApiApp(router, broker_state)


def create_probe_app(sampler: Sampler, metrics: AgentMetrics) -> Starlette:
    async def ready(request: Request) -> Response:
        current = sampler.current()
        if isinstance(current, Sample):
            state = current.report.broker_state
            if state.is_ready:
                return Response(status_code=204, headers=NO_STORE)
            return _error(503, "not-ready", f"broker state is {state.name} ({int(state)})")
        return Response(current.body, 503, NO_STORE, JSON)

    async def metrics_page(request: Request) -> Response:
        return Response(metrics.render(), 200, NO_STORE, CONTENT_TYPE)

    return Starlette(
        routes=[
            Route("/v1/ready", ready, methods=["GET"]),
            Route("/metrics", metrics_page, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},
    )

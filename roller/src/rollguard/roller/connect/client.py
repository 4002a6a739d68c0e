"""A client for Kafka Connect's REST API (httpx): TLS, mutual TLS, basic auth, and the shared
retry policy for transport errors, 409 (Connect answers 409 while its workers rebalance) and the
500 of a request forwarded to a leader that is gone.

Every failure is a `ConnectError` naming the connector (when there is one), the request's URL,
the HTTP status and Connect's own message, on one line; nothing is retried that asking again
cannot fix. An answer that is not the JSON Connect sends (a proxy's HTML error page, a body of
another shape) is such an error too, never a traceback: it is translated here, at the one
boundary, and the commands and the watcher only see `ConnectError`.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from rollguard.roller.agent_client import TRANSPORT_ERRORS, describe_transport_error
from rollguard.roller.connect.status import ConnectorStatus, RestartOutcome, TaskState
from rollguard.roller.connect.versions import parse_version
from rollguard.shared.errors import RollguardError
from rollguard.shared.retry import RetryPolicy, RetryStats, retry_async
from rollguard.shared.tls import client_context, trusting_nothing

# ConnectorStatus and TaskState are rollguard.roller.connect.status's, known from here too.
__all__ = ["ConnectClient", "ConnectError", "ConnectorStatus", "TaskState", "parse_version"]

OPERATION = "connect-rest"
T = TypeVar("T")
STATUS_PENDING = 5.0  # a new connector's status appears within a few hundred ms (4.3.1)
STATUS_PENDING_POLL = 0.1


class ConnectError(RollguardError):
    def __init__(self, message: str, status: int | None = None, connector: str | None = None):
        super().__init__(message)
        self.status = status
        self.connector = connector


class _Rebalancing(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__("HTTP 409")
        self.response = response


@dataclass(frozen=True, slots=True)
class ConnectAuth:
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never printed


def redact(url: str) -> str:
    """The URL for messages and logs: a password in its user info becomes `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


class ConnectClient:
    def __init__(
        self,
        url: str,
        policy: RetryPolicy,
        *,
        tls: ssl.SSLContext | None = None,
        auth: ConnectAuth | None = None,
        timeout: float = 30.0,
        stats: RetryStats | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{redact(url)!r} is not an http:// or https:// URL of Kafka Connect")
        self.url = url.rstrip("/")
        self.shown_url = redact(self.url)  # for every message: never the password
        basic = None
        if auth is not None and auth.user is not None:
            basic = httpx.BasicAuth(auth.user, auth.password or "")
        if tls is None:
            # https: the system's CAs, TLS 1.2+ (as every client here). http: no TLS, and a
            # context that trusts nothing, so that nothing could pass unchecked; httpx would
            # otherwise load its CA bundle for every client (60 ms of CPU) to use it never.
            tls = client_context(None) if parts.scheme == "https" else trusting_nothing()
        self._http = httpx.AsyncClient(
            base_url=self.url,
            verify=tls,
            auth=basic,
            timeout=timeout,
            headers={"accept": "application/json"},
        )
        self.policy = policy
        self.stats = stats or RetryStats()
        self._sleep = sleep
        self._uniform = uniform

    async def __aenter__(self) -> ConnectClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- the API --------------------------------------------------------------------------
    async def version(self) -> str:
        """The worker's Kafka version (`GET /`), e.g. "3.6.1"."""
        return str(await self._read("GET", "/", None, lambda body: body["version"]))

    async def connectors(self) -> list[str]:
        def names(body: Any) -> list[str]:
            if not isinstance(body, list):
                raise ValueError("not a list of connector names")
            return sorted(str(name) for name in body)

        return await self._read("GET", "/connectors", None, names)

    async def statuses(self) -> list[ConnectorStatus]:
        """Every connector's status in one call (`?expand=status`, Kafka 2.3 and later)."""

        def parse(body: Any) -> list[ConnectorStatus]:
            if not isinstance(body, dict):
                raise ValueError("not an object of connectors")
            return [ConnectorStatus.from_json(body[name]["status"]) for name in sorted(body)]

        return await self._read("GET", "/connectors", None, parse, params={"expand": "status"})

    async def status(self, connector: str) -> ConnectorStatus:
        """The connector's status. A connector just created has none for a few hundred ms
        (404 "No status found"): when the connector itself exists, asked again for up to
        `STATUS_PENDING` seconds before that 404 is the answer."""
        path = f"/connectors/{_name(connector)}/status"
        waited = 0.0
        while True:
            try:
                return await self._read("GET", path, connector, ConnectorStatus.from_json)
            except ConnectError as exc:
                if (
                    exc.status != 404
                    or waited >= STATUS_PENDING
                    or not await self.exists(connector)
                ):
                    raise
            await self._sleep(STATUS_PENDING_POLL)
            waited += STATUS_PENDING_POLL

    async def exists(self, connector: str) -> bool:
        """`GET /connectors/{name}`: 200 or 404."""
        try:
            await self._call("GET", f"/connectors/{_name(connector)}", connector)
        except ConnectError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def task_ids(self, connector: str) -> list[int]:
        """The task configs (`GET /connectors/{name}/tasks`): the tasks Connect means to run;
        none while the connector is STOPPED, and none until a started connector made them."""

        def parse(body: Any) -> list[int]:
            if not isinstance(body, list):
                raise ValueError("not a list of task configs")
            return sorted(int(t["id"]["task"]) for t in body)

        return await self._read("GET", f"/connectors/{_name(connector)}/tasks", connector, parse)

    async def restart(
        self, connector: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> RestartOutcome:
        """KIP-745: one call restarts the connector and (some of) its tasks."""
        params = {"includeTasks": _flag(include_tasks), "onlyFailed": _flag(only_failed)}
        path = f"/connectors/{_name(connector)}/restart"
        response = await self._call("POST", path, connector, params=params)
        if response.status_code == 202:
            states = _parsed(response, connector, ConnectorStatus.from_json)
            return RestartOutcome(202, states)
        return RestartOutcome(response.status_code)

    async def restart_task(self, connector: str, task: int) -> None:
        await self._call("POST", f"/connectors/{_name(connector)}/tasks/{task}/restart", connector)

    async def stop(self, connector: str) -> None:
        """KIP-875 (3.5): asynchronous; the status shows STOPPED a little later."""
        await self._call("PUT", f"/connectors/{_name(connector)}/stop", connector)

    async def pause(self, connector: str) -> None:
        await self._call("PUT", f"/connectors/{_name(connector)}/pause", connector)

    async def resume(self, connector: str) -> None:
        await self._call("PUT", f"/connectors/{_name(connector)}/resume", connector)

    async def offsets(self, connector: str) -> Any:
        def body_of(body: Any) -> Any:
            if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
                raise ValueError('not an object with an "offsets" list')
            return body

        path = f"/connectors/{_name(connector)}/offsets"
        return await self._read("GET", path, connector, body_of)

    async def alter_offsets(self, connector: str, body: Any) -> str:
        path = f"/connectors/{_name(connector)}/offsets"
        return _message(await self._call("PATCH", path, connector, json_body=body))

    async def reset_offsets(self, connector: str) -> str:
        path = f"/connectors/{_name(connector)}/offsets"
        return _message(await self._call("DELETE", path, connector))

    # ---- plumbing -------------------------------------------------------------------------
    async def _read(
        self,
        method: str,
        path: str,
        connector: str | None,
        parse: Callable[[Any], T],
        *,
        params: dict[str, str] | None = None,
    ) -> T:
        response = await self._call(method, path, connector, params=params)
        return _parsed(response, connector, parse)

    async def _call(
        self,
        method: str,
        path: str,
        connector: str | None = None,
        *,
        params: dict[str, str] | None = None,
        json_body: Any = None,
    ) -> httpx.Response:
        async def attempt() -> httpx.Response:
            response = await self._http.request(method, path, params=params, json=json_body)
            if response.status_code == 409 or _leader_unreachable(response):
                raise _Rebalancing(response)
            return response

        about = f"connector {connector}: " if connector else ""
        try:
            response = await retry_async(
                attempt,
                self.policy,
                operation=OPERATION,
                retriable=(httpx.TransportError, _Rebalancing),
                stats=self.stats,
                sleep=self._sleep,
                uniform=self._uniform,
            )
        except _Rebalancing as exc:
            response = exc.response
        except TRANSPORT_ERRORS as exc:
            cause = describe_transport_error(exc)
            raise ConnectError(
                f"{about}Kafka Connect at {self.shown_url} is unreachable: {cause}", None, connector
            ) from None
        if response.status_code >= 400:
            raise ConnectError(
                f"{about}{method} {_shown(response)}: HTTP {response.status_code}: "
                f"{_error_text(response)}",
                response.status_code,
                connector,
            )
        return response


def _leader_unreachable(response: httpx.Response) -> bool:
    """500 "IO Error trying to forward REST request: ...": the worker asked forwards requests
    that only the group's leader may serve (stop, resume, config, offsets), and the leader is
    gone (crashed, or leaving) until the group chooses another: retried like a 409, since the
    request never reached a leader."""
    return response.status_code == 500 and "trying to forward REST request" in response.text


def _name(connector: str) -> str:
    """Connector names go into paths percent-encoded (MirrorMaker 2's hold '->')."""
    return quote(connector, safe="")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _shown(response: httpx.Response) -> str:
    return redact(str(response.request.url))


def _one_line(text: str, limit: int = 200) -> str:
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _parsed(response: httpx.Response, connector: str | None, parse: Callable[[Any], T]) -> T:
    """`parse(json body)`; a ConnectError naming the URL and HTTP status when the body is not
    JSON or not of the expected shape (a proxy's page, another service on the port)."""
    about = f"connector {connector}: " if connector else ""
    where = f"{response.request.method} {_shown(response)}: HTTP {response.status_code}"
    try:
        body = json.loads(response.content)
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        sample = _one_line(response.text, 80) or "an empty body"
        raise ConnectError(
            f"{about}{where}: the answer is not JSON ({kind}): {sample}",
            response.status_code,
            connector,
        ) from None
    try:
        return parse(body)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConnectError(
            f"{about}{where}: an answer this client cannot read: {_one_line(str(exc), 120)}",
            response.status_code,
            connector,
        ) from None


def _message(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content)
    except ValueError:
        return _one_line(response.text)
    return _one_line(str(body.get("message", "")) if isinstance(body, dict) else str(body))


def _error_text(response: httpx.Response) -> str:
    """Connect's `message` when it sent its JSON error shape; its text on one line otherwise
    (401 is plain text; a proxy's 502 is HTML)."""
    try:
        body = json.loads(response.content)
        if isinstance(body, dict) and "message" in body:
            return _one_line(str(body["message"]), 300)
    except ValueError:
        kind = response.headers.get("content-type", "")
        if "html" in kind:
            return f"the answer is not JSON ({kind}): {_one_line(response.text, 80)}"
    return _one_line(response.text, 300) or response.reason_phrase

"""A client for Kafka Connect's REST API (httpx): TLS, mutual TLS, basic auth, and the shared
retry policy for transport errors and 409 (Connect answers 409 while its workers rebalance).

Every failure is a `ConnectError` naming the connector (when there is one), the HTTP status and
Connect's own message; nothing is retried that asking again cannot fix.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from rollguard.roller.agent_client import TRANSPORT_ERRORS, describe_transport_error
from rollguard.shared.errors import RollguardError
from rollguard.shared.retry import RetryPolicy, RetryStats, retry_async

OPERATION = "connect-rest"


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
class TaskState:
    id: int
    state: str
    worker: str = ""
    trace: str = ""


@dataclass(frozen=True, slots=True)
class ConnectorStatus:
    name: str
    state: str
    worker: str = ""
    trace: str = ""
    tasks: tuple[TaskState, ...] = ()
    type: str = ""

    @property
    def failed(self) -> bool:
        return self.state == "FAILED" or any(t.state == "FAILED" for t in self.tasks)

    @property
    def failed_tasks(self) -> list[int]:
        return [t.id for t in self.tasks if t.state == "FAILED"]

    @classmethod
    def from_json(cls, body: Any) -> ConnectorStatus:
        try:
            connector = body["connector"]
            tasks = tuple(
                TaskState(
                    int(t["id"]),
                    str(t["state"]),
                    str(t.get("worker_id", "")),
                    str(t.get("trace", "")),
                )
                for t in body.get("tasks", [])
            )
            return cls(
                str(body["name"]),
                str(connector["state"]),
                str(connector.get("worker_id", "")),
                str(connector.get("trace", "")),
                tasks,
                str(body.get("type", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConnectError(f"Connect sent a status this client cannot read: {exc!r}") from None

    def describe(self) -> str:
        tasks = ", ".join(f"task {t.id} {t.state}" for t in self.tasks) or "no tasks"
        return f"{self.name}: connector {self.state}, {tasks}"


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """202: the restart plan's states (RESTARTING for what is restarted); 204: the connector
    alone was restarted, with no body."""

    status: int
    states: ConnectorStatus | None = None


@dataclass(frozen=True, slots=True)
class ConnectAuth:
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never printed


VERSION = re.compile(r"(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int]:
    match = VERSION.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


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
        self._http = httpx.AsyncClient(
            base_url=self.url,
            verify=tls if tls is not None else True,
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
        body = (await self._call("GET", "/")).json()
        return str(body.get("version", "")) if isinstance(body, dict) else ""

    async def connectors(self) -> list[str]:
        body = (await self._call("GET", "/connectors")).json()
        if not isinstance(body, list):
            raise ConnectError("Connect's connector list is not a list")
        return sorted(str(name) for name in body)

    async def status(self, connector: str) -> ConnectorStatus:
        response = await self._call("GET", f"/connectors/{_name(connector)}/status", connector)
        return ConnectorStatus.from_json(response.json())

    async def restart(
        self, connector: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> RestartOutcome:
        """KIP-745: one call restarts the connector and (some of) its tasks."""
        params = {"includeTasks": _flag(include_tasks), "onlyFailed": _flag(only_failed)}
        path = f"/connectors/{_name(connector)}/restart"
        response = await self._call("POST", path, connector, params=params)
        if response.status_code == 202:
            return RestartOutcome(202, ConnectorStatus.from_json(response.json()))
        return RestartOutcome(response.status_code)

    async def restart_task(self, connector: str, task: int) -> None:
        await self._call("POST", f"/connectors/{_name(connector)}/tasks/{task}/restart", connector)

    async def stop(self, connector: str) -> None:
        await self._call("PUT", f"/connectors/{_name(connector)}/stop", connector)

    async def offsets(self, connector: str) -> Any:
        return (
            await self._call("GET", f"/connectors/{_name(connector)}/offsets", connector)
        ).json()

    async def alter_offsets(self, connector: str, body: Any) -> str:
        path = f"/connectors/{_name(connector)}/offsets"
        return _message(await self._call("PATCH", path, connector, json_body=body))

    async def reset_offsets(self, connector: str) -> str:
        path = f"/connectors/{_name(connector)}/offsets"
        return _message(await self._call("DELETE", path, connector))

    # ---- plumbing -------------------------------------------------------------------------
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
            if response.status_code == 409:
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
                f"{about}{method} {path}: HTTP {response.status_code}: {_error_text(response)}",
                response.status_code,
                connector,
            )
        return response


def _name(connector: str) -> str:
    """Connector names go into paths percent-encoded (MirrorMaker 2's hold '->')."""
    return quote(connector, safe="")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("message", "")) if isinstance(body, dict) else str(body)[:300]


def _error_text(response: httpx.Response) -> str:
    """Connect's `message` when it sent its JSON error shape; its text otherwise (401 is plain)."""
    try:
        body = json.loads(response.content)
        if isinstance(body, dict) and "message" in body:
            return str(body["message"])
    except ValueError:
        pass
    return response.text.strip()[:300] or response.reason_phrase

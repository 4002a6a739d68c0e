"""A fake Kafka Connect REST API for tests: real HTTP(S) on 127.0.0.1, real paths, real JSON.

The roller restarts failed connectors (KIP-745, Strimzi proposal 055) and manages MirrorMaker 2
offsets (KIP-875, Strimzi proposal 083) through Connect's REST API. A real Kafka Connect runs
here too, from Kafka's own jars (`rollguard.peers.realconnect`, tests/real/test_real_connect.py);
this peer is for what a real worker cannot be made to do on demand: the workers of older API
generations, a reverse proxy's page, a worker that never answers or times out, a 409 at a chosen
moment, hours of backoff on a fake clock. `ConnectSim` answers that API the way a Connect worker
does, so the real httpx-based client runs unmodified against it, over plain HTTP, TLS or mutual
TLS, with or without HTTP basic auth.

Where each behaviour comes from (Apache Kafka 3.6 sources unless said otherwise; the timings are
a real Kafka Connect 4.3.1 distributed worker's, measured by polling `GET .../status` every 5 ms,
in seconds after the REST call returned):

- Errors are `{"error_code": N, "message": "..."}` (`ConnectExceptionMapper`); unknown paths and
  wrong methods get Jersey's `HTTP 404 Not Found` / `HTTP 405 Method Not Allowed` in that shape.
- Unknown connectors get 404 with the message of the herder method behind each endpoint; they
  differ: "Connector X not found" (info, config, tasks, offsets), "No status found for connector X"
  (status), "Unknown connector: X" (restarts), "Unknown connector X" (stop, pause, resume).
- `POST /connectors/{c}/restart`: with `includeTasks` and `onlyFailed` both false (the default)
  only the connector instance is restarted, synchronously, and the answer is 204; otherwise 202
  with the plan: the status where every targeted instance shows RESTARTING, keeping its old trace
  (KIP-745, `ConnectorsResource`, `RestartPlan`). The restart happens after the answer: the status
  keeps showing each targeted instance's old state and trace for `restart_lag` (measured 0.01 to
  0.05), then RESTARTING without a trace for `restart_delay` (measured 0.013 to 0.02), then the
  state it starts in (RUNNING, or FAILED again). When the connector instance is restarted with
  its tasks, it goes first: it shows RESTARTING for `task_restart_after` (measured 0.19; or
  `restart_delay` if longer) while its tasks still show their old state, and the tasks'
  RESTARTING starts `task_restart_after` after the connector's. A poller at 250 ms usually never
  sees RESTARTING. Before Kafka 3.0 the query parameters are ignored: 204, connector only.
  `POST .../tasks/{t}/restart` is synchronous too (204): the new state shows at once (a task
  armed to fail again goes from FAILED to FAILED, as a 4.x task failing in start() does).
- `PUT /connectors/{c}/stop` (Kafka >= 3.5) answers 204. The task configs are gone at once
  (`GET .../tasks` is empty) and the target state is STOPPED; the connector shows STOPPED after
  `state_lag` (measured 0.01) while its tasks are still listed in their old state for
  `stop_delay` more (measured 0.1 to 0.4), then no task is listed.
- `PUT .../pause` and `.../resume` answer 202; the connector and its tasks show PAUSED (RUNNING)
  after `state_lag` (measured 0.015). Resuming (or pausing) a STOPPED connector brings its task
  configs back at once, shows the connector RUNNING (PAUSED) after `state_lag` (measured 0.02)
  with no task listed for `resume_delay` more (measured 0.05 to 0.1), then lists the tasks.
- `GET /connectors/{c}/offsets` (>= 3.5); `PATCH` and `DELETE` (>= 3.6) answer 200 with Connect's
  message, or 400 unless the connector is STOPPED (field notes; `modifyConnectorOffsetsChecks`).
  MirrorMaker 2 connectors override `alterOffsets` and get the short message; other connectors
  get the "Connect framework-managed offsets" one (`Worker.completeModifyOffsetsCallback`).
- During a rebalance the requests whose herder call checks `checkRebalanceNeeded` (connector
  info, config and tasks, both restarts, offset alter/reset) answer 409 with Connect's "stale
  configuration" message; status, offsets reads, stop, pause, resume and listings do not.
- `time_out_next` makes herder requests answer 500 "Request timed out" (`HerderRequestHandler`;
  Connect gives up after 90 s, the simulator after `after` seconds).
- A request body that is not labelled application/json gets Jersey's 415 (`@Consumes`).
- Basic auth (`JaasBasicAuthFilter`): a missing or wrong `Authorization` answers 401 with the bare
  text `User cannot access the resource.` (not the JSON error shape), labelled application/json
  as Jersey does for the matched JSON resource; `POST /connectors/{c}/tasks` is exempt.
- Connector names arrive percent-encoded (`east-%3Ewest.MirrorSourceConnector`); each path segment
  is decoded on its own, as a JAX-RS path parameter is.

Not simulated: creating, reconfiguring and deleting connectors, plugins, loggers, topic tracking,
internal endpoints (501), validation of MirrorMaker 2 offset shapes. Malformed request JSON gets
500 with the parser's message, as Jackson's errors do in Connect, but not Jackson's wording.

Test controls beyond Connect: `WORKER_VERSIONS` names a worker of each API generation (2.8,
3.4, 3.5, current); `answer_next` puts a raw answer in front of the next requests, as a reverse
proxy does (nginx's 502 page by default); `SilentServer` accepts requests and never answers.

State changes that take time are due times checked on every request and every control call (no
background thread); the clock is injectable. Every delay can be set to 0 (`set_delays`): a change
whose time has come is applied before the answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import copy
import json
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response

from rollguard.peers.processes import Pki
from rollguard.peers.served import Served

logger = logging.getLogger(__name__)

Json = dict[str, Any]

MIRROR_PACKAGE = "org.apache.kafka.connect.mirror"
MIRROR_SOURCE = f"{MIRROR_PACKAGE}.MirrorSourceConnector"
MIRROR_CHECKPOINT = f"{MIRROR_PACKAGE}.MirrorCheckpointConnector"
MIRROR_HEARTBEAT = f"{MIRROR_PACKAGE}.MirrorHeartbeatConnector"
DEFAULT_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
DEFAULT_WORKERS = ("connect-0.connect:8083", "connect-1.connect:8083")
DEFAULT_TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: simulated failure\n"
    "\tat org.apache.kafka.connect.runtime.WorkerTask.doRun(WorkerTask.java:202)\n"
    "\tat org.apache.kafka.connect.runtime.WorkerTask.run(WorkerTask.java:259)\n"
)

# Messages exactly as Connect sends them.
STALE_CONFIG = (
    "Cannot complete request momentarily due to stale configuration "
    "(typically caused by a concurrent config change)"
)
TIMED_OUT = "Request timed out"
UNAUTHORIZED = "User cannot access the resource."
NO_SUCH_PATH = "HTTP 404 Not Found"
WRONG_METHOD = "HTTP 405 Method Not Allowed"
NOT_JSON = "HTTP 415 Unsupported Media Type"
NO_OFFSETS_GIVEN = "Partitions / offsets need to be provided for an alter offsets request"
NULL_PARTITION = "Source partitions may not be null"
NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be "
    "done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' "
    "endpoint"
)

# Kafka versions that brought the endpoints.
RESTART_PARAMS_SINCE = (3, 0)  # KIP-745
STOP_SINCE = (3, 5)  # KIP-875: PUT stop, GET offsets
MODIFY_OFFSETS_SINCE = (3, 6)  # KIP-875: PATCH and DELETE offsets

# The workers tests run against, one per API generation: restart parameters ignored (2.8),
# KIP-745 without stop or offsets (3.4), stop and offset reads without offset changes (3.5),
# everything (current).
WORKER_VERSIONS = {"2.8": "2.8.2", "3.4": "3.4.1", "3.5": "3.5.2", "current": "3.9.1"}

# What a reverse proxy in front of Connect answers when the worker is down.
PROXY_PAGE = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)

# (route, method) pairs served by a herder request: these can time out (500) ...
HERDER_CALLS = frozenset(
    {
        ("connector", "GET"),
        ("config", "GET"),
        ("tasks", "GET"),
        ("restart", "POST"),
        ("task_restart", "POST"),
        ("stop", "PUT"),
        ("offsets", "GET"),
        ("offsets", "PATCH"),
        ("offsets", "DELETE"),
    }
)
# ... and these also check for a pending rebalance first (409).
REBALANCE_CHECKED = HERDER_CALLS - {("stop", "PUT"), ("offsets", "GET")}
# Real endpoints the simulator does not serve: 501 rather than a misleading 404 or 405.
NOT_SIMULATED = frozenset(
    {("connectors", "POST"), ("connector", "DELETE"), ("config", "PUT"), ("tasks", "POST")}
)


class State(StrEnum):
    """States of a connector or task instance, as `GET /connectors/{c}/status` shows them."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"


class SeenRequest(NamedTuple):
    """One request the simulator answered: `path` decoded, `raw_path` as sent, `query` with the
    last value of each parameter, `body` parsed from JSON (None if empty or not JSON)."""

    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    body: Any
    status: int


class Restart(NamedTuple):
    """One restart of an instance: `task` is None for the connector instance; `at` on the clock."""

    connector: str
    task: int | None
    at: float


@dataclass
class _Instance:
    state: State
    worker_id: str
    trace: str | None = None
    restart_at: float | None = None  # a planned restart: the old state shows until then
    due: float | None = None  # end of RESTARTING


@dataclass
class _Connector:
    name: str
    config: dict[str, str]
    type: str
    tasks_max: int
    target: str  # STARTED, PAUSED or STOPPED
    connector: _Instance
    tasks: list[_Instance]
    offsets: list[Json]
    manages_offsets: bool
    configs: int = 0  # task configs (`GET .../tasks`); the status lists `tasks`
    target_due: float | None = None  # when the connector shows its new target state
    tasks_due: float | None = None  # when the status's task list follows the task configs
    # (task or None) -> [restarts left to fail (None: all), trace]
    fail_next: dict[int | None, list[Any]] = field(default_factory=dict)


class _Canned(NamedTuple):
    status: int
    body: str
    content_type: str


class _Fail(Exception):
    """An error answer: `{"error_code": code, "message": message}`, sent `after` seconds late."""

    def __init__(self, code: int, message: str, *, after: float = 0.0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.after = after


def parse_version(version: str) -> tuple[int, ...]:
    """`"3.6.1"` -> (3, 6, 1); a suffix such as `-SNAPSHOT` is ignored."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-")[0])[:3])


def mirror_source_offset(cluster: str, topic: str, partition: int, offset: int) -> Json:
    """A MirrorSourceConnector offset entry (Strimzi proposal 083)."""
    return {
        "partition": {"cluster": cluster, "partition": partition, "topic": topic},
        "offset": {"offset": offset},
    }


def mirror_checkpoint_offset(group: str, topic: str, partition: int, offset: int = 0) -> Json:
    """A MirrorCheckpointConnector offset entry (Strimzi proposal 083)."""
    return {
        "partition": {"partition": partition, "topic": topic, "group": group},
        "offset": {"offset": offset},
    }


def mirror_heartbeat_offset(source: str, target: str, offset: int = 0) -> Json:
    """A MirrorHeartbeatConnector offset entry (Strimzi proposal 083)."""
    return {
        "partition": {"sourceClusterAlias": source, "targetClusterAlias": target},
        "offset": {"offset": offset},
    }


def _partition_key(partition: Any) -> str:
    return json.dumps(partition, sort_keys=True)


class ConnectSim:
    """A fake Kafka Connect worker; see the module docstring for what it simulates.

    `tls` serves HTTPS with the PKI's server certificate; `require_client_cert` makes it mutual
    TLS (a client without a certificate from the PKI's CA is cut off during the handshake).
    `basic_auth=(user, password)` requires those credentials on every request.

    The delays, seconds on `clock`, default to a real Connect 4.3.1 worker's (module docstring):
    after a 202 restart each targeted instance shows its old state for `restart_lag`, then
    RESTARTING for `restart_delay`, except that when the connector instance is restarted with its
    tasks, it shows RESTARTING for `task_restart_after` (or `restart_delay` if longer) and its
    tasks' RESTARTING starts `task_restart_after` after the connector's. After a stop, pause or
    resume the connector shows its old state for `state_lag`. A stopped connector still lists its
    tasks for `stop_delay` after it shows STOPPED; a resumed (or paused) STOPPED connector lists
    none for `resume_delay` after it shows RUNNING (PAUSED). Every public method is thread-safe.
    """

    def __init__(
        self,
        *,
        version: str = "3.6.1",
        commit: str = "5e3c2b738d253ff5",
        kafka_cluster_id: str = "oGYm2dQOQ5Ct8o0yHcyTPw",
        workers: Sequence[str] = DEFAULT_WORKERS,
        restart_lag: float = 0.03,
        restart_delay: float = 0.015,
        task_restart_after: float = 0.19,
        state_lag: float = 0.015,
        stop_delay: float = 0.3,
        resume_delay: float = 0.08,
        tls: Pki | None = None,
        require_client_cert: bool = True,
        basic_auth: tuple[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.version = version
        self.commit = commit
        self.kafka_cluster_id = kafka_cluster_id
        self.workers = tuple(workers)
        self.restart_lag = restart_lag
        self.restart_delay = restart_delay
        self.task_restart_after = task_restart_after
        self.state_lag = state_lag
        self.stop_delay = stop_delay
        self.resume_delay = resume_delay
        self.tls = tls
        self.require_client_cert = require_client_cert
        self.basic_auth = basic_auth
        self.clock = clock
        self.url = ""
        self._lock = threading.RLock()
        self._connectors: dict[str, _Connector] = {}
        self._requests: list[SeenRequest] = []
        self._restarts: list[Restart] = []
        self._rebalance: int | None = 0  # 409s left; None: until end_rebalance()
        self._timeouts = 0
        self._timeout_after = 0.0
        self._late: dict[tuple[str, str], float] = {}
        self._canned: list[_Canned] = []
        self._served: Served | None = None

    # --- running ---------------------------------------------------------------------------------

    def start(self) -> ConnectSim:
        tls = self._server_context(self.tls) if self.tls is not None else None
        self._served = Served(self._asgi, "connect-sim-http", tls=tls)
        self.url = self._served.url
        logger.info("fake Kafka Connect %s serving on %s", self.version, self.url)
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    def __enter__(self) -> ConnectSim:
        return self if self._served is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _server_context(self, pki: Pki) -> ssl.SSLContext:
        from rollguard.shared.tls import server_context

        context = server_context(pki.server_cert, pki.server_key, pki.ca)
        if not self.require_client_cert:
            # A certificate is still checked against the CA when a client offers one.
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def client_context(self, *, with_cert: bool = True) -> ssl.SSLContext:
        """A client context for httpx's `verify=`: trusts the PKI's CA and presents the roller's
        certificate (unless `with_cert=False`)."""
        from rollguard.shared.tls import client_context

        if self.tls is None:
            raise RuntimeError("this ConnectSim serves plain HTTP")
        if not with_cert:
            return client_context(self.tls.ca)
        return client_context(self.tls.ca, self.tls.client_cert, self.tls.client_key)

    # --- what tests set up -----------------------------------------------------------------------

    def add_connector(
        self,
        name: str,
        *,
        tasks: int = 1,
        state: str = State.RUNNING,
        task_states: Sequence[str] | None = None,
        connector_class: str = DEFAULT_CLASS,
        config: Mapping[str, str] | None = None,
        connector_type: str | None = None,
        offsets: Iterable[Json] = (),
        manages_offsets: bool | None = None,
    ) -> None:
        """Add a connector whose instance is in `state` (STOPPED and PAUSED set the target state
        too) and whose `tasks` tasks are RUNNING, or in `task_states` (a STOPPED connector has no
        task configs and lists no task; resumed, it gets `tasks`). FAILED instances get
        `DEFAULT_TRACE`. The type is "sink" when the class name says Sink, else "source", unless
        `connector_type` is given. `manages_offsets` (what `alterOffsets` returns) defaults to
        True for the MirrorMaker 2 connectors, which override it, else False."""
        connector_state = State(state)
        target = {State.STOPPED: "STOPPED", State.PAUSED: "PAUSED"}.get(connector_state, "STARTED")
        listed = 0 if connector_state is State.STOPPED else tasks
        states = [State(s) for s in task_states] if task_states is not None else None
        if states is not None and len(states) != listed:
            raise ValueError(f"{len(states)} task states for {listed} tasks")
        default_task = State.PAUSED if target == "PAUSED" else State.RUNNING
        full_config = {
            "connector.class": connector_class,
            "tasks.max": str(max(tasks, 1)),
            "name": name,
            **(config or {}),
        }
        simple_class = connector_class.rsplit(".", 1)[-1]
        with self._lock:
            if name in self._connectors:
                raise ValueError(f"connector {name!r} already exists")
            self._connectors[name] = _Connector(
                name=name,
                config=full_config,
                type=connector_type or ("sink" if "Sink" in simple_class else "source"),
                tasks_max=max(tasks, 1),
                target=target,
                connector=self._instance(connector_state, 0),
                tasks=[
                    self._instance(states[i] if states else default_task, i + 1)
                    for i in range(listed)
                ],
                offsets=[copy.deepcopy(dict(o)) for o in offsets],
                manages_offsets=(
                    connector_class.startswith(f"{MIRROR_PACKAGE}.Mirror")
                    if manages_offsets is None
                    else manages_offsets
                ),
                configs=listed,
            )

    def add_mirror_maker(
        self,
        source: str = "east",
        target: str = "west",
        *,
        tasks: int = 1,
        topics: Sequence[str] = ("orders",),
        groups: Sequence[str] = ("billing",),
    ) -> tuple[str, str, str]:
        """Add the three MirrorMaker 2 connectors of the route `source->target`, named as Strimzi
        names them, with offsets of the shapes in Strimzi proposal 083; returns their names."""
        prefix = f"{source}->{target}"
        names = (
            f"{prefix}.MirrorSourceConnector",
            f"{prefix}.MirrorCheckpointConnector",
            f"{prefix}.MirrorHeartbeatConnector",
        )
        aliases = {"source.cluster.alias": source, "target.cluster.alias": target}
        self.add_connector(
            names[0],
            tasks=tasks,
            connector_class=MIRROR_SOURCE,
            config={**aliases, "topics": ",".join(topics)},
            offsets=[mirror_source_offset(source, t, 0, 42) for t in topics],
        )
        self.add_connector(
            names[1],
            tasks=tasks,
            connector_class=MIRROR_CHECKPOINT,
            config={**aliases, "groups": ",".join(groups)},
            offsets=[mirror_checkpoint_offset(g, t, 0) for g in groups for t in topics],
        )
        self.add_connector(
            names[2],
            tasks=1,
            connector_class=MIRROR_HEARTBEAT,
            config=aliases,
            offsets=[mirror_heartbeat_offset(source, target)],
        )
        return names

    def remove_connector(self, name: str) -> None:
        with self._lock:
            del self._connectors[name]

    def set_state(
        self, name: str, state: str, *, task: int | None = None, trace: str | None = None
    ) -> None:
        """Put the connector instance (or task `task`) in `state`; FAILED gets `trace` or
        `DEFAULT_TRACE`. Does not change the target state: use the REST calls for that."""
        new = State(state)
        with self._lock:
            instance = self._find(name, task)
            instance.state = new
            instance.restart_at = instance.due = None
            instance.trace = (trace or DEFAULT_TRACE) if new is State.FAILED else None

    def fail_connector(self, name: str, trace: str = DEFAULT_TRACE) -> None:
        self.set_state(name, State.FAILED, trace=trace)

    def fail_task(self, name: str, task: int, trace: str = DEFAULT_TRACE) -> None:
        self.set_state(name, State.FAILED, task=task, trace=trace)

    def fail_after_restart(
        self,
        name: str,
        task: int | None = None,
        *,
        times: int | None = 1,
        trace: str = DEFAULT_TRACE,
    ) -> None:
        """The next `times` restarts of the connector instance (or of task `task`) end FAILED
        instead of RUNNING; `times=None`: every restart from now on; `times=0` disarms."""
        with self._lock:
            self._connectors[name].fail_next[task] = [times, trace]

    def start_rebalance(self, requests: int | None = None) -> None:
        """Answer 409 to the next `requests` rebalance-checked requests, or to all of them until
        `end_rebalance()` when None (see `REBALANCE_CHECKED`)."""
        with self._lock:
            self._rebalance = requests

    def end_rebalance(self) -> None:
        with self._lock:
            self._rebalance = 0

    def time_out_next(self, requests: int = 1, *, after: float = 0.0) -> None:
        """Answer the next `requests` herder requests (`HERDER_CALLS`) with Connect's 500
        "Request timed out", each `after` seconds late (Connect waits 90 s)."""
        with self._lock:
            self._timeouts = requests
            self._timeout_after = after

    def answer_late(self, route: str, method: str, after: float) -> None:
        """Carry out the next `method` request to `route` (a name from `_match`: "stop",
        "resume", ...) at once but send its answer `after` seconds late, as a worker behind a
        slow network or proxy does: the change is made while the client still waits."""
        with self._lock:
            self._late[(route, method)] = after

    def answer_next(
        self,
        requests: int = 1,
        *,
        status: int = 502,
        body: str = PROXY_PAGE,
        content_type: str = "text/html",
    ) -> None:
        """Answer the next `requests` requests (any path) with this raw answer instead of
        Connect's, as a proxy in front of it would (default: nginx's 502 page), or with a body
        of the wrong shape (`status=200, body="[]", content_type="application/json"`)."""
        with self._lock:
            self._canned.extend([_Canned(status, body, content_type)] * requests)

    def set_delays(
        self,
        *,
        restart: float | None = None,
        stop: float | None = None,
        restart_lag: float | None = None,
        task_restart_after: float | None = None,
        state_lag: float | None = None,
        resume: float | None = None,
    ) -> None:
        """Change the delays for the restarts, stops, pauses and resumes from now on: `restart`
        is `restart_delay`, `stop` is `stop_delay`, `resume` is `resume_delay`, the others are
        named as the attributes (see the class docstring). None keeps a delay."""
        with self._lock:
            if restart is not None:
                self.restart_delay = restart
            if stop is not None:
                self.stop_delay = stop
            if restart_lag is not None:
                self.restart_lag = restart_lag
            if task_restart_after is not None:
                self.task_restart_after = task_restart_after
            if state_lag is not None:
                self.state_lag = state_lag
            if resume is not None:
                self.resume_delay = resume

    def set_version(self, version: str, commit: str | None = None) -> None:
        with self._lock:
            self.version = version
            if commit is not None:
                self.commit = commit

    def set_offsets(self, name: str, offsets: Iterable[Json]) -> None:
        with self._lock:
            self._connectors[name].offsets = [copy.deepcopy(dict(o)) for o in offsets]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # --- what tests inspect ----------------------------------------------------------------------

    @property
    def requests(self) -> list[SeenRequest]:
        """Every request answered so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def calls(self, method: str | None = None, path: str | None = None) -> list[SeenRequest]:
        """The requests with this method and/or decoded path."""
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or r.path == path)
        ]

    @property
    def restart_log(self) -> list[Restart]:
        with self._lock:
            return list(self._restarts)

    def restarts(self, name: str, task: int | None = None) -> int:
        """How often the connector instance (or task `task`) of `name` was restarted."""
        with self._lock:
            return sum(1 for r in self._restarts if r.connector == name and r.task == task)

    def restart_counts(self) -> dict[tuple[str, int | None], int]:
        with self._lock:
            counts: dict[tuple[str, int | None], int] = {}
            for r in self._restarts:
                counts[(r.connector, r.task)] = counts.get((r.connector, r.task), 0) + 1
            return counts

    def state(self, name: str, task: int | None = None) -> State:
        with self._lock:
            self._advance()
            return self._find(name, task).state

    def status(self, name: str) -> Json:
        """The body `GET /connectors/{name}/status` would answer now."""
        with self._lock:
            self._advance()
            return self._status(self._connectors[name])

    def offsets(self, name: str) -> list[Json]:
        with self._lock:
            return copy.deepcopy(self._connectors[name].offsets)

    # --- the model -------------------------------------------------------------------------------

    def _instance(self, state: State, slot: int) -> _Instance:
        worker = self.workers[slot % len(self.workers)]
        return _Instance(state, worker, DEFAULT_TRACE if state is State.FAILED else None)

    def _find(self, name: str, task: int | None) -> _Instance:
        connector = self._connectors[name]
        return connector.connector if task is None else connector.tasks[task]

    def _supports(self, since: tuple[int, int]) -> bool:
        return parse_version(self.version) >= since

    def _advance(self) -> None:
        """Apply every state change whose time has come: for each connector, its new target
        state, then its task list, then the restarts."""
        now = self.clock()
        for c in self._connectors.values():
            if c.target_due is not None and now >= c.target_due:
                c.target_due = None
                self._show_target(c)
            if c.tasks_due is not None and now >= c.tasks_due:
                c.tasks_due = None
                state = State.PAUSED if c.target == "PAUSED" else State.RUNNING
                c.tasks = [self._instance(state, i + 1) for i in range(c.configs)]
            for key, instance in [(None, c.connector), *enumerate(c.tasks)]:
                if instance.restart_at is not None and now >= instance.restart_at:
                    instance.restart_at = None
                    instance.state, instance.trace = State.RESTARTING, None
                if instance.due is not None and now >= instance.due:
                    self._settle(c, key, instance)

    def _show_target(self, c: _Connector) -> None:
        """The connector (and, paused or resumed, its tasks) shows its target state."""
        if c.target == "STOPPED":
            # A stop ends a restart in progress; the tasks keep their state until unlisted.
            c.connector = _Instance(State.STOPPED, c.connector.worker_id)
            return
        for instance in [c.connector, *c.tasks]:
            if c.target == "PAUSED" and instance.state in (State.RUNNING, State.STOPPED):
                instance.state = State.PAUSED
            elif c.target == "STARTED" and instance.state in (State.PAUSED, State.STOPPED):
                instance.state = State.RUNNING

    def _settle(self, c: _Connector, task: int | None, instance: _Instance) -> None:
        """A restarted instance starts: FAILED if armed to, else the state its target implies."""
        instance.restart_at = instance.due = None
        armed = c.fail_next.get(task)
        if armed is not None and (armed[0] is None or armed[0] > 0):
            if armed[0] is not None:
                armed[0] -= 1
            instance.state, instance.trace = State.FAILED, armed[1]
            return
        instance.trace = None
        if c.target == "PAUSED":
            instance.state = State.PAUSED
        elif c.target == "STOPPED" and task is None:
            instance.state = State.STOPPED
        else:
            instance.state = State.RUNNING

    def _restart(
        self, c: _Connector, task: int | None, *, sync: bool, after: float = 0.0, lasts: float = 0.0
    ) -> None:
        """Restart an instance now (`sync`), or plan it: the old state shows for `after`
        seconds, then RESTARTING for `lasts`."""
        instance = c.connector if task is None else c.tasks[task]
        now = self.clock()
        self._restarts.append(Restart(c.name, task, now))
        logger.info("connect sim: restarting %s %s", c.name, "connector" if task is None else task)
        if sync:
            self._settle(c, task, instance)
        else:
            instance.restart_at = now + after
            instance.due = instance.restart_at + lasts

    def _status(self, c: _Connector) -> Json:
        return {
            "name": c.name,
            "connector": _render(c.connector),
            "tasks": [{"id": i, **_render(t)} for i, t in enumerate(c.tasks)],
            "type": c.type,
        }

    def _info(self, c: _Connector) -> Json:
        return {
            "name": c.name,
            "config": dict(c.config),
            "tasks": [{"connector": c.name, "task": i} for i in range(c.configs)],
            "type": c.type,
        }

    # --- HTTP ------------------------------------------------------------------------------------

    async def _asgi(self, scope: Json, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        body = await request.body()
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        with self._lock:
            delay, response = self._handle(
                request.method,
                raw_path,
                request.query_params.multi_items(),
                request.headers.get("authorization"),
                request.headers.get("content-type"),
                body,
            )
        if delay:
            await asyncio.sleep(delay)
        await response(scope, receive, send)

    def _handle(
        self,
        method: str,
        raw_path: str,
        query: list[tuple[str, str]],
        authorization: str | None,
        content_type: str | None,
        body: bytes,
    ) -> tuple[float, Response]:
        segments = [unquote(s) for s in raw_path.split("/")[1:]]
        if segments and segments[-1] == "":
            segments.pop()  # Jersey matches "/connectors/" like "/connectors"
        path = "/" + "/".join(segments)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        delay = 0.0
        if self._canned:
            canned = self._canned.pop(0)
            response = Response(canned.body, canned.status, media_type=canned.content_type)
            self._requests.append(
                SeenRequest(method, path, raw_path, dict(query), parsed, canned.status)
            )
            return 0.0, response
        try:
            self._advance()
            # Jersey matches the resource first: an unknown path or method never reaches the
            # authentication filter, which runs after matching.
            route, name, task, allowed = self._match(segments)
            if method not in allowed:
                raise _Fail(405, WRONG_METHOD)
            # ConnectorsResource @Consumes JSON: a body of another type (none given means
            # application/octet-stream) does not match.
            media_type = (content_type or "application/octet-stream").split(";")[0].strip()
            if body and route != "root" and media_type.lower() != "application/json":
                raise _Fail(415, NOT_JSON)
            exempt = method == "POST" and route == "tasks"  # internal, signed by the workers
            if not exempt and not self._authorized(authorization):
                response = Response(UNAUTHORIZED, 401, media_type="application/json")
            else:
                code, answer = self._serve(route, method, name, task, query, body)
                response = _json(code, answer)
                delay = self._late.pop((route, method), 0.0)
        except _Fail as failure:
            delay = failure.after
            response = _json(failure.code, {"error_code": failure.code, "message": failure.message})
        except Exception as exc:  # a bug in the simulator: answer like Connect's mapper does
            logger.exception("connect sim: %s %s failed", method, path)
            response = _json(500, {"error_code": 500, "message": repr(exc)})
        self._requests.append(
            SeenRequest(method, path, raw_path, dict(query), parsed, response.status_code)
        )
        return delay, response

    def _authorized(self, header: str | None) -> bool:
        if self.basic_auth is None:
            return True
        scheme, _, credentials = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(credentials, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, colon, password = decoded.partition(":")
        return bool(colon and user) and (user, password) == self.basic_auth

    def _serve(
        self,
        route: str,
        method: str,
        name: str | None,
        task: int | None,
        query: list[tuple[str, str]],
        body: bytes,
    ) -> tuple[int, Any]:
        if (route, method) in NOT_SIMULATED:
            raise _Fail(501, f"{method} {route} is not simulated by ConnectSim")
        if route == "root":
            return 200, self._server_info()
        if route == "connectors":
            return 200, self._list([v for k, v in query if k == "expand"])
        assert name is not None
        if route == "status":
            return 200, self._status(self._known(name, f"No status found for connector {name}"))
        if route == "task_status":
            return 200, self._task_status(name, task)
        if route in ("pause", "resume"):
            self._pause_or_resume(self._known(name, f"Unknown connector {name}"), route)
            return 202, None
        entries: list[Json] = []
        if route == "offsets" and method == "PATCH":
            # ConnectorsResource checks the body before it asks the herder.
            entries = _offsets_body(body)
        self._herder_checks(route, method)
        if route == "connector":
            return 200, self._info(self._known(name, f"Connector {name} not found"))
        if route == "config":
            return 200, dict(self._known(name, f"Connector {name} not found").config)
        if route == "tasks":
            return 200, _task_configs(self._known(name, f"Connector {name} not found"))
        if route == "restart":
            return self._restart_connector(self._known(name, f"Unknown connector: {name}"), query)
        if route == "task_restart":
            self._restart_task(name, task)
            return 204, None
        if route == "stop":
            self._stop(self._known(name, f"Unknown connector {name}"))
            return 204, None
        c = self._known(name, f"Connector {name} not found")
        if method == "GET":
            return 200, {"offsets": copy.deepcopy(c.offsets)}
        # The STOPPED rule: the target state is STOPPED and the task configs are gone.
        if c.target != "STOPPED" or c.configs:
            raise _Fail(400, NOT_STOPPED.format(name=name))
        if method == "PATCH":
            _alter(c, entries)
            return 200, {"message": _modified(c, "altered")}
        c.offsets = []
        return 200, {"message": _modified(c, "reset")}

    def _match(self, segments: list[str]) -> tuple[str, str | None, int | None, frozenset[str]]:
        """(route, connector name, task id, methods allowed) for this version's paths."""
        s = segments
        if not s:
            return "root", None, None, frozenset({"GET"})
        if s[0] != "connectors":
            raise _Fail(404, NO_SUCH_PATH)
        if len(s) == 1:
            return "connectors", None, None, frozenset({"GET", "POST"})
        name = s[1]
        if len(s) == 2:
            return "connector", name, None, frozenset({"GET", "DELETE"})
        routes = {
            "config": {"GET", "PUT"},
            "status": {"GET"},
            "tasks": {"GET", "POST"},
            "restart": {"POST"},
            "pause": {"PUT"},
            "resume": {"PUT"},
        }
        if self._supports(STOP_SINCE):
            routes["stop"] = {"PUT"}
            routes["offsets"] = {"GET"}
        if self._supports(MODIFY_OFFSETS_SINCE):
            routes["offsets"] = {"GET", "PATCH", "DELETE"}
        if len(s) == 3 and s[2] in routes:
            return s[2], name, None, frozenset(routes[s[2]])
        if len(s) == 5 and s[2] == "tasks" and re.fullmatch(r"-?\d+", s[3]):
            if s[4] == "status":
                return "task_status", name, int(s[3]), frozenset({"GET"})
            if s[4] == "restart":
                return "task_restart", name, int(s[3]), frozenset({"POST"})
        raise _Fail(404, NO_SUCH_PATH)

    def _known(self, name: str, message: str) -> _Connector:
        c = self._connectors.get(name)
        if c is None:
            raise _Fail(404, message)
        return c

    def _herder_checks(self, route: str, method: str) -> None:
        """The herder's checks, in its order: a request that never completes times out; then
        a pending rebalance."""
        if (route, method) not in HERDER_CALLS:
            return
        if self._timeouts > 0:
            self._timeouts -= 1
            # The 500 is sent late, like Connect's after its request timeout.
            raise _Fail(500, TIMED_OUT, after=self._timeout_after)
        if (route, method) in REBALANCE_CHECKED and self._rebalance != 0:
            if self._rebalance is not None:
                self._rebalance -= 1
            raise _Fail(409, STALE_CONFIG)

    def _server_info(self) -> Json:
        return {
            "version": self.version,
            "commit": self.commit,
            "kafka_cluster_id": self.kafka_cluster_id,
        }

    def _list(self, expand: list[str]) -> Any:
        if not expand:
            return sorted(self._connectors)
        out: dict[str, Json] = {}
        for name, c in sorted(self._connectors.items()):
            entry: Json = {}
            for kind in expand:
                if kind == "status":
                    entry["status"] = self._status(c)
                elif kind == "info":
                    entry["info"] = self._info(c)
            out[name] = entry
        return out

    def _task_status(self, name: str, task: int | None) -> Json:
        c = self._connectors.get(name)
        if c is None or task is None or not 0 <= task < len(c.tasks):
            raise _Fail(404, f"No status found for task {name}-{task}")
        return {"id": task, **_render(c.tasks[task])}

    def _restart_connector(self, c: _Connector, query: list[tuple[str, str]]) -> tuple[int, Any]:
        params = dict(query)
        # JAX-RS builds a Boolean with Boolean.valueOf: only "true" (any case) is true.
        include_tasks = params.get("includeTasks", "").lower() == "true"
        only_failed = params.get("onlyFailed", "").lower() == "true"
        if not self._supports(RESTART_PARAMS_SINCE) or not (include_tasks or only_failed):
            # The old restart: the connector instance only, done before the answer.
            self._restart(c, None, sync=True)
            return 204, None
        # The answer shows the plan: targeted instances RESTARTING, with the trace they had.
        plan = self._status(c)
        connector = not only_failed or c.connector.state is State.FAILED
        tasks = [
            i
            for i, t in enumerate(c.tasks)
            if include_tasks and (not only_failed or t.state is State.FAILED)
        ]
        # Done after the answer, the connector first, then its tasks.
        if connector:
            plan["connector"]["state"] = State.RESTARTING
            # Restarted with its tasks, it shows RESTARTING while they are stopped.
            lasts = max(self.restart_delay, self.task_restart_after if tasks else 0.0)
            self._restart(c, None, sync=False, after=self.restart_lag, lasts=lasts)
        tasks_after = self.restart_lag + (self.task_restart_after if connector else 0.0)
        for i in tasks:
            plan["tasks"][i]["state"] = State.RESTARTING
            self._restart(c, i, sync=False, after=tasks_after, lasts=self.restart_delay)
        self._advance()
        return 202, plan

    def _restart_task(self, name: str, task: int | None) -> None:
        c = self._known(name, f"Unknown connector: {name}")
        if task is None or not 0 <= task < min(c.configs, len(c.tasks)):
            raise _Fail(404, f"Unknown task: {name}-{task}")
        self._restart(c, task, sync=True)

    def _stop(self, c: _Connector) -> None:
        """The task configs go at once; the connector shows STOPPED after `state_lag`, and its
        tasks are unlisted `stop_delay` later."""
        c.target = "STOPPED"
        c.configs = 0
        c.target_due = self.clock() + self.state_lag
        c.tasks_due = c.target_due + self.stop_delay if c.tasks else None
        self._advance()

    def _pause_or_resume(self, c: _Connector, action: str) -> None:
        """The target state changes at once and shows after `state_lag`; a STOPPED connector
        generates its task configs again at once, and lists its tasks `resume_delay` later."""
        if c.target == "STOPPED":
            c.configs = c.tasks_max
        c.target = "PAUSED" if action == "pause" else "STARTED"
        c.target_due = self.clock() + self.state_lag
        # Tasks still listed from before a stop stay listed (and follow the target state).
        c.tasks_due = c.target_due + self.resume_delay if len(c.tasks) != c.configs else None
        self._advance()


def _render(instance: _Instance) -> Json:
    out: Json = {"state": str(instance.state), "worker_id": instance.worker_id}
    if instance.trace:
        out["trace"] = instance.trace
    return out


def _task_configs(c: _Connector) -> list[Json]:
    task_class = c.config["connector.class"].removesuffix("Connector") + "Task"
    return [
        {"id": {"connector": c.name, "task": i}, "config": {"task.class": task_class}}
        for i in range(c.configs)
    ]


def _offsets_body(body: bytes) -> list[Json]:
    try:
        parsed = json.loads(body) if body else None
    except ValueError as exc:
        raise _Fail(500, str(exc)) from exc
    if parsed is not None and not isinstance(parsed, dict):
        raise _Fail(500, "Cannot deserialize a ConnectorOffsets from a non-object body")
    entries = (parsed or {}).get("offsets")
    if not entries:
        raise _Fail(400, NO_OFFSETS_GIVEN)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _Fail(500, "Cannot deserialize the 'offsets' field: a list of objects is expected")
    return entries


def _alter(c: _Connector, entries: list[Json]) -> None:
    """Write each entry; a null offset removes the partition (a tombstone)."""
    by_key = {_partition_key(e["partition"]): e for e in c.offsets}
    for entry in entries:
        partition, offset = entry.get("partition"), entry.get("offset")
        if offset is not None and partition is None:
            raise _Fail(500, NULL_PARTITION)
        if offset is not None and not isinstance(offset, dict):
            raise _Fail(500, "Cannot deserialize an offset: a JSON object is expected")
    for entry in entries:
        key = _partition_key(entry.get("partition"))
        if entry.get("offset") is None:
            by_key.pop(key, None)
        else:
            by_key[key] = {"partition": entry["partition"], "offset": entry["offset"]}
    c.offsets = copy.deepcopy(list(by_key.values()))


def _modified(c: _Connector, how: str) -> str:
    if c.manages_offsets:
        return f"The offsets for this connector have been {how} successfully"
    return (
        f"The Connect framework-managed offsets for this connector have been {how} successfully. "
        f"However, if this connector manages offsets externally, they will need to be manually "
        f"{how} in the system that the connector uses."
    )


def _json(code: int, obj: Any) -> Response:
    if obj is None:
        return Response(status_code=code)
    body = json.dumps(obj, separators=(",", ":")).encode()
    return Response(body, status_code=code, media_type="application/json")


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections, reads what is sent, and never
    answers: a hung Connect worker or a proxy holding requests. `received` counts the bytes
    read, so a test can wait until a client's request is in flight."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._lock = threading.Lock()
        self._received = 0
        self._open: list[socket.socket] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def received(self) -> int:
        with self._lock:
            return self._received

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._received += len(data)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._sock.close()
        with self._lock:
            for conn in self._open:
                conn.close()
        self._thread.join(5)

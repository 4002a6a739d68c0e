"""What Kafka Connect says of a connector: its status (the connector's state and each task's, as
`GET /connectors/{name}/status` reports them) and the outcome of a restart. Values only: the
client (`rollguard.roller.connect.client`) reads them from Connect's JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SETTLING = frozenset({"RESTARTING", "UNASSIGNED"})  # states on the way to another one


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

    @property
    def settled(self) -> bool:
        """Nothing is RESTARTING or UNASSIGNED (on its way to another state)."""
        return self.state not in SETTLING and all(t.state not in SETTLING for t in self.tasks)

    @classmethod
    def from_json(cls, body: Any) -> ConnectorStatus:
        """The status body; ValueError when it is not one (the client names the URL)."""
        try:
            connector = body["connector"]
            tasks = tuple(
                TaskState(
                    int(t["id"]),
                    str(t["state"]),
                    str(t.get("worker_id", "")),
                    str(t.get("trace", "")),
                )
                for t in body.get("tasks") or []
            )
            return cls(
                str(body["name"]),
                str(connector["state"]),
                str(connector.get("worker_id", "")),
                str(connector.get("trace", "")),
                tasks,
                str(body.get("type", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a connector status ({type(exc).__name__}: {exc})") from None

    def describe(self) -> str:
        return f"{self.name}: {self.states()}"

    def states(self) -> str:
        """ "connector RUNNING, task 0 RUNNING" (no name)."""
        tasks = ", ".join(f"task {t.id} {t.state}" for t in self.tasks) or "no tasks"
        return f"connector {self.state}, {tasks}"

    def to_json(self) -> dict[str, Any]:
        def instance(state: str, worker: str, trace: str) -> dict[str, Any]:
            out = {"state": state, "worker_id": worker}
            return {**out, "trace": trace} if trace else out

        return {
            "name": self.name,
            "type": self.type,
            "connector": instance(self.state, self.worker, self.trace),
            "tasks": [{"id": t.id, **instance(t.state, t.worker, t.trace)} for t in self.tasks],
        }


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """202: the restart plan's states (RESTARTING for what is restarted); 204: the connector
    alone was restarted, with no body."""

    status: int
    states: ConnectorStatus | None = None

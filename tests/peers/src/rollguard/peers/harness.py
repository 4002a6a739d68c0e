"""One roll harness for the tests: whatever cluster a test rolls, the same words run `rollguard
roll` and `rollguard plan` on it and read what they did.

    target = InventoryRoll(cluster, tmp_path)  # a ProcessCluster or a RealCluster: its inventory
    target = PodRoll(...)                      # pods (`harness_pods`): a namespace and a selector
    target = SimRoll(cluster, tmp_path)        # the simulator (`harness_sim`), in process

    done = target.roll("--only", "kafka-1")    # to its end, as one `Done`
    assert done.returncode == 0, done.stderr
    assert done.restarted() == ["kafka-1"]     # by the roll's own events
    assert target.restarted() == ["kafka-1"]   # by the cluster's own record, never the roll's
    with target.start() as running:            # in the background, for a test that acts meanwhile
        running.until(lambda events: ..., what="the recovery waited for")
        running.signal(signal.SIGINT)
        done = running.wait()

A command line is the operator's (`commandline.rollguard_args`), the installed `rollguard` in a
process of its own; the simulator's roll is the production `Roller` in process
(`sim.make_roller`). What is one cluster's own stays its own: a real cluster's recovery hold and
install record, the simulated cluster's restart plans, the simulator's virtual clock (its
`cluster`), a pod roll's Lease and pods (`PodRoll`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal as signals
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self, TypeVar

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.processes import BIN, wait_until
from rollguard.peers.rollcluster import RollCluster
from rollguard.peers.spawn import Stops

__all__ = [
    "OWN", "CommandRoll", "Done", "Events", "InventoryRoll", "Running", "kafka_peer", "read_events",
]  # fmt: skip

T = TypeVar("T")
Event = dict[str, Any]
OWN = ""  # the roll id a target was made with (None: no --roll-id at all)
_RUNS = itertools.count(1)


class Events(tuple[Event, ...]):
    """A roll's events, in order, and the few ways tests read them."""

    def actions(self) -> list[str]:
        return [e["action"] for e in self]

    def of(self, action: str, node: str | None = None) -> list[Event]:
        """The events of `action` (of `node` only, if given)."""
        return [e for e in self if e["action"] == action and node in (None, e.get("node"))]

    def restarted(self) -> list[str]:
        """The nodes of its restart events, in order: what the roll says it restarted."""
        return [str(e["node"]) for e in self.of("restart")]

    def closed(self, gate: str, after: str = "") -> list[tuple[int, Event]]:
        """The gate-closed events of `gate` (index, event), after the first event whose action
        is `after` (none: from the start; an `after` not seen yet: none)."""
        actions = self.actions()
        if after and after not in actions:
            return []
        start = actions.index(after) if after else -1
        return [(i, e) for i, e in enumerate(self)
                if i > start and e["action"] == "gate-closed" and e["gate"] == gate]  # fmt: skip


def read_events(path: Path) -> Events:
    """The events of a roll's file, each whole line (one still being written is left out)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Events(json.loads(line) for line in lines if line.endswith("}"))


@dataclass(frozen=True)
class Done:
    """What one `rollguard roll` or `plan` did: its exit code and output, and what it left (its
    events and journal, read when it ended; none for a plan, which writes nothing)."""

    args: tuple[str, ...]  # the command line (empty in process)
    returncode: int
    stdout: str
    stderr: str
    events: Events = field(default_factory=Events)
    journal: Mapping[str, Any] | None = None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def actions(self) -> list[str]:
        return self.events.actions()

    def of(self, action: str, node: str | None = None) -> list[Event]:
        return self.events.of(action, node)

    def restarted(self) -> list[str]:
        return self.events.restarted()

    def entries(self) -> list[Event]:
        """stdout's JSON objects, one a line (`plan --output json`)."""
        return [json.loads(line) for line in self.stdout.splitlines()]


def _roll_id(extra: Sequence[str], given: str | None) -> str | None:
    """The roll a command names: its last --roll-id or --resume, else `given`."""
    found = given
    for flag, value in itertools.pairwise(extra):
        if flag in ("--roll-id", "--resume"):
            found = value
    return found


class CommandRoll(ABC):
    """A roll target whose commands are the operator's: `rollguard roll`/`plan`, each in its
    own process. `folder` holds the state dir (`folder/state`) and started commands' output."""

    folder: Path
    roll_id: str
    timeout: float

    @property
    def state(self) -> Path:
        return self.folder / "state"

    def environment(self) -> Mapping[str, str] | None:
        """What its commands run with (None: this process's own environment)."""
        return None

    @abstractmethod
    def command(self, command: str = "roll", *extra: str, roll_id: str | None = OWN) -> list[str]:
        """`rollguard COMMAND` on this cluster as its operator types it."""

    @abstractmethod
    def where(self) -> list[str]:
        """The flags that find a roll's lease (`rollguard roll pause`): state dir or namespace."""

    @abstractmethod
    def journal(self, roll_id: str | None = None) -> Mapping[str, Any] | None:
        """The roll's journal as it is stored now (None: none)."""

    @abstractmethod
    def restarted(self) -> list[str]:
        """The nodes the cluster itself was asked to restart, in order: its own record."""

    def using(self, **changes: Any) -> Self:
        """The same target with some of its fields changed (credentials, agents, inventory)."""
        return replace(self, **changes)  # type: ignore[type-var]

    def events(self, roll_id: str | None = None) -> Events:
        return read_events(self.state / f"events-{roll_id or self.roll_id}.jsonl")

    def roll(self, *extra: str, roll_id: str | None = OWN, timeout: float | None = None) -> Done:
        """`rollguard roll`, to its end."""
        return self.run(self.command("roll", *extra, roll_id=roll_id), timeout)

    def plan(self, *extra: str, roll_id: str | None = OWN, timeout: float | None = None) -> Done:
        """`rollguard plan` with the flags a roll would have: it writes nothing."""
        return self.run(self.command("plan", *extra, roll_id=roll_id), timeout)

    def pause(self, *extra: str, roll_id: str | None = OWN) -> Done:
        """`rollguard roll pause` of the roll (another process than the roller's)."""
        return self._control("pause", extra, roll_id)

    def resume(self, *extra: str, roll_id: str | None = OWN) -> Done:
        """`rollguard roll resume`: the paused roll goes on."""
        return self._control("resume", extra, roll_id)

    def _control(self, action: str, extra: Sequence[str], roll_id: str | None) -> Done:
        named = self.roll_id if roll_id == OWN else roll_id
        args = [str(BIN / "rollguard"), "roll", action, "--roll-id", str(named), *self.where()]
        args += extra
        done = subprocess.run(args, capture_output=True, text=True, timeout=60,
                              env=self.environment())  # fmt: skip
        return Done(tuple(args), done.returncode, done.stdout, done.stderr)

    def run(self, args: Sequence[str], timeout: float | None = None) -> Done:
        """Any command line (one a test changed), with this target's environment, to its end;
        its events and journal are those of the roll it names."""
        done = subprocess.run(list(args), capture_output=True, text=True,
                              env=self.environment(), timeout=timeout or self.timeout)  # fmt: skip
        return self.done(args, done.returncode, done.stdout, done.stderr)

    def done(self, args: Sequence[str], code: int, out: str, err: str) -> Done:
        named = _roll_id(args, self.roll_id) or self.roll_id
        if list(args[1:2]) == ["plan"]:  # a plan writes nothing
            return Done(tuple(args), code, out, err)
        return Done(tuple(args), code, out, err, self.events(named), self.journal(named))

    def start(self, *extra: str, command: str = "roll", roll_id: str | None = OWN) -> Running:
        """`rollguard COMMAND` in the background; `Running` says what it does meanwhile."""
        return Running(self, self.command(command, *extra, roll_id=roll_id))


class Running(Stops):
    """A `rollguard` command in the background, its stdout and stderr in files beside the state
    dir, its events read as it runs; killed when its `with` ends (a roll left running restarts
    nodes under the next test)."""

    def __init__(self, target: CommandRoll, args: Sequence[str]) -> None:
        self.target, self.args = target, list(args)
        self.roll_id = _roll_id(args, target.roll_id) or target.roll_id
        run = next(_RUNS)
        target.folder.mkdir(parents=True, exist_ok=True)
        self._out = target.folder / f"rollguard-{run}.stdout"
        self._err = target.folder / f"rollguard-{run}.stderr"
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self.started = time.monotonic()
            env = target.environment()
            self.process = subprocess.Popen(self.args, stdout=out, stderr=err, env=env)

    def events(self) -> Events:
        return self.target.events(self.roll_id)

    def stdout(self) -> str:
        return self._out.read_text()

    def stderr(self) -> str:
        return self._err.read_text()

    def output(self) -> str:
        return self.stdout() + self.stderr()

    def poll(self) -> int | None:
        return self.process.poll()

    def until(self, found: Callable[[Events], T], timeout: float = 60, what: str = "an event") -> T:
        """Wait until `found(events so far)` is truthy, and return it; fail at once, with the
        output, if the command ends before."""

        def seen() -> T | None:
            ended = self.process.poll() is not None  # before the read: then the file is whole
            result = found(self.events())
            if not result and ended:
                raise AssertionError(
                    f"the roll ended ({self.process.returncode}) before {what}:\n{self.output()}"
                )
            return result

        return wait_until(seen, timeout, interval=0.2, what=what)

    def until_event(self, action: str, node: str | None = None, timeout: float = 60) -> Event:
        """The first event of `action` (of `node`, if given), waited for."""
        what = f"a {action} event" + (f" of {node}" if node else "")
        return self.until(lambda seen: (seen.of(action, node) or [{}])[0], timeout, what)

    def until_gate_closed(self, gate: str, timeout: float = 90, *, after: str = "") -> Event:
        """The first gate-closed event of `gate` (after the first event of `after`, if given),
        waited for."""
        what = f"a gate-closed event of {gate}"
        return self.until(lambda seen: [e for _, e in seen.closed(gate, after)][:1], timeout, what)[
            0
        ]

    def signal(self, sig: signals.Signals) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float = 180) -> Done:
        """Its end, as a `Done`; killed, failing the test, if it outlasts `timeout`."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the roll outlasted {timeout} s:\n{self.output()}") from None
        return self.target.done(self.args, code, self.stdout(), self.stderr())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@dataclass(frozen=True)
class InventoryRoll(CommandRoll):
    """Rolls of a cluster on hosts (`RollCluster`: a ProcessCluster, a RealCluster) through the
    inventory it writes: its bootstrap, its client certificate, its timings (the simulated
    cluster's quick ones, the roll's defaults on a real one); `inventory` another one."""

    cluster: RollCluster
    folder: Path
    roll_id: str = "t1"
    inventory: Path | None = None
    timeout: float = 240

    def command(self, command: str = "roll", *extra: str, roll_id: str | None = OWN) -> list[str]:
        cluster = self.cluster
        return rollguard_args(
            command,
            inventory=self.inventory or cluster.inventory(),
            bootstrap=cluster.bootstrap,
            tls=cluster.pki,
            state_dir=self.state,
            timings=cluster.timings,
            roll_id=self.roll_id if roll_id == OWN else roll_id,
            extra=extra,
        )

    def where(self) -> list[str]:
        return ["--state-dir", str(self.state)]

    def lease(self) -> Mapping[str, Any] | None:
        """The roll's lease file in the state dir, as it is now (None: no roll holds it)."""
        path = self.state / "lease.json"
        return json.loads(path.read_text()) if path.exists() else None

    def journal(self, roll_id: str | None = None) -> Mapping[str, Any] | None:
        path = self.state / f"roll-{roll_id or self.roll_id}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def restarted(self) -> list[str]:
        return [self.cluster.node_name(n) for n in self.cluster.restarted()]


@contextlib.contextmanager
def kafka_peer(**options: Any) -> Iterator[KafkaClusterSim]:
    """The Kafka-protocol peer of a small cluster (what pods or an inventory's nodes stand for):
    nodes 0-2, each a broker and a voter (node 0 leads the quorum), topic `orders` (3
    partitions, replication 3, min ISR 2); `options`, its others (`broker_configs`...). Started,
    and stopped at the end."""
    kafka = KafkaClusterSim(
        broker_ids=[0, 1, 2], voters=[0, 1, 2], topics={"orders": TopicSpec(3, 3, 2)}, **options
    )
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()

"""One roll of one cluster, run by the controller exactly as `rollguard roll` runs it
(`roll.cli.session.opened`: the same options, checks, journal, lease, gates and events), with
what the controller adds around it: the cluster's own Lease, the hold annotation as a gate,
the roll's events told as Kubernetes Events (`telling.Teller`), and its record read at every
save (the journal's `RollRecord`, whose node records the loop moves) for the status annotation.

How it ended is an `Ending`, never an exception: `completed` (what it did), `refused` (a
ConfigError: nothing was done, from a setting the options refused to a permission the Role
lacks or a ConfigMap that does not parse), `waiting` (another process holds the cluster's
Lease: tried again when it expires), `failed` (the roll's own reason). A roll cancelled (the
controller stopping, or no longer the leader) is interrupted as a SIGTERM interrupts a roll:
its journal says so, its Lease is released, the next leader resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from rollguard.roller.controller.access import CONTROLLER
from rollguard.roller.controller.hold import HoldGate
from rollguard.roller.controller.metrics import ControllerMetrics
from rollguard.roller.controller.status import ControllerPhase, Status, working_on
from rollguard.roller.controller.telling import CLUSTER, Notice, Teller, ended
from rollguard.roller.kubernetes import API_ERRORS
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.cli.session import opened
from rollguard.roller.roll.metrics import RollMetrics
from rollguard.roller.roll.roller import RollResult
from rollguard.roller.roll.stores.journal import RollRecord
from rollguard.roller.roll.stores.lease import LeaseHeld
from rollguard.roller.roll.watched import WatchedJournal
from rollguard.shared.dataset import Event
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.retry import RetryStats
from rollguard.shared.wire import format_time

__all__ = ["Announcer", "Ending", "Poster", "RollJob", "run_roll"]

logger = logging.getLogger(__name__)

STATUS_EVERY = 5.0  # seconds between status annotations while nothing is said
LAST_WORDS = 30.0  # seconds the roll's last notices may take to post, once it has ended
_END = None  # what ends the telling task, after every event before it


class Poster(Protocol):
    """Posts one Kubernetes Event on `obj` (apiVersion, kind, metadata: name, namespace, uid):
    `kopf.event`'s signature."""

    def __call__(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None: ...


Publish = Callable[[Status], Awaitable[None]]


@dataclass(frozen=True)
class RollJob:
    namespace: str
    cluster: str
    statefulsets: Mapping[str, str]  # name -> uid: the Events' objects
    roll_id: str
    resume: bool
    why: str
    options: RollOptions
    lease: str


@dataclass(frozen=True)
class Ending:
    state: str  # completed, refused, waiting, failed
    reason: str
    result: RollResult | None = None
    retry_in: float | None = None  # waiting: seconds until the Lease held by another expires


class Announcer:
    """Posts notices on the cluster's StatefulSets, and a node's on its own StatefulSet and its
    pod (the pod as it is when the notice is posted: its UID read then)."""

    def __init__(
        self, client: Any, poster: Poster, namespace: str, statefulsets: Mapping[str, str]
    ) -> None:
        self.client = client
        self.poster = poster
        self.namespace = namespace
        self.statefulsets = dict(statefulsets)

    def _ref(self, api: str, kind: str, name: str, uid: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": self.namespace, **({"uid": uid} if uid else {})}
        return {"apiVersion": api, "kind": kind, "metadata": meta}

    def owner(self, node: str) -> str | None:
        """The StatefulSet whose pod `node` is (`<statefulset>-<ordinal>`)."""
        owners = [s for s in self.statefulsets if node.startswith(f"{s}-")]
        return max(owners, key=len) if owners else None

    async def post(self, notice: Notice, only: str | None = None) -> None:
        """`only`: that StatefulSet alone, for a cluster's notice about one of them."""
        targets = [only] if only is not None else list(self.statefulsets)
        if notice.node != CLUSTER:
            owner = self.owner(notice.node)
            targets = [owner] if owner is not None else targets
        objects = [
            self._ref("apps/v1", "StatefulSet", s, self.statefulsets.get(s, "")) for s in targets
        ]
        if notice.node != CLUSTER:
            uid = await self._pod_uid(notice.node)
            if uid is not None:
                objects.append(self._ref("v1", "Pod", notice.node, uid))
        for obj in objects:
            try:
                self.poster(obj, type=notice.type, reason=notice.reason, message=notice.message)
            except Exception:  # Events feed people, never the roll's safety
                logger.warning(
                    "could not post an Event on %s", obj["metadata"]["name"], exc_info=True
                )

    async def _pod_uid(self, name: str) -> str | None:
        from lightkube.resources.core_v1 import Pod

        try:
            pod = await self.client.get(Pod, name, namespace=self.namespace)
        except API_ERRORS:
            return None  # gone, or not readable now: the StatefulSet's Event says it
        meta = pod.metadata
        return None if meta is None or meta.deletionTimestamp is not None else meta.uid


class _Watch:
    """What the roll has said and saved so far: its record, whether a pause holds it."""

    def __init__(self, roll_id: str) -> None:
        self.roll_id = roll_id
        self.record: RollRecord | None = None
        self.paused = False

    def saved(self, record: RollRecord) -> None:  # the journal's thread: one assignment
        self.record = record

    def heard(self, entry: Mapping[str, Any]) -> None:
        if entry.get("action") == Event.GATE_CLOSED and entry.get("gate") == "pause":
            self.paused = True
        elif entry.get("action") == Event.GATE_OPEN:
            self.paused = False

    def status(self, base: Status) -> Status:
        node, reason = working_on(self.record.nodes) if self.record is not None else ("", "")
        phase = ControllerPhase.PAUSED if self.paused else ControllerPhase.ROLLING
        return base.moved(phase, _now(), roll_id=self.roll_id, node=node, reason=reason)


def _now() -> str:
    return format_time(datetime.now(UTC))


async def run_roll(
    job: RollJob,
    client: Any,
    poster: Poster,
    publish: Publish,
    base: Status,
    metrics: ControllerMetrics | None = None,
) -> Ending:
    """The roll of `job`, told as it goes; `publish` gets its status (from `base`) as it
    changes; `metrics` serve the roll's own while it runs."""
    announcer = Announcer(client, poster, job.namespace, job.statefulsets)
    gate = HoldGate(client, job.namespace, list(job.statefulsets))
    watch = _Watch(job.roll_id)
    try:
        async with opened(
            "roll",
            job.options,
            RetryStats(),
            job.roll_id,
            lease_name=job.lease,
            gates=(gate,),
            cluster=job.cluster,
            credentials=CONTROLLER,
        ) as session:
            session.journal = WatchedJournal(session.journal, watch.saved)
            own = RollMetrics(job.roll_id, job.cluster)  # as --metrics-listen's, for this roll
            session.journal, session.lease = own.watch(
                session.events, session.journal, session.lease
            )
            teller = Teller(job.roll_id, job.why)
            async with _telling(session.events, teller, announcer, watch, publish, base):
                await session.start()
                roller = await session.roller()
                own.follow([n.name for n in session.nodes], roller.recovery_budget)
                if metrics is not None:
                    metrics.rolling((job.namespace, job.cluster), own)
                try:
                    result = await roller.roll(job.roll_id, resume=job.resume)
                finally:
                    if metrics is not None:
                        metrics.rolling((job.namespace, job.cluster), None)
    except LeaseHeld as exc:
        ending = Ending("waiting", str(exc), retry_in=exc.expires_in + 1.0)
    except ConfigError as exc:
        ending = Ending("refused", str(exc))
    except RollguardError as exc:
        ending = Ending("failed", str(exc))
    else:
        ending = Ending("completed", summary(result), result)
    if ending.state != "waiting":
        await announcer.post(_last(ending))
    return ending


def summary(result: RollResult) -> str:
    return _last(Ending("completed", "", result)).message


def _last(ending: Ending) -> Notice:
    result = ending.result
    if result is None:
        return ended(ending.state, reason=ending.reason)
    return ended(
        "completed",
        restarted=len(result.restarted),
        skipped=len(result.skipped),
        configured=len(result.configured),
        held=tuple(result.held),
    )


@contextlib.asynccontextmanager
async def _telling(
    events: Any, teller: Teller, announcer: Announcer, watch: _Watch, publish: Publish, base: Status
) -> AsyncIterator[None]:
    """The roll's events (heard in any thread) told as notices by one task, in order, which
    publishes the status at each and every `STATUS_EVERY` seconds between. At the roll's end
    the task tells what is left and ends by itself (`_END`): a cancelled wait that loses its
    cancellation (asyncio.wait_for's race before 3.12) can never keep it alive."""
    loop = asyncio.get_running_loop()
    heard: asyncio.Queue[Mapping[str, Any] | None] = asyncio.Queue()
    events.listeners.append(lambda entry: loop.call_soon_threadsafe(heard.put_nowait, dict(entry)))

    async def tell() -> None:
        last: Status | None = None
        while True:
            entry: Mapping[str, Any] | None = {}
            try:
                async with asyncio.timeout(STATUS_EVERY):
                    entry = await heard.get()
            except TimeoutError:
                pass  # nothing said: the status at least, its waits' figures move
            if entry is _END:
                return
            if entry:
                watch.heard(entry)
                for notice in teller.tell(entry):
                    await announcer.post(notice)
            status = watch.status(base if last is None else last)
            if not status.same_as(last):
                await publish(status)
            last = status

    task = asyncio.create_task(tell(), name=f"telling {teller.roll_id}")
    try:
        yield
    finally:
        await asyncio.sleep(0)  # the roll's last words, from its threads, reach the queue
        heard.put_nowait(_END)
        done, _ = await asyncio.wait({task}, timeout=LAST_WORDS)
        if not done:  # the API does not answer: the journal and the log have it all
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

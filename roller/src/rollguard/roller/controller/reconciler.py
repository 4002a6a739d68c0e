"""The controller's loop over its clusters: whenever anything about a cluster changes (one of
its StatefulSets, a ConfigMap it mounts or takes its settings from, a roll's end, a retry's
time), look at it again (`reconcile`), decide (`decide.decide`, pure) and act: say why nothing
is rolled, write the status annotation, or start the roll (`rolls.run_roll`) beside the loop.

Each cluster has one worker task, so a cluster is never looked at twice at once; changes that
come while it looks make it look once more. Several clusters roll side by side, each under its
own Lease (`clusters.lease_name`). What is said once per change (a refusal, the RollingUpdate
warning) is said again only when the status annotation says something else: a controller
started again does not repeat itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube.resources.apps_v1 import StatefulSet
from lightkube.types import PatchType

from rollguard.roller.controller import observe
from rollguard.roller.controller.access import check, controller_permissions
from rollguard.roller.controller.clusters import (
    lease_name,
    roll_id,
    selector,
    target_version,
    trigger,
    unselectable,
    versions_disagree,
)
from rollguard.roller.controller.decide import (
    Busy,
    Decision,
    Done,
    Hold,
    Ignore,
    Refuse,
    Seen,
    Start,
    backoff,
    decide,
    upgrade_target,
)
from rollguard.roller.controller.metrics import ControllerMetrics
from rollguard.roller.controller.names import STATUS
from rollguard.roller.controller.rolls import Announcer, Ending, Poster, RollJob, run_roll
from rollguard.roller.controller.settings import ClusterSettings, cluster_options, gather
from rollguard.roller.controller.status import ControllerPhase, Status
from rollguard.roller.controller.telling import CLUSTER, Notice
from rollguard.roller.kubernetes import API_ERRORS, api_error
from rollguard.roller.roll.configs.kubernetes import CONFIG_KEY
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.wire import format_time, parse_time

__all__ = ["Reconciler"]

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, cluster)
SETTLE = 0.5  # seconds a cluster's changes are let settle before it is looked at
AFTER_ERROR = 30.0  # seconds before a look that failed (the API down, say) is tried again
LOOK_ERRORS: tuple[type[Exception], ...] = (RollguardError, *API_ERRORS)
ROLLING_UPDATE = (
    "updateStrategy {strategy}: Kubernetes restarts this StatefulSet's pods itself, the next "
    "one as soon as the last is Ready, before it is back in its ISRs and whether or not a "
    "broker is in log recovery; rollguard leaves its cluster alone. Set spec.updateStrategy."
    "type to OnDelete for rollguard to roll it"
)


class Reconciler:
    def __init__(
        self,
        client: Any,
        poster: Poster,
        environ: Mapping[str, str],
        state_dir: Path,
        *,
        metrics: ControllerMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`client`: a lightkube AsyncClient; `environ`: the controller's, its ROLLGUARD_
        variables every roll's defaults; `clock`: the wall clock (POSIX seconds)."""
        self.client = client
        self.poster = poster
        self.environ = dict(environ)
        self.state_dir = state_dir
        self.metrics = metrics
        self._clock = clock
        self._dirty: dict[Key, asyncio.Event] = {}
        self._workers: dict[Key, asyncio.Task[None]] = {}
        self._rolls: dict[Key, asyncio.Task[None]] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._configmaps: dict[tuple[str, str], set[Key]] = {}  # who reads which ConfigMap
        self._written: dict[str, str] = {}  # StatefulSet -> its status annotation, as written

    # ---- what wakes a cluster up ----------------------------------------------------------

    def changed(self, namespace: str, cluster: str) -> None:
        key = (namespace, cluster)
        self._dirty.setdefault(key, asyncio.Event()).set()
        if key not in self._workers or self._workers[key].done():
            self._workers[key] = asyncio.create_task(self._work(key), name=f"cluster {key}")

    def configmap_changed(self, namespace: str, name: str) -> None:
        for key in self._configmaps.get((namespace, name), set()):
            self.changed(*key)

    def _later(self, key: Key, at: float) -> None:
        """Look at the cluster again at `at` (POSIX seconds)."""
        if key in self._timers:
            self._timers[key].cancel()
        delay = max(0.0, at - self._clock())
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self.changed, *key)

    async def _work(self, key: Key) -> None:
        dirty = self._dirty[key]
        while True:
            await dirty.wait()
            await asyncio.sleep(SETTLE)
            dirty.clear()
            try:
                await self.reconcile(key)
            except LOOK_ERRORS as exc:
                logger.warning("cluster %s/%s: %s; looking again in %gs", *key, exc, AFTER_ERROR)
                self._later(key, self._clock() + AFTER_ERROR)
            except Exception:  # a fault of ours: said in full, and the loop goes on
                logger.exception("cluster %s/%s: looking again in %gs", *key, AFTER_ERROR)
                self._later(key, self._clock() + AFTER_ERROR)

    async def stop(self) -> None:
        """Interrupt every roll (its journal says so, its Lease is released) and every worker."""
        for timer in self._timers.values():
            timer.cancel()
        tasks = [*self._rolls.values(), *self._workers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _now(self) -> str:
        return format_time(datetime.fromtimestamp(self._clock(), UTC))

    @property
    def rolling(self) -> list[Key]:
        return sorted(self._rolls)

    # ---- a look at one cluster ------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        namespace, cluster = key
        found = await observe.statefulsets(self.client, namespace)
        if not found.members(cluster):
            return  # opted out, or gone
        settings, refused = await self._settings(key, found)
        config_key = settings.values.get("config-key", CONFIG_KEY).strip() or CONFIG_KEY
        view = await observe.observe(self.client, namespace, cluster, found, config_key)
        for statefulset in view.statefulsets:  # a change of one of them is the cluster's
            for configmap, _ in statefulset.configmaps:
                self._configmaps.setdefault((namespace, configmap), set()).add(key)
        version, pods = target_version(view), selector(view)
        refused = refused or versions_disagree(view) or unselectable(view)
        found_trigger = trigger(view, version)
        status = found.status(cluster)
        digest = hashlib.sha256(f"{found_trigger.key}\n{settings.fingerprint()}".encode())
        rid = roll_id(cluster, found_trigger.key)
        journal = None
        try:
            journal = await observe.journal_state(self.client, namespace, rid)
        except ConfigError as exc:
            refused = refused or str(exc)
        options = None
        if refused is None:
            try:
                options = cluster_options(
                    settings,
                    self.environ,
                    namespace=namespace,
                    selector=str(pods),
                    state_dir=self.state_dir,
                    kafka_version=upgrade_target(version, status, resume=journal is not None),
                    compare_config=any(s.configmaps for s in view.statefulsets),
                    roll_id=rid,
                    resume=journal is not None,
                )
            except ConfigError as exc:
                refused = str(exc)
        seen = Seen(
            view,
            found_trigger,
            status,
            digest.hexdigest()[:12],
            journal,
            running=key in self._rolls,
            refused=refused,
            since=_posix(status.since) if status is not None else None,
            now=self._clock(),
        )
        decision = decide(seen)
        logger.debug("cluster %s/%s: %s", namespace, cluster, decision)
        announcer = Announcer(self.client, self.poster, namespace, found.uids(cluster))
        await self._act(key, decision, seen, status or Status(), announcer, options)

    async def _settings(
        self, key: Key, found: observe.Observed
    ) -> tuple[ClusterSettings, str | None]:
        """The cluster's settings (its annotations over its settings ConfigMap, followed), or
        why they cannot be read."""
        annotations = found.annotations(key[1])
        try:
            name, data = await observe.settings_configmap(self.client, key[0], annotations)
            if name:
                self._configmaps.setdefault((key[0], name), set()).add(key)
            return gather(annotations, data, name), None
        except ConfigError as exc:
            return ClusterSettings({}, {}), str(exc)

    async def _act(
        self,
        key: Key,
        decision: Decision,
        seen: Seen,
        base: Status,
        announcer: Announcer,
        options: Any,
    ) -> None:
        now = self._now()
        if isinstance(decision, Busy):
            return
        if isinstance(decision, Ignore):
            status = base.moved(ControllerPhase.IGNORED, now, reason=_ignored(decision, seen))
            if not status.same_as(seen.status):
                for name in decision.statefulsets:
                    strategy = next(s.strategy for s in seen.view.statefulsets if s.name == name)
                    text = ROLLING_UPDATE.format(strategy=strategy)
                    await announcer.post(
                        Notice(CLUSTER, "Warning", "RollingUpdate", text), only=name
                    )
            await self.publish(key, announcer, status)
        elif isinstance(decision, Refuse):
            status = base.moved(ControllerPhase.REFUSED, now, reason=decision.reason, roll_id="")
            if not status.same_as(seen.status):
                await announcer.post(Notice(CLUSTER, "Warning", "InvalidSettings", decision.reason))
            await self.publish(key, announcer, status)
        elif isinstance(decision, Hold):
            if decision.retry_at is not None:  # a roll refused or failed: its status says why
                self._later(key, decision.retry_at)
            else:
                waiting = base.moved(ControllerPhase.WAITING, now, reason=decision.reason)
                await self.publish(key, announcer, waiting)
        elif isinstance(decision, Done):
            status = base.moved(
                ControllerPhase.COMPLETED,
                now,
                roll_id=decision.roll_id,
                rolled=seen.trigger.key,
                kafka_version=seen.trigger.kafka_version or "",
            )
            await self.publish(key, announcer, status)
        elif isinstance(decision, Start):
            job = RollJob(
                key[0],
                key[1],
                announcer.statefulsets,
                decision.roll_id,
                decision.resume,
                decision.why,
                options,
                lease_name(key[1]),
            )
            self._rolls[key] = asyncio.create_task(
                self._roll(key, job, seen, base, announcer), name=f"roll {decision.roll_id}"
            )

    async def _roll(
        self, key: Key, job: RollJob, seen: Seen, base: Status, announcer: Announcer
    ) -> None:
        now = self._now()
        started = base.moved(
            ControllerPhase.ROLLING, now, roll_id=job.roll_id, node="", reason=job.why
        )
        try:
            await self.publish(key, announcer, started)
            try:
                await check(self.client, job.namespace, controller_permissions())
            except ConfigError as exc:
                ending = Ending("refused", str(exc))
                await announcer.post(
                    Notice(CLUSTER, "Warning", "RollRefused", f"roll refused: {exc}")
                )
            else:
                publish = lambda status: self.publish(key, announcer, status)  # noqa: E731
                ending = await run_roll(
                    job, self.client, self.poster, publish, started, self.metrics
                )
            await self._ended(key, ending, seen, started, announcer)
        finally:
            del self._rolls[key]
            self.changed(*key)  # what changed meanwhile, and what the roll left

    async def _ended(
        self, key: Key, ending: Ending, seen: Seen, started: Status, announcer: Announcer
    ) -> None:
        now = self._now()
        if ending.state == "completed":
            status = started.moved(
                ControllerPhase.COMPLETED,
                now,
                node="",
                reason=ending.reason,
                rolled=seen.trigger.key,
                attempt="",
                attempts=0,
                kafka_version=seen.trigger.kafka_version or "",
            )
        elif ending.state == "waiting":
            status = started.moved(ControllerPhase.WAITING, now, node="", reason=ending.reason)
            self._later(key, self._clock() + (ending.retry_in or AFTER_ERROR))
        else:
            again = seen.status is not None and seen.status.attempt == seen.fingerprint
            attempts = (seen.status.attempts if again and seen.status else 0) + 1
            phase = ControllerPhase.REFUSED if ending.state == "refused" else ControllerPhase.FAILED
            status = started.moved(
                phase,
                now,
                node="",
                reason=ending.reason,
                attempt=seen.fingerprint,
                attempts=attempts,
            )
            self._later(key, self._clock() + backoff(attempts))
        logger.info(
            "cluster %s/%s: roll %s %s: %s", *key, started.roll_id, ending.state, ending.reason
        )
        await self.publish(key, announcer, status)

    async def publish(self, key: Key, announcer: Announcer, status: Status) -> None:
        """The status annotation on each of the cluster's StatefulSets, where it changed. A
        failure is said, never raised: the roll goes on."""
        if self.metrics is not None:
            self.metrics.phase(key, status.phase)
        text = status.to_text()
        for name in announcer.statefulsets:
            if self._written.get(f"{key[0]}/{name}") == text:
                continue
            patch = {"metadata": {"annotations": {STATUS: text}}}
            try:
                await self.client.patch(
                    StatefulSet, name, patch, namespace=key[0], patch_type=PatchType.MERGE
                )
            except API_ERRORS as exc:
                logger.warning("%s", api_error(f"patch statefulset {name} (its status)", exc))
                continue
            self._written[f"{key[0]}/{name}"] = text


def _ignored(decision: Ignore, seen: Seen) -> str:
    strategies = {s.name: s.strategy for s in seen.view.statefulsets}
    return "; ".join(f"{n}: updateStrategy {strategies[n]}" for n in decision.statefulsets)


def _posix(text: str) -> float | None:
    with contextlib.suppress(ValueError):
        return parse_time(text).timestamp()
    return None

"""The life of a StatefulSet's pods in the peer: deleted, recreated, starting, Ready, or stuck.

The roller deletes a pod and waits until it comes back with a new uid, the StatefulSet's update
revision and a Ready condition; before that, it must notice a pod that is stuck and restart it
first if it is out of date. A real control plane cannot be made to show a stuck pod on demand,
and that is what the peer is for. So:

- `add_statefulset` makes a StatefulSet and its pods, all Running and Ready (1,000 of them as
  readily as 3), and `set_update_revision` gives it a new `updateRevision`, so that its pods
  are out of date;
- `set_waiting` keeps a pod's container waiting with a reason (CrashLoopBackOff,
  ImagePullBackOff, ...) and `set_unschedulable` keeps the pod Pending and Unschedulable, until
  they are called again to let it start, or the pod is deleted;
- a deleted pod is gone at once, is recreated `recreate_after` seconds after the DELETE with the
  same name, a new uid and the StatefulSet's `updateRevision` as its `controller-revision-hash`,
  waits in ContainerCreating for a moment, runs not ready, and is Ready `ready_after` seconds
  after it reappeared;
- a StatefulSet has the `OnDelete` update strategy, as the roller's StatefulSets do: nothing
  but a client deletes a pod, and, as on Kubernetes before kubernetes/kubernetes#136833,
  `currentRevision` is never promoted to `updateRevision`.

Timed steps and the test's `on_delete`/`on_start` callbacks run one at a time, in order, on the
peer's own "lifecycle" thread, never on the HTTP server's event loop, so a callback may block
(stop or start a real process) and hold back the pod it concerns without stalling the API. The
thread waits on the store's lock condition with a deadline (the next step's due time), never
with a sleep.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rollguard.peers.kube_api import PODS, STATEFULSETS, Json, Key, ResourceKind, not_found
from rollguard.peers.kube_model import (
    POD_INDEX_LABEL,
    POD_NAME_LABEL,
    REVISION_LABEL,
    Deletion,
    Pod,
    StatefulSet,
    container_id,
    render_pod,
    render_statefulset,
)
from rollguard.peers.kube_objects import Store, timestamp

logger = logging.getLogger(__name__)

CONTAINER_CREATING = 0.05  # seconds a (re)started pod's container waits in ContainerCreating


class Lifecycle:
    """Steps due at `time.monotonic()` deadlines, run by `run()` until `stop()`."""

    def __init__(self, cv: threading.Condition) -> None:
        self._cv = cv
        self._jobs: list[tuple[float, int, Callable[[], object]]] = []
        self._sequence = itertools.count()
        self.stopping = False

    def after(self, delay: float, fn: Callable[..., object], *args: Any) -> None:
        """Run `fn(*args)` on the lifecycle thread `delay` seconds from now."""
        with self._cv:
            due = time.monotonic() + max(0.0, delay)
            heapq.heappush(self._jobs, (due, next(self._sequence), lambda: fn(*args)))
            self._cv.notify_all()

    def run(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self.stopping:
                        return
                    now = time.monotonic()
                    if self._jobs and self._jobs[0][0] <= now:
                        job = heapq.heappop(self._jobs)[2]
                        break
                    self._cv.wait(self._jobs[0][0] - now if self._jobs else None)
            try:
                job()
            except Exception:
                # Logged, and the simulation goes on, as a cluster would.
                logger.exception("fake Kubernetes: a lifecycle step failed")

    def stop(self) -> None:
        with self._cv:
            self.stopping = True
            self._cv.notify_all()


class Workloads(Store):
    """StatefulSets and their pods in the store, with the lifecycle thread that moves them."""

    def __init__(
        self,
        *,
        recreate_after: float,
        ready_after: float,
        on_delete: Callable[[str], object] | None,
        on_start: Callable[[str], object] | None,
    ) -> None:
        super().__init__()
        self.recreate_after = recreate_after
        self.ready_after = ready_after
        self.on_delete = on_delete
        self.on_start = on_start
        self.deletions: list[Deletion] = []
        self._lifecycle = Lifecycle(threading.Condition(self._lock))
        self._after = self._lifecycle.after
        self._sets: dict[Key, StatefulSet] = {}
        self._owned: dict[Key, StatefulSet] = {}
        self._pods: dict[Key, Pod] = {}
        self._incarnations = itertools.count(1)

    def _write(self, kind: ResourceKind, key: Key, obj: Json | None) -> None:
        """A pod's change changes its StatefulSet's status too."""
        super()._write(kind, key, obj)
        if kind is PODS and (sts := self._owned.get(key)) is not None:
            self._refresh_statefulset(sts)

    # --- what tests set up -----------------------------------------------------------------------

    def add_statefulset(
        self,
        namespace: str,
        name: str,
        replicas: int,
        labels_for: Callable[[int], Mapping[str, str]],
        revision: str = "rev-1",
    ) -> list[str]:
        """Create a StatefulSet and its pods `{name}-{ordinal}`, all Running and Ready.

        Its selector is the labels that `labels_for` gives every ordinal; `labels_for` is asked
        again whenever a pod is recreated. Returns the pod names. No `on_start` call is made for
        these pods: they exist already.
        """
        per_pod = [dict(labels_for(ordinal)) for ordinal in range(replicas)]
        common = set(per_pod[0].items()) if per_pod else set()
        for labels in per_pod[1:]:
            common &= set(labels.items())
        if not common:
            raise ValueError(f"statefulset {name}: its pods' labels have nothing in common")
        sts = StatefulSet(
            namespace=namespace,
            name=name,
            replicas=replicas,
            labels_for=labels_for,
            selector=dict(sorted(common)),
            current_revision=revision,
            update_revision=revision,
        )
        with self._lock:
            if (namespace, name) in self._sets:
                raise ValueError(f"statefulset {namespace}/{name} exists already")
            self._sets[(namespace, name)] = sts
            pods = [self._new_pod(sts, ordinal, per_pod[ordinal]) for ordinal in range(replicas)]
            for pod in pods:
                pod.waiting, pod.running, pod.ready, pod.ever_ran = None, True, True, True
                pod.started_at, pod.container_id = pod.created, container_id()
                self._commit_pod(pod)
            # Owned once all are stored: the StatefulSet's status is computed once, not per pod.
            self._owned.update((pod.key, sts) for pod in pods)
            self._refresh_statefulset(sts, force=True)
        return [pod.name for pod in pods]

    def set_update_revision(self, sts: str, revision: str, namespace: str | None = None) -> None:
        """Simulate a change of the StatefulSet's pod template: a new `updateRevision`, so the
        existing pods are out of date until they are deleted and recreated."""
        with self._lock:
            statefulset = self._statefulset(sts, namespace)
            statefulset.update_revision = revision
            statefulset.generation += 1
            self._refresh_statefulset(statefulset, force=True)

    def set_waiting(self, name: str, reason: str | None, namespace: str | None = None) -> None:
        """Put the container in waiting state `reason` (CrashLoopBackOff, ImagePullBackOff,
        ...; never ready while there); None lets it start again (ContainerCreating, running,
        Ready after `ready_after`)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            if reason is None:
                pod.waiting, pod.running, pod.ready = "ContainerCreating", False, False
                self._commit_pod(pod)
                self._plan_start(pod)
            else:
                if reason == "CrashLoopBackOff":
                    pod.restart_count += 1
                    pod.ever_ran = True
                    pod.last_finished_at = timestamp()
                    pod.started_at = pod.started_at or pod.last_finished_at
                pod.scheduled, pod.waiting, pod.running, pod.ready = True, reason, False, False
                self._commit_pod(pod)

    def set_unschedulable(
        self, name: str, unschedulable: bool, namespace: str | None = None
    ) -> None:
        """Make the pod Pending/Unschedulable now, or let the scheduler place it (then it
        starts like a recreated pod)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            pod.running = pod.ready = False
            pod.scheduled, pod.waiting = (
                not unschedulable,
                None if unschedulable else "ContainerCreating",
            )
            self._commit_pod(pod)
            if not unschedulable:
                self._plan_start(pod)

    # --- pods ------------------------------------------------------------------------------------

    def _statefulset(self, name: str, namespace: str | None) -> StatefulSet:
        matches = [s for (ns, n), s in self._sets.items() if n == name and namespace in (None, ns)]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} statefulsets named {name!r} (namespace {namespace})")
        return matches[0]

    def _live_pod(self, name: str, namespace: str | None) -> Pod:
        keys = [key for key in self._owned if key[1] == name and namespace in (None, key[0])]
        if len(keys) != 1:
            raise KeyError(f"{len(keys)} simulated pods named {name!r} (namespace {namespace})")
        if keys[0] not in self._pods:
            raise KeyError(f"pod {keys[0][0]}/{name} does not exist right now (being recreated)")
        return self._pods[keys[0]]

    def _new_pod(self, sts: StatefulSet, ordinal: int, labels: Mapping[str, str]) -> Pod:
        name = f"{sts.name}-{ordinal}"
        pod = Pod(
            sts=sts,
            ordinal=ordinal,
            labels={
                **labels,
                REVISION_LABEL: sts.update_revision,
                POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(ordinal),
            },
            incarnation=next(self._incarnations),
        )
        self._pods[pod.key] = pod
        return pod

    def _current(self, pod: Pod, token: int) -> bool:
        return self._pods.get(pod.key) is pod and pod.token == token

    def _plan_start(self, pod: Pod) -> None:
        """ContainerCreating now; running after `CONTAINER_CREATING`; Ready `ready_after` from
        now. Caller holds the lock."""
        starts_in = min(CONTAINER_CREATING, self.ready_after)
        self._after(starts_in, self._start_container, pod, pod.token, self.ready_after - starts_in)

    def _start_container(self, pod: Pod, token: int, ready_in: float) -> None:
        with self._lock:
            if not self._current(pod, token):
                return
            pod.scheduled, pod.waiting, pod.running, pod.ever_ran = True, None, True, True
            pod.started_at, pod.container_id = timestamp(), container_id()
            self._commit_pod(pod)
            self._after(ready_in, self._become_ready, pod, token)
        self._call("on_start", pod.name)

    def _become_ready(self, pod: Pod, token: int) -> None:
        with self._lock:
            if self._current(pod, token) and pod.running:
                pod.ready = True
                self._commit_pod(pod)

    def _delete_pod(self, key: Key) -> Json:
        """DELETE of a pod: gone at once, recreated after `on_delete` returns and
        `recreate_after` has passed. Answers the pod as it was, with its deletionTimestamp, as
        the API does. Caller holds the lock."""
        pod = self._pods.pop(key, None)
        if pod is None:
            raise not_found(PODS, key[1])
        now = time.monotonic()
        self.deletions.append(Deletion(pod.name, pod.uid, now))
        pod.ready = False
        body = render_pod(pod)
        body["metadata"].update(
            resourceVersion=self._store["pods"][key]["metadata"]["resourceVersion"],
            deletionTimestamp=timestamp(),
            deletionGracePeriodSeconds=body["spec"]["terminationGracePeriodSeconds"],
        )
        self._write(PODS, key, None)
        self._after(0, self._pod_killed, pod, now)
        return body

    def _pod_killed(self, pod: Pod, deleted_at: float) -> None:
        self._call("on_delete", pod.name)
        delay = max(0.0, deleted_at + self.recreate_after - time.monotonic())
        self._after(delay, self._recreate, pod.sts, pod.ordinal)

    def _recreate(self, sts: StatefulSet, ordinal: int) -> None:
        labels = dict(sts.labels_for(ordinal))
        with self._lock:
            key = (sts.namespace, f"{sts.name}-{ordinal}")
            if self._lifecycle.stopping or key in self._pods:
                return
            pod = self._new_pod(sts, ordinal, labels)
            pod.waiting = "ContainerCreating"
            self._commit_pod(pod)
            self._plan_start(pod)
            logger.info("fake Kubernetes: recreated pod %s/%s uid %s", *key, pod.uid)

    def _commit_pod(self, pod: Pod) -> None:
        """Store the pod's new state under a new resourceVersion. Caller holds the lock."""
        if self._pods.get(pod.key) is pod:
            self._write(PODS, pod.key, render_pod(pod))

    def _refresh_statefulset(self, sts: StatefulSet, force: bool = False) -> None:
        key = (sts.namespace, sts.name)
        stored = self._store["statefulsets"].get(key)
        pods = [pod for pod in self._pods.values() if pod.sts is sts]
        rendered = render_statefulset(sts, pods)
        if force or stored is None or stored["status"] != rendered["status"]:
            self._write(STATEFULSETS, key, rendered)

    def _call(self, which: str, name: str) -> None:
        """Call `self.on_delete` or `self.on_start` as set now; a failure is logged (the
        simulation goes on, as a cluster would)."""
        callback = getattr(self, which)
        if callback is None:
            return
        try:
            callback(name)
        except Exception:
            logger.exception("fake Kubernetes: %s(%r) failed", which, name)

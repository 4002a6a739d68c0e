"""The life of a StatefulSet's pods in the peer: deleted, recreated, starting, Ready, or stuck.

The roller deletes a pod and waits until it comes back with a new uid, the StatefulSet's update
revision and a Ready condition; it must also notice a pod that never gets there. So:

- a deleted pod disappears (after `terminate_after` seconds Terminating, with a
  deletionTimestamp, if that is set), is recreated `recreate_after` seconds after the DELETE with
  the same name, a new uid and the StatefulSet's `updateRevision` as its
  `controller-revision-hash`, waits in ContainerCreating for `container_creating` seconds, runs
  not ready, and is Ready `ready_after` seconds after it reappeared;
- `set_next_start` makes the next start stuck (CrashLoopBackOff, ImagePullBackOff, ... or
  Unschedulable); `set_ready`, `set_waiting`, `set_unschedulable`, `annotate` and
  `set_update_revision` change a pod or a StatefulSet now, as the kubelet or a controller would;
- a StatefulSet has the `OnDelete` update strategy, as the roller's StatefulSets do: nothing
  but a client deletes a pod, and, as on Kubernetes before kubernetes/kubernetes#136833,
  `currentRevision` is never promoted to `updateRevision` (the roller reads neither it nor the
  RollingUpdate strategy, which are not modelled).

Timed steps and the `on_delete`/`on_start` callbacks run one at a time on the simulator's own
"lifecycle" thread, never on the HTTP server's event loop, so a callback may block (stop or
start a real process) without stalling API requests.
"""

from __future__ import annotations

import copy
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping

from rollguard.peers.kube_api import PODS, STATEFULSETS, Json, Key, ResourceKind, not_found
from rollguard.peers.kube_lifecycle import Lifecycle
from rollguard.peers.kube_model import (
    POD_INDEX_LABEL,
    POD_NAME_LABEL,
    REVISION_LABEL,
    Deletion,
    Pod,
    StartPlan,
    StatefulSet,
    container_id,
    render_pod,
    render_statefulset,
)
from rollguard.peers.kube_objects import Store, timestamp

logger = logging.getLogger(__name__)


class Workloads(Store):
    """StatefulSets and their pods in the store, with the lifecycle thread that moves them."""

    def __init__(
        self,
        *,
        recreate_after: float,
        ready_after: float,
        container_creating: float,
        terminate_after: float,
        on_delete: Callable[[str], object] | None,
        on_start: Callable[[str], object] | None,
    ) -> None:
        super().__init__()
        self.recreate_after = recreate_after
        self.ready_after = ready_after
        self.container_creating = container_creating
        self.terminate_after = terminate_after
        self.on_delete = on_delete
        self.on_start = on_start
        self.deletions: list[Deletion] = []
        self.callback_errors: list[BaseException] = []
        self._lifecycle = Lifecycle(threading.Condition(self._lock), self.callback_errors)
        self._after = self._lifecycle.after
        self._sets: dict[Key, StatefulSet] = {}
        self._owned: dict[Key, StatefulSet] = {}
        self._pods: dict[Key, Pod] = {}
        self._next_start: dict[Key, StartPlan] = {}
        self._incarnations = itertools.count(1)

    def _write(self, kind: ResourceKind, key: Key, obj: Json | None) -> None:
        """A pod's change changes its StatefulSet's status too."""
        super()._write(kind, key, obj)
        if kind is PODS and (sts := self._owned.get(key)) is not None:
            self._refresh_statefulset(sts)

    # --- what tests set up and inspect -----------------------------------------------------------

    def add_statefulset(
        self,
        namespace: str,
        name: str,
        replicas: int,
        labels_for: Callable[[int], Mapping[str, str]],
        annotations_for: Callable[[int], Mapping[str, str]] | None = None,
        revision: str = "rev-1",
    ) -> list[str]:
        """Create a StatefulSet and its pods `{name}-{ordinal}`, all Running and Ready.

        Its selector is the labels that `labels_for` gives every ordinal. Returns the pod
        names. No `on_start` call is made for these pods: they exist already. `labels_for` and
        `annotations_for` are asked again whenever a pod is recreated.
        """
        per_pod = [dict(labels_for(ordinal)) for ordinal in range(replicas)]
        common = set(per_pod[0].items()) if per_pod else set()
        for labels in per_pod[1:]:
            common &= set(labels.items())
        if not common:
            raise ValueError(f"statefulset {name}: its pods' labels have nothing in common")
        selector = dict(sorted(common))
        sts = StatefulSet(
            namespace=namespace,
            name=name,
            replicas=replicas,
            labels_for=labels_for,
            annotations_for=annotations_for,
            selector=selector,
            current_revision=revision,
            update_revision=revision,
        )
        with self._lock:
            if (namespace, name) in self._sets:
                raise ValueError(f"statefulset {namespace}/{name} exists already")
            self._sets[(namespace, name)] = sts
            self._refresh_statefulset(sts, force=True)
            for ordinal in range(replicas):
                pod = self._new_pod(sts, ordinal, per_pod[ordinal], self._annotations(sts, ordinal))
                self._owned[pod.key] = sts
                pod.waiting, pod.running, pod.ready, pod.ever_ran = None, True, True, True
                pod.started_at, pod.container_id = pod.created, container_id()
                self._commit_pod(pod)
        return [f"{name}-{ordinal}" for ordinal in range(replicas)]

    def set_update_revision(self, sts: str, revision: str, namespace: str | None = None) -> None:
        """Simulate a change of the StatefulSet's pod template: a new `updateRevision`, so the
        existing pods are out of date until they are deleted and recreated."""
        with self._lock:
            statefulset = self._statefulset(sts, namespace)
            statefulset.update_revision = revision
            statefulset.generation += 1
            self._refresh_statefulset(statefulset, force=True)

    def pod(self, name: str, namespace: str | None = None) -> Json | None:
        """The pod's current JSON as the API serves it, or None while it does not exist."""
        with self._lock:
            return self._stored("pods", self._pod_key(name, namespace))

    def set_next_start(
        self,
        name: str,
        *,
        ready_after: float | None = None,
        waiting_reason: str | None = None,
        unschedulable: bool = False,
        namespace: str | None = None,
    ) -> None:
        """Decide how the pod's next recreation goes (one-shot; a later call replaces it).

        `ready_after` overrides the simulator's (None keeps it; `math.inf` = never by itself).
        `waiting_reason` (CrashLoopBackOff, ImagePullBackOff, InvalidImageName,
        ContainerCreating, ...) keeps the container waiting, never ready, until `set_waiting` or
        `set_ready`. `unschedulable` keeps the pod Pending with PodScheduled False/Unschedulable
        until `set_unschedulable(name, False)`.
        """
        with self._lock:
            key = self._pod_key(name, namespace)
            self._next_start[key] = StartPlan(ready_after, waiting_reason, unschedulable)

    def set_ready(self, name: str, ready: bool, namespace: str | None = None) -> None:
        """Pass or fail the readiness probe now. Ready on a container that is not running
        starts it (and calls `on_start`)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            if ready and not pod.running:
                pod.scheduled, pod.waiting, pod.running, pod.ever_ran = True, None, True, True
                pod.started_at, pod.container_id = timestamp(), container_id()
                self._after(0, self._call, "on_start", pod.name)
            pod.ready = ready
            self._commit_pod(pod)

    def set_waiting(self, name: str, reason: str | None, namespace: str | None = None) -> None:
        """Put the container in waiting state `reason` (never ready while there); None lets it
        start again (ContainerCreating, running, Ready after the pod's `ready_after`)."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            pod.token += 1
            if reason is None:
                pod.waiting, pod.running, pod.ready = "ContainerCreating", False, False
                self._commit_pod(pod)
                self._plan_start(pod)
            else:
                self._enter_waiting(pod, reason)
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

    def annotate(
        self, name: str, key: str, value: str | None, namespace: str | None = None
    ) -> None:
        """Set (or, with None, remove) an annotation on the live pod."""
        with self._lock:
            pod = self._live_pod(name, namespace)
            if value is None:
                pod.annotations.pop(key, None)
            else:
                pod.annotations[key] = value
            self._commit_pod(pod)

    # --- pods ------------------------------------------------------------------------------------

    def _statefulset(self, name: str, namespace: str | None) -> StatefulSet:
        matches = [s for (ns, n), s in self._sets.items() if n == name and namespace in (None, ns)]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} statefulsets named {name!r} (namespace {namespace})")
        return matches[0]

    def _pod_key(self, name: str, namespace: str | None) -> Key:
        keys = [key for key in self._owned if key[1] == name and namespace in (None, key[0])]
        if len(keys) != 1:
            raise KeyError(f"{len(keys)} simulated pods named {name!r} (namespace {namespace})")
        return keys[0]

    def _live_pod(self, name: str, namespace: str | None) -> Pod:
        key = self._pod_key(name, namespace)
        if key not in self._pods:
            raise KeyError(f"pod {key[0]}/{key[1]} does not exist right now (being recreated)")
        return self._pods[key]

    def _annotations(self, sts: StatefulSet, ordinal: int) -> dict[str, str]:
        return dict(sts.annotations_for(ordinal)) if sts.annotations_for else {}

    def _new_pod(
        self,
        sts: StatefulSet,
        ordinal: int,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        ready_after: float | None = None,
    ) -> Pod:
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
            annotations=dict(annotations),
            ready_after=self.ready_after if ready_after is None else ready_after,
            incarnation=next(self._incarnations),
        )
        self._pods[pod.key] = pod
        return pod

    def _enter_waiting(self, pod: Pod, reason: str) -> None:
        if reason == "CrashLoopBackOff":
            pod.restart_count += 1
            pod.ever_ran = True
            pod.last_finished_at = timestamp()
            pod.started_at = pod.started_at or pod.last_finished_at
        pod.scheduled, pod.waiting, pod.running, pod.ready = True, reason, False, False

    def _current(self, pod: Pod, token: int) -> bool:
        return self._pods.get(pod.key) is pod and pod.token == token and pod.deletion is None

    def _plan_start(self, pod: Pod) -> None:
        """ContainerCreating now; running after `container_creating`; Ready `ready_after` from
        now. Caller holds the lock."""
        starts_in = min(self.container_creating, pod.ready_after)
        self._after(starts_in, self._start_container, pod, pod.token, pod.ready_after - starts_in)

    def _start_container(self, pod: Pod, token: int, ready_in: float) -> None:
        with self._lock:
            if not self._current(pod, token):
                return
            pod.scheduled, pod.waiting, pod.running, pod.ever_ran = True, None, True, True
            pod.started_at, pod.container_id = timestamp(), container_id()
            self._commit_pod(pod)
            if math.isfinite(ready_in):
                self._after(ready_in, self._become_ready, pod, token)
        self._call("on_start", pod.name)

    def _become_ready(self, pod: Pod, token: int) -> None:
        with self._lock:
            if self._current(pod, token) and pod.running:
                pod.ready = True
                self._commit_pod(pod)

    def _delete_pod(self, key: Key) -> Json:
        """DELETE of a pod: Terminating for `terminate_after` seconds (if set), then gone, then
        recreated. Caller holds the lock."""
        pod = self._pods.get(key)
        if pod is None:
            raise not_found(PODS, key[1])
        if pod.deletion is not None:  # deleting a Terminating pod again changes nothing
            return copy.deepcopy(self._store["pods"][key])
        now = time.monotonic()
        self.deletions.append(Deletion(pod.name, pod.uid, now))
        pod.token += 1
        pod.deletion = timestamp()
        pod.ready = False
        wait = self.terminate_after
        if wait > 0:
            self._commit_pod(pod)
            body = copy.deepcopy(self._store["pods"][key])
        else:
            body = render_pod(pod)
            body["metadata"]["resourceVersion"] = self._store["pods"][key]["metadata"][
                "resourceVersion"
            ]
            del self._pods[key]
            self._write(PODS, key, None)
        self._after(0, self._pod_killed, pod, now, wait)
        return body

    def _pod_killed(self, pod: Pod, deleted_at: float, wait: float) -> None:
        self._call("on_delete", pod.name)
        if wait > 0:
            self._after(max(0.0, deleted_at + wait - time.monotonic()), self._pod_gone, pod)
        else:
            delay = max(0.0, deleted_at + self.recreate_after - time.monotonic())
            self._after(delay, self._recreate, pod.sts, pod.ordinal)

    def _pod_gone(self, pod: Pod) -> None:
        with self._lock:
            if self._pods.get(pod.key) is pod:
                del self._pods[pod.key]
                self._write(PODS, pod.key, None)
        self._after(self.recreate_after, self._recreate, pod.sts, pod.ordinal)

    def _recreate(self, sts: StatefulSet, ordinal: int) -> None:
        labels, annotations = dict(sts.labels_for(ordinal)), self._annotations(sts, ordinal)
        with self._lock:
            key = (sts.namespace, f"{sts.name}-{ordinal}")
            if self._lifecycle.stopping or key in self._pods:
                return
            plan = self._next_start.pop(key, None) or StartPlan()
            pod = self._new_pod(sts, ordinal, labels, annotations, plan.ready_after)
            if plan.unschedulable:
                pod.scheduled = False
            elif plan.waiting_reason is not None:
                self._enter_waiting(pod, plan.waiting_reason)
            else:
                pod.waiting = "ContainerCreating"
            self._commit_pod(pod)
            if pod.scheduled and plan.waiting_reason is None:
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
        """Call `self.on_delete` or `self.on_start` as set now."""
        self._lifecycle.call(which, getattr(self, which), name)

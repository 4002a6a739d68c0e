"""The peer's "lifecycle" thread: timed steps of the simulated cluster, one at a time, in order.

A pod is recreated, starts and gets Ready some time after a request, and the test's
`on_delete`/`on_start` callbacks may block (stopping or starting a real process). Those steps
run here, on a thread of their own, never on the HTTP server's event loop, so that a slow
callback holds back the pod it concerns and not the API. The thread waits on the simulator's
lock condition with a deadline (the next step's due time), never with a sleep.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class Lifecycle:
    """Steps due at `time.monotonic()` deadlines, run by `run()` until `stop()`."""

    def __init__(self, cv: threading.Condition, errors: list[BaseException]) -> None:
        self._cv = cv
        self._errors = errors
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
                logger.exception("fake Kubernetes: a lifecycle step failed")

    def stop(self) -> None:
        with self._cv:
            self.stopping = True
            self._cv.notify_all()

    def call(self, which: str, callback: Callable[[str], object] | None, name: str) -> None:
        """Call a test's callback; a failure is logged and kept in `errors` (the simulation
        goes on, as a cluster would)."""
        if callback is None:
            return
        try:
            callback(name)
        except Exception as exc:
            logger.exception("fake Kubernetes: %s(%r) failed", which, name)
            self._errors.append(exc)

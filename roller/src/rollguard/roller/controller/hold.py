"""The hold annotation as one of the roll's gates: closed while a StatefulSet of the cluster
carries `rollguard.io/paused` (`kubectl annotate statefulset kafka rollguard.io/paused="db
migration, ask ops"`), open again once it is removed.

A gate is asked before each restart and each batch, never while a restarted node is being
waited for (`gates.keeper`): the roll stops before its next restart and goes on when the
annotation goes, as `rollguard roll pause` does. It is a pause (`GateKind.PAUSE`): waited for as
long as a person asks, without the --safety-wait budget. The StatefulSets are read at each
check; when they cannot be read just then, the gate stays as it was at the last read (the
API's outage is the platform's to wait out: no pod is deleted without it either).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from rollguard.roller.controller.names import PAUSED, paused_note
from rollguard.roller.kubernetes import API_ERRORS, api_error
from rollguard.roller.roll.gates.keeper import Closed, GateKind

logger = logging.getLogger(__name__)


class HoldGate:
    kind = GateKind.PAUSE
    name = PAUSED

    def __init__(self, client: Any, namespace: str, statefulsets: Sequence[str]) -> None:
        """`client`: a lightkube AsyncClient; `statefulsets`: the cluster's."""
        self.client = client
        self.namespace = namespace
        self.statefulsets = tuple(statefulsets)
        self._last: Closed | None = None

    async def check(self) -> Closed | None:
        from lightkube.resources.apps_v1 import StatefulSet

        held = []
        for name in self.statefulsets:
            try:
                found = await self.client.get(StatefulSet, name, namespace=self.namespace)
            except API_ERRORS as exc:
                logger.warning("%s; the hold stays as last read", api_error(f"get {name}", exc))
                return self._last
            note = paused_note((found.metadata.annotations if found.metadata else None) or {})
            if note:
                held.append((name, note))
        self._last = _closed(held) if held else None
        return self._last


def _closed(held: list[tuple[str, str]]) -> Closed:
    names = ", ".join(f"{name} ({note})" for name, note in held)
    first = held[0][0]
    return Closed(
        GateKind.PAUSE,
        PAUSED,
        f"held by the annotation {PAUSED} on StatefulSet {names}; `kubectl annotate "
        f"statefulset {first} {PAUSED}-` lets the roll go on",
    )

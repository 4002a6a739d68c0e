"""The canary's gate (`rollguard roll --canary TOPIC`, bounded by `--canary-max-p99`).

Before each restart (and each batch), what the roll's own client saw over the last
`--canary-window` must be within its budget: no send failed, at least one acknowledged (a canary
that cannot produce is closed, never healthy) and, with `--canary-max-p99`, the sends' p99 at or
under it (`canary.figures.breach`). Otherwise the roll holds, as at any health gate: said in the
events, the metrics and the live view, within --safety-wait (pause and windows unaffected).
"""

from __future__ import annotations

from typing import Protocol

from rollguard.roller.roll.canary.figures import Breach
from rollguard.roller.roll.gates.keeper import Closed, GateKind


class CanaryView(Protocol):
    """The roll's canary as its gate reads it (`canary.watch.RollCanary`)."""

    @property
    def name(self) -> str: ...

    def breach(self) -> Breach | None:
        """Why its last window is outside the budget, or None."""


class CanaryGate:
    """Closed while the roll's canary is outside its budget."""

    kind = GateKind.CANARY

    def __init__(self, canary: CanaryView) -> None:
        self.canary = canary
        self.name = canary.name

    async def check(self) -> Closed | None:
        found = self.canary.breach()
        if found is None:
            return None
        return Closed(self.kind, self.name, f"canary {self.name}: {found.reason}")

"""The pause gate: closed while the roll's lease says the roll is paused (`rollguard roll
pause|resume`, cli/pause.py, sets and clears it). The pause lives on the roll's lease: the
lease file's `paused` field for an inventory, the annotation `rollguard.io/paused` on the Lease
on Kubernetes. A node already restarting is still waited for; no --safety-wait budget runs.
"""

from __future__ import annotations

from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.roller.roll.stores.lease import Lease, LeaseError


class PauseGate:
    """Closed while the roll's lease says it is paused: read at each check (before a restart),
    or, when the lease cannot be read just then, as it was at its last renewal (an API that
    does not answer is waited out by the platform's own calls)."""

    kind = GateKind.PAUSE
    name = "pause"

    def __init__(self, lease: Lease, roll_id: str) -> None:
        self.lease = lease
        self.roll_id = roll_id

    async def check(self) -> Closed | None:
        try:
            note = await self.lease.read_paused()
        except LeaseError:
            note = self.lease.paused
        if not note:
            return None
        how = f"`rollguard roll resume --roll-id {self.roll_id}` lets it go on"
        return Closed(GateKind.PAUSE, self.name, f"the roll is paused ({note}); {how}")

"""A node's life is what `node.record.TRANSITIONS` says it is: every move the roll makes a
node's record take, in simulated rolls of every shape (combined and controller-only nodes,
batches by rack, rolls that fail), is one of its transitions; the docs draw the life from it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import VirtualClock, rack_cluster, random_cluster
from rollguard.roller.roll import effects, looks
from rollguard.roller.roll.node.record import TRANSITIONS, NodeRecord, Phase

Moves = set[tuple[Phase, Phase]]


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> Moves:
    """Every phase a record moves from and to, where the roll moves it: its step, a restart's
    intent, a resumed restart's wait."""
    seen: Moves = set()

    def watched(function: Any, before: int = 0) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record: NodeRecord = args[before]
            done = function(*args, **kwargs)
            after = getattr(done, "record", done)
            if after.phase is not record.phase:
                seen.add((record.phase, after.phase))
            return done

        return wrapper

    monkeypatch.setattr(looks, "step", watched(looks.step))
    monkeypatch.setattr(looks, "restarted", watched(looks.restarted))
    monkeypatch.setattr(effects, "_intent", watched(effects._intent))
    return seen


def test_every_move_of_a_simulated_roll_is_one_of_the_node_s_transitions(moves: Moves) -> None:
    for seed in range(4):
        for dedicated in (False, True):
            cluster = random_cluster(
                random.Random(seed), VirtualClock(), 3 + seed % 3, controller_only=dedicated
            )
            SimRoll(cluster).roll()
        batches = rack_cluster(random.Random(seed), VirtualClock(), 6, racks=3, min_isr=(2, 2))
        SimRoll(batches).roll(max_batch_size=2)
        failing = random_cluster(random.Random(seed), VirtualClock(), 4, catch_up=(900.0, 1200.0))
        for sim in failing.nodes.values():  # every ISR rejoined only at the end: no progress
            sim.rejoin = dict.fromkeys(sim.rejoin, 1.0)
        SimRoll(failing).roll(safety_wait=120)
    allowed = {(a, b) for a, b, _ in TRANSITIONS}
    assert moves - allowed == set(), "moves TRANSITIONS does not list"
    # The watch itself works: the usual life of a node, and its waits, were seen.
    assert {(Phase.NEW, Phase.PENDING), (Phase.PENDING, Phase.RESTARTING)} <= moves
    assert (Phase.RESTARTING, Phase.CATCHING_UP) in moves
    assert any(b is Phase.RECOVERING for _, b in moves), moves


def test_every_phase_has_a_way_in_and_every_one_but_the_ends_a_way_out() -> None:
    into = {b for _, b, _ in TRANSITIONS}
    out = {a for a, _, _ in TRANSITIONS}
    assert set(Phase) - {Phase.NEW} <= into
    assert set(Phase) - {Phase.DONE, Phase.LEFT_OUT} <= out
    assert all(when for _, _, when in TRANSITIONS)

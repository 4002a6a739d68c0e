"""What a controller gives a roll beside its options (`roll.cli.session.opened`): a Lease of the
cluster's own instead of the namespace's, gates of its own (a hold annotation), after the
options' and the pause's, and the cluster's name. Without them a roll is wired as `rollguard
roll` wires it (the name guessed from the options, said once). Nothing is asked of the API
here: a session is built, not started."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from rollguard.roller.options import ENV_PREFIX
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.cli.session import opened
from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.roller.roll.gates.pause import PauseGate
from rollguard.roller.roll.stores.lease_kubernetes import KUBERNETES_LEASE, KubernetesLease
from rollguard.shared.retry import RetryStats

from helpers import Pki


class Held:
    kind = GateKind.PAUSE
    name = "rollguard.io/paused"

    async def check(self) -> Closed | None:
        return Closed(GateKind.PAUSE, self.name, "held")


def options(pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RollOptions:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    environ = {
        "ROLLGUARD_NAMESPACE": "kafka",
        "ROLLGUARD_SELECTOR": "app=kafka",
        "ROLLGUARD_BOOTSTRAP": "127.0.0.1:9",
        "ROLLGUARD_CERT": str(pki.client_cert),
        "ROLLGUARD_KEY": str(pki.client_key),
        "ROLLGUARD_CACERT": str(pki.ca),
        "ROLLGUARD_STATE_DIR": str(tmp_path / "state"),
    }
    return RollOptions.load(argparse.Namespace(), environ, ENV_PREFIX, command="roll")


def test_a_controller_s_roll_takes_the_cluster_s_lease_and_its_gates(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held()

    async def built() -> None:
        given = options(pki, tmp_path, monkeypatch)
        async with opened(
            "roll",
            given,
            RetryStats(),
            "r1",
            lease_name="rollguard-roll-prod",
            gates=(held,),
            cluster="prod",
        ) as session:
            assert session.cluster == session.events.cluster == "prod"
            assert isinstance(session.lease, KubernetesLease)
            assert session.lease.name == session.lease_name == "rollguard-roll-prod"
            kinds = [type(g) for g in session.gates.gates]
            assert kinds == [PauseGate, Held]  # the pause first, then the controller's
            assert await session.gates.closed() == [await held.check()]

    asyncio.run(built())


def test_without_them_a_roll_takes_the_namespace_s_lease_and_the_pause_alone(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def built() -> None:
        async with opened("roll", options(pki, tmp_path, monkeypatch), RetryStats(), "r1") as s:
            assert isinstance(s.lease, KubernetesLease) and s.lease.name == KUBERNETES_LEASE
            assert [type(g) for g in s.gates.gates] == [PauseGate]
            assert s.cluster == s.events.cluster == "kafka"  # after the namespace

    asyncio.run(built())
    guessed = [r for r in caplog.records if "the cluster is named 'kafka'" in r.getMessage()]
    assert len(guessed) == 1

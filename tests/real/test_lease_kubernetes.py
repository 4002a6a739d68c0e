"""The Kubernetes Lease of one roll per cluster (`rollguard.roller.roll.stores.lease_kubernetes`)
through real lightkube against a real API server (the shared control plane, `kube`), as a roller
Job's ServiceAccount bound to the documented Role writes it, with the API server's own
resourceVersion conflicts and RBAC refusals. The lease file and the lease's rules are
tests/sim/test_lease.py."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx2
import lightkube
import pytest
from lightkube import KubeConfig
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.models import Cluster, User
from lightkube.resources.coordination_v1 import Lease as KubeLease
from lightkube.types import PatchType
from test_lease import NS, T0

from rollguard.peers.realkube import ControlPlane
from rollguard.peers.realkube_objects import load_role
from rollguard.roller.roll.stores.lease import (
    LeaseError,
    LeaseHeld,
    LeaseLost,
    holding,
)
from rollguard.roller.roll.stores.lease_kubernetes import KubernetesLease

from helpers import ROOT, Clock, free_port

ROLE = ROOT / "deploy" / "kubernetes" / "roller" / "role.yaml"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class Seen(NamedTuple):
    """One request a roller's client sent to the API server, and the status it got."""

    method: str
    path: str
    status: int


Hook = Callable[[httpx2.Request], Awaitable[None]]


class Recorder(httpx2.AsyncBaseTransport):
    """The roller's HTTP transport to the real API server, recording every exchange; `hook`
    runs before a request is sent: another writer's update between a roller's read and its
    write, or a gate that lets racers write only once all have read."""

    def __init__(self, api: Api) -> None:
        self._api = api
        self._transport = httpx2.AsyncHTTPTransport(verify=api.verify)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._api.hook is not None:
            await self._api.hook(request)
        # Recorded when sent (status 0: no answer yet), so that a request cancelled in flight,
        # as a renewal is when the block ends, is still seen.
        seen = self._api.requests
        seen.append(Seen(request.method, request.url.path, 0))
        index = len(seen) - 1
        response = await self._transport.handle_async_request(request)
        seen[index] = seen[index]._replace(status=response.status_code)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


@dataclass
class Api:
    """The real API server as a roller Job sees it: a ServiceAccount bound to the documented
    Role (deploy/kubernetes/roller/role.yaml) in a namespace of its own; the requests its
    leases send; the Lease as the API server stores it."""

    kube: ControlPlane
    namespace: str
    config: KubeConfig
    verify: ssl.SSLContext
    requests: list[Seen] = field(default_factory=list)
    hook: Hook | None = None

    def client(self, config: KubeConfig | None = None) -> lightkube.AsyncClient:
        # trust_env off: a proxy from the environment would bypass the recording transport.
        config = config or self.config
        return lightkube.AsyncClient(config=config, transport=Recorder(self), trust_env=False)

    def lease(
        self, holder: str, roll_id: str, clock: Callable[[], float], duration: float = 30
    ) -> KubernetesLease:
        client, ns = self.client(), self.namespace
        return KubernetesLease(
            client, ns, "rollguard", holder=holder, roll_id=roll_id, duration=duration, clock=clock
        )

    def stored(self) -> dict[str, Any]:
        """The Lease's JSON as the API server serves it (MicroTimes as it formats them)."""
        single = KubeConfig.from_file(self.kube.admin_kubeconfig).get()
        assert single is not None and single.user is not None
        admin = verify_cluster(single.cluster, single.user, single.abs_file)
        path = f"{LEASES.format(namespace=self.namespace)}/rollguard"
        with httpx2.Client(base_url=self.kube.server, verify=admin, trust_env=False) as http:
            answer = http.get(path)
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found

    def edit(self, patch: dict[str, Any]) -> None:
        """Another writer (the admin) changes the Lease: its resourceVersion moves on."""
        self.kube.client().patch(
            KubeLease, "rollguard", patch, namespace=self.namespace, patch_type=PatchType.MERGE
        )

    def writes(self) -> list[tuple[str, int]]:
        """The rollers' writes of the Lease, in order: (method, status)."""
        leases = LEASES.format(namespace=self.namespace)
        writes = [r for r in self.requests if r.method in ("POST", "PUT")]
        return [(r.method, r.status) for r in writes if r.path.startswith(leases)]


def roller_config(kube: ControlPlane, namespace: str) -> KubeConfig:
    """A kubeconfig of ServiceAccount rollguard-roller bound to the documented Role, once RBAC
    lets it use leases."""
    role = load_role(ROLE, namespace)
    lease = ("update", "leases", "coordination.k8s.io")
    return KubeConfig.from_file(kube.role_account(namespace, role, "rollguard-roller", can=lease))


@pytest.fixture
def api(kube: ControlPlane, kube_namespace: str) -> Api:
    config = roller_config(kube, kube_namespace)
    single = config.get()
    assert single is not None and single.user is not None
    verify = verify_cluster(single.cluster, single.user, single.abs_file)
    return Api(kube, kube_namespace, config, verify)


async def closing(*leases: KubernetesLease) -> None:
    for lease in leases:
        await lease.client.close()


def test_a_kubernetes_lease_is_written_as_a_lease(api: Api) -> None:
    clock = Clock(T0)  # a whole second: the MicroTime must still get its six digits

    async def scenario() -> None:
        lease = api.lease("roller-abc:1", "r1", clock)
        await lease.acquire()
        await closing(lease)

    asyncio.run(scenario())
    obj = api.stored()
    assert obj["spec"] == {
        "holderIdentity": "roller-abc:1",
        "leaseDurationSeconds": 30,
        "acquireTime": "2026-11-23T11:00:02.000001Z",
        "renewTime": "2026-11-23T11:00:02.000001Z",
        "leaseTransitions": 0,
    }
    assert obj["metadata"]["annotations"] == {"rollguard.io/roll-id": "r1"}
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "rollguard"}
    assert api.writes() == [("POST", 201)]


def test_a_second_kubernetes_roller_is_refused_even_to_resume(api: Api) -> None:
    clock = Clock(T0)

    async def scenario() -> list[str]:
        first = api.lease("roller-abc:1", "r1", clock)
        second = api.lease("roller-def:1", "r2", clock)
        resume = api.lease("roller-ghi:1", "r1", clock)
        await first.acquire()
        clock.now += 12
        messages = []
        for other in (second, resume):
            with pytest.raises(LeaseHeld) as held:
                await other.acquire()
            messages.append(str(held.value))
        await closing(first, second, resume)
        return messages

    expected = (
        "cluster is being rolled by roller-abc:1 (roll r1) since 2026-11-23T11:00:02Z; "
        "its lease expires in 18s"
    )
    resuming = "; that roller is still running this roll: resume it once it has stopped"
    assert asyncio.run(scenario()) == [expected, expected + resuming]
    assert api.stored()["spec"]["holderIdentity"] == "roller-abc:1"
    assert api.writes() == [("POST", 201)]  # the refused ones read, and wrote nothing


def test_kubernetes_rollers_racing_for_the_lease_exactly_one_wins(api: Api) -> None:
    """Five rollers, each with a client of its own; none writes before all have read (a gate
    in their transport), so all five writes race on the API server with the same view."""
    clock = Clock(T0)

    async def race(round_: str) -> list[BaseException | None]:
        gate = asyncio.Barrier(5)
        written: set[int] = set()

        async def read_before_anyone_writes(request: httpx2.Request) -> None:
            racer = id(asyncio.current_task())
            if request.method in ("POST", "PUT") and racer not in written:
                written.add(racer)
                async with asyncio.timeout(30):  # a racer that failed before its write
                    await gate.wait()

        api.hook = read_before_anyone_writes
        racers = [api.lease(f"roller-{round_}-{i}:1", round_, clock) for i in range(5)]
        outcomes = await asyncio.gather(*(r.acquire() for r in racers), return_exceptions=True)
        await closing(*racers)
        return outcomes

    winning = {"first": ("POST", 201), "takeover": ("PUT", 200)}
    for round_ in ("first", "takeover"):  # a lease created, then an expired one taken over
        api.requests.clear()
        outcomes = asyncio.run(race(round_))
        assert outcomes.count(None) == 1, outcomes
        winner = f"roller-{round_}-{outcomes.index(None)}:1"
        assert api.stored()["spec"]["holderIdentity"] == winner
        for lost in outcomes:
            if lost is not None:
                assert isinstance(lost, LeaseHeld) and lost.holder == winner
        # The API server let exactly one write through: the four others were 409s.
        method, status = winning[round_]
        assert sorted(api.writes()) == sorted([(method, status)] + [(method, 409)] * 4)
        clock.now += 31
    assert api.stored()["spec"]["leaseTransitions"] == 1


def test_a_write_between_read_and_update_is_a_409_and_the_writer_wins(api: Api) -> None:
    """The race made certain: just before this roller's update is sent, another writer
    updates the Lease, so the update carries a stale resourceVersion."""
    clock = Clock(T0)

    async def other_roller_first(request: httpx2.Request) -> None:
        if request.method == "PUT" and request.url.path.endswith("/leases/rollguard"):
            api.hook = None
            api.edit({
                "spec": {"holderIdentity": "roller-zzz:1",
                         "renewTime": "2026-11-23T11:00:40.000000Z"},
                "metadata": {"annotations": {"rollguard.io/roll-id": "r9"}},
            })  # fmt: skip

    async def scenario() -> None:
        old = api.lease("roller-old:1", "r1", clock)
        await old.acquire()
        clock.now += 35  # expired
        api.requests.clear()
        api.hook = other_roller_first
        candidate = api.lease("roller-new:1", "r2", clock)
        with pytest.raises(LeaseHeld, match=r"by roller-zzz:1 \(roll r9\)"):
            await candidate.acquire()
        await closing(old, candidate)

    asyncio.run(scenario())
    # The one update got the API server's 409; then a read showed the live holder.
    assert api.writes() == [("PUT", 409)]
    assert api.stored()["spec"]["holderIdentity"] == "roller-zzz:1"


def test_renewal_retries_a_conflict_that_did_not_change_the_holder(api: Api) -> None:
    clock = Clock(T0)

    async def label_it(request: httpx2.Request) -> None:
        if request.method == "PUT":
            api.hook = None
            api.edit({"metadata": {"labels": {"x": "y"}}})

    async def scenario() -> None:
        lease = api.lease("roller-abc:1", "r1", clock)
        await lease.acquire()
        clock.now += 10
        api.requests.clear()
        api.hook = label_it
        await lease.renew()
        await closing(lease)

    asyncio.run(scenario())
    obj = api.stored()
    assert obj["spec"]["renewTime"] == "2026-11-23T11:00:12.000001Z"
    assert obj["metadata"]["labels"]["x"] == "y"  # the other writer's change is kept
    assert api.writes() == [("PUT", 409), ("PUT", 200)]


def test_an_expired_kubernetes_lease_is_taken_over_and_release_clears_it(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0)

    async def scenario() -> None:
        old = api.lease("roller-abc:1", "r1", clock)
        new = api.lease("roller-def:1", "r2", clock)
        await old.acquire()
        clock.now += 31
        with caplog.at_level(
            logging.WARNING, logger="rollguard.roller.roll.stores.lease_kubernetes"
        ):
            await new.acquire()
        with pytest.raises(LeaseLost, match=r"now held by roller-def:1 \(roll r2\)"):
            await old.renew()
        await old.release()  # not its lease: nothing changes
        assert api.stored()["spec"]["holderIdentity"] == "roller-def:1"
        await new.release()
        released = api.stored()
        assert released["spec"]["holderIdentity"] == ""
        assert released["spec"]["leaseDurationSeconds"] == 1
        assert "annotations" not in released["metadata"]
        third = api.lease("roller-ghi:1", "r3", clock)
        await third.acquire()  # at once: a released lease has no holder
        await closing(old, new, third)

    asyncio.run(scenario())
    assert "took over the lease of roller-abc:1 (roll r1)" in caplog.text
    spec = api.stored()["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("roller-ghi:1", 2)


def test_kubernetes_api_errors_are_one_line_lease_errors(api: Api) -> None:
    ns = api.namespace
    single = api.config.get()
    assert single is not None
    nobody = api.kube.service_account_kubeconfig(ns, "nobody")  # bound to no Role
    configs = {
        "a token the API server does not know": KubeConfig.from_one(
            cluster=single.cluster, user=User(token="not-a-token"), namespace=ns
        ),
        "an account with no rights": KubeConfig.from_file(nobody),
    }

    async def refused(config: KubeConfig) -> str:
        lease = KubernetesLease(
            api.client(config), ns, "rollguard", holder="roller-abc:1", roll_id="r1"
        )
        with pytest.raises(LeaseError) as raised:
            await lease.acquire()
        await closing(lease)
        return str(raised.value)

    messages = {why: asyncio.run(refused(config)) for why, config in configs.items()}
    assert messages == {
        "a token the API server does not know": (
            f"Lease {ns}/rollguard: cannot read it: 401 Unauthorized: Unauthorized"
        ),
        "an account with no rights": (
            f"Lease {ns}/rollguard: cannot read it: 403 Forbidden: leases.coordination.k8s.io "
            f'"rollguard" is forbidden: User "system:serviceaccount:{ns}:nobody" cannot get '
            f'resource "leases" in API group "coordination.k8s.io" in the namespace "{ns}"'
        ),
    }

    async def unreachable() -> str:
        server = Cluster(server=f"http://127.0.0.1:{free_port()}")
        config = KubeConfig.from_one(cluster=server, user=User(), namespace=NS)
        lease = KubernetesLease(
            lightkube.AsyncClient(config=config), NS, "rollguard", holder="h:1", roll_id="r1"
        )
        with pytest.raises(LeaseError) as raised:
            await lease.acquire()
        await lease.client.close()
        return str(raised.value)

    message = asyncio.run(unreachable())
    assert message.startswith("Lease kafka/rollguard: cannot read it: the Kubernetes API did not")
    assert "\n" not in message


def test_holding_a_kubernetes_lease_renews_it(api: Api) -> None:
    async def roll() -> None:
        lease = api.lease("h:1", "r1", time.time, duration=1)
        async with holding(lease, interval=0.05):
            first = api.stored()["spec"]["renewTime"]
            deadline = time.monotonic() + 10
            while api.stored()["spec"]["renewTime"] == first:
                assert time.monotonic() < deadline, "never renewed"
                await asyncio.sleep(0.02)  # the renewal runs on this loop: yield to it
        await closing(lease)

    asyncio.run(roll())
    assert api.stored()["spec"]["holderIdentity"] == ""
    writes = api.writes()
    # The acquire, at least one renewal, the release; a renewal still in flight when the block
    # ended was cancelled (no answer seen: 0); never a conflict.
    assert writes[0] == ("POST", 201) and writes[-1] == ("PUT", 200) and len(writes) >= 3
    assert {status for _, status in writes[1:-1]} <= {200, 0}

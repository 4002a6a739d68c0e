"""A 503 from a reachable agent is an answer, not an agent that cannot be reached; and every
message about an agent names its URL. The client against HTTPS peers on 127.0.0.1 (waits are
injected: nothing here sleeps), the messages as pure functions."""

from __future__ import annotations

import asyncio
import socket

from rollguard.roller.agent_client import NO_SAMPLE_YET_RETRIES, AgentClient
from rollguard.roller.kafka_admin import refused_everywhere
from rollguard.roller.model import AgentUnavailable, Node, PlatformView, Role, describe_answer
from rollguard.roller.roll.node.actions import AwaitUnknown
from rollguard.roller.roll.node.after import after_restart
from rollguard.roller.roll.node.before import decide
from rollguard.shared.retry import Retrying, RetryPolicy, RetryStats
from rollguard.shared.tls import client_context

from helpers import HttpsPeer, Pki, answer, free_port


class Agent503:
    """Answers like an agent whose broker is not ready: 503 with its JSON reason."""

    def __init__(self, reason: str, retry_after: str | None = "1", then: bytes | None = None):
        self.reason = reason
        self.retry_after = retry_after
        self.then = then  # a 200 body after the first 503, if any
        self.requests = 0

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        self.requests += 1
        status, body = 503, b'{"error": "%s", "message": "not yet"}' % self.reason.encode()
        if self.then is not None and self.requests > 1:
            status, body = 200, self.then
        headers = [(b"content-type", b"application/json")]
        if status == 503 and self.retry_after is not None:
            headers.append((b"retry-after", self.retry_after.encode()))
        await answer(send, status, body, headers)


def ask(pki: Pki, url: str, *, once: bool = False) -> tuple[object, RetryStats, list[float]]:
    stats, waits = RetryStats(), []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    async def go() -> object:
        tls = client_context(pki.ca, pki.client_cert, pki.client_key)
        client = AgentClient(tls, RetryPolicy(), stats=stats, timeout=2, sleep=sleep,
                             uniform=lambda: 0.0)  # fmt: skip
        async with client:
            return await client.broker_state(url, once=once)

    return asyncio.run(go()), stats, waits


def counts(stats: RetryStats) -> tuple[int, int, int, int]:
    c = stats.snapshot()["agent-broker-state"]
    return c.successes, c.not_ready, c.retries, c.failures


def test_a_503_with_the_agents_reason_is_answered_at_once_and_counted_not_ready(pki: Pki) -> None:
    app = Agent503("jmx-unreachable")
    with HttpsPeer(app, pki) as peer:
        answer, stats, waits = ask(pki, peer.url)
    assert isinstance(answer, AgentUnavailable) and answer.not_ready
    assert (answer.status, answer.reason, answer.message) == (503, "jmx-unreachable", "not yet")
    assert app.requests == 1 and waits == []
    assert counts(stats) == (0, 1, 0, 0)  # an answer: not a failure


def test_no_sample_yet_is_asked_again_after_retry_after_a_bounded_number_of_times(
    pki: Pki,
) -> None:
    app = Agent503("no-sample-yet", retry_after="1")
    with HttpsPeer(app, pki) as peer:
        answer, stats, waits = ask(pki, peer.url)
    assert isinstance(answer, AgentUnavailable) and answer.reason == "no-sample-yet"
    assert app.requests == 1 + NO_SAMPLE_YET_RETRIES
    assert waits == [1.0] * NO_SAMPLE_YET_RETRIES  # the agent's Retry-After, not the backoff
    assert counts(stats) == (0, 1, NO_SAMPLE_YET_RETRIES, 0)


def test_an_agent_that_just_started_is_read_as_soon_as_its_first_sample_is_there(
    pki: Pki,
) -> None:
    app = Agent503("no-sample-yet", retry_after=None, then=b'{"brokerState": 3}')
    with HttpsPeer(app, pki) as peer:
        answer, stats, waits = ask(pki, peer.url)
    assert not isinstance(answer, AgentUnavailable)
    assert app.requests == 2 and waits == [0.3]  # no Retry-After: the policy's first backoff
    assert counts(stats) == (1, 0, 1, 0)


def test_a_poll_asks_once_even_when_the_agent_has_no_sample_yet(pki: Pki) -> None:
    app = Agent503("no-sample-yet")
    with HttpsPeer(app, pki) as peer:
        answer, stats, waits = ask(pki, peer.url, once=True)
    assert isinstance(answer, AgentUnavailable) and app.requests == 1 and waits == []
    assert counts(stats) == (0, 1, 0, 0)


def test_retries_of_an_unreachable_agent_are_announced_with_its_url(pki: Pki) -> None:
    url = f"https://127.0.0.1:{free_port()}"
    said: list[Retrying] = []

    async def go() -> object:
        tls = client_context(pki.ca, pki.client_cert, pki.client_key)
        policy = RetryPolicy(max_retries=2, initial_backoff_ms=1, max_backoff_ms=1)
        async with AgentClient(tls, policy, on_retry=said.append) as client:
            return await client.broker_state(url)

    answer = asyncio.run(go())
    assert isinstance(answer, AgentUnavailable) and answer.reason == "unreachable"
    assert [r.attempt for r in said] == [2, 3]
    line = str(said[0])
    assert line.startswith(f"retrying 2/3 in 1ms: agent-broker-state {url}/v1/broker-state: ")
    assert "ConnectError: [Errno 111]" in line


# ---- every message about an agent names it ------------------------------------------------

URL = "https://kafka-1.kafka.prod.svc:8443/v1/broker-state"
NODE = Node(1, "kafka-1", frozenset({Role.BROKER}), URL)
NOT_READY = PlatformView(exists=True, ready=False, up_to_date=False)
UNRESOLVED = AgentUnavailable(
    URL, None, "unreachable", "ConnectError: [Errno -2] Name or service not known"
)
NO_JMX = AgentUnavailable(URL, 503, "jmx-unreachable", "connection refused")


def test_an_agent_that_cannot_be_read_is_named_by_its_url_in_the_reason_to_wait() -> None:
    action = decide(NODE, NOT_READY, None, agent=UNRESOLVED, waited=301.0)
    assert isinstance(action, AwaitUnknown)
    assert action.reason == (
        f"kafka-1 is not ready and its agent cannot be read ({URL}: unreachable: ConnectError: "
        "[Errno -2] Name or service not known): its broker may be recovering, so it is not "
        "restarted"
    )
    step = after_restart(NODE, NOT_READY, UNRESOLVED, before="a", waited=301.0, timeout=300.0)
    assert URL in step.reason


def test_describe_answer_tells_not_ready_from_unavailable_and_names_the_agent() -> None:
    assert describe_answer(NO_JMX) == (
        f"not ready ({URL}: HTTP 503 jmx-unreachable: connection refused)"
    )
    assert describe_answer(UNRESOLVED) == (
        f"unavailable ({URL}: unreachable: ConnectError: [Errno -2] Name or service not known)"
    )


def test_a_bootstrap_server_that_refuses_fails_the_admin_client_at_once() -> None:
    port = free_port()
    assert refused_everywhere(f"127.0.0.1:{port}") == f"127.0.0.1:{port} refused the connection"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        open_port = listening.getsockname()[1]
        # one server that accepts is enough: the client is left to find it
        assert refused_everywhere(f"127.0.0.1:{port},127.0.0.1:{open_port}") is None

"""The roller's agent client and `rollguard state`, against real HTTPS peers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from rollguard.roller.agent_client import AgentClient, AgentReport, AgentUnavailable
from rollguard.shared.retry import RetryPolicy, RetryStats
from rollguard.shared.states import BrokerState
from rollguard.shared.tls import client_context

from helpers import BIN, Agent, Broker, HttpsPeer, Pki, answer, free_port, rollguard, wait_until

FAST = RetryPolicy(initial_backoff_ms=10, max_backoff_ms=50)


class Scripted:
    """An agent-like ASGI app: answers requests in order from a script, then repeats the last."""

    def __init__(self, *answers: tuple[int, bytes]) -> None:
        self.answers = list(answers)
        self.requests = 0

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        status, body = self.answers[min(self.requests, len(self.answers) - 1)]
        self.requests += 1
        await answer(send, status, body, [(b"content-type", b"application/json")])


NO_SAMPLE = (503, b'{"error": "no-sample-yet", "message": "starting"}')
RUNNING = (200, b'{"brokerState": 3}')
PROXY_ERROR = (502, b"<html>502 Bad Gateway</html>")  # not the agent's answer: retried


def ask(pki: Pki, url: str, policy: RetryPolicy = FAST) -> tuple[object, RetryStats]:
    stats = RetryStats()

    async def go() -> object:
        tls = client_context(pki.ca, pki.client_cert, pki.client_key)
        async with AgentClient(tls, policy, stats=stats, timeout=2) as client:
            return await client.broker_state(url)

    return asyncio.run(go()), stats


@pytest.mark.parametrize(
    ("failure", "failures"), [(NO_SAMPLE, 0), (NO_SAMPLE, 1), (NO_SAMPLE, 3), (PROXY_ERROR, 5)]
)
def test_a_server_that_fails_n_times_then_answers_counts_n_retries_and_one_success(
    pki: Pki, failure: tuple[int, bytes], failures: int
) -> None:
    app = Scripted(*([failure] * failures), RUNNING)
    with HttpsPeer(app, pki) as peer:
        answer, stats = ask(pki, peer.url)
    assert isinstance(answer, AgentReport) and answer.report.broker_state is BrokerState.RUNNING
    counts = stats.snapshot()["agent-broker-state"]
    assert (counts.retries, counts.successes, counts.failures) == (failures, 1, 0)
    assert app.requests == failures + 1


def test_a_permanent_failure_is_one_failure_after_max_retries_plus_one_attempts(pki: Pki) -> None:
    app = Scripted(PROXY_ERROR)
    with HttpsPeer(app, pki) as peer:
        answer, stats = ask(pki, peer.url)
    assert isinstance(answer, AgentUnavailable)
    assert (answer.status, answer.reason) == (502, "http-502")
    assert app.requests == FAST.max_retries + 1
    counts = stats.snapshot()["agent-broker-state"]
    assert (counts.retries, counts.successes, counts.failures) == (5, 0, 1)


def test_a_404_is_not_retried(pki: Pki) -> None:
    app = Scripted((404, b'{"error": "not-found", "message": "old agent"}'))
    with HttpsPeer(app, pki) as peer:
        answer, stats = ask(pki, peer.url)
    assert isinstance(answer, AgentUnavailable) and answer.reason == "not-found"
    assert app.requests == 1 and stats.snapshot()["agent-broker-state"].retries == 0


def test_strimzis_agent_body_is_understood(pki: Pki) -> None:
    body = (
        b'{"brokerState":2,"recoveryState":'
        b'{"remainingLogsToRecover":7,"remainingSegmentsToRecover":70}}'
    )
    with HttpsPeer(Scripted((200, body)), pki) as peer:
        answer, _ = ask(pki, peer.url)
    assert isinstance(answer, AgentReport) and answer.report.recovery is not None
    assert answer.report.recovery.remaining_segments == 70


def test_a_malformed_200_is_unavailable_not_a_crash(pki: Pki) -> None:
    with HttpsPeer(Scripted((200, b'{"brokerState": "yes"}')), pki) as peer:
        answer, _ = ask(pki, peer.url)
    assert isinstance(answer, AgentUnavailable) and answer.reason == "malformed-report"


def test_an_unreachable_agent_is_retried_then_unavailable(pki: Pki) -> None:
    answer, stats = ask(pki, f"https://127.0.0.1:{free_port()}")
    assert isinstance(answer, AgentUnavailable) and answer.status is None
    assert answer.reason == "unreachable" and "ConnectError" in answer.message
    counts = stats.snapshot()["agent-broker-state"]
    assert (counts.retries, counts.failures) == (5, 1)


def test_rollguard_state_against_a_real_agent_prints_reports_and_a_summary(pki: Pki) -> None:
    with Broker("--state", "3") as broker, Agent(pki, broker.address) as agent:
        wait_until(lambda: agent.state().status == 200, timeout=20, what="a first sample")
        tls = [
            *pki.client_flags(),
        ]
        dead = f"https://127.0.0.1:{free_port()}"
        done = rollguard("state", *tls, agent.api, dead, "--retry-initial-backoff-ms", "10")
        assert done.returncode == 1, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].endswith("RUNNING (3); Kafka 4.4.0 (rollguard-test-broker)")
        assert "unavailable (no HTTP answer, unreachable)" in lines[1]
        assert (
            "2 agents: 1 reported, 1 unavailable; agent-broker-state: 1 ok, 2 retries, 1 failed"
        ) in done.stderr

        done = rollguard("state", *tls, agent.api, "--output", "json")
        assert done.returncode == 0
        assert json.loads(done.stdout)["report"]["brokerState"] == 3
        assert json.loads(done.stdout)["report"]["kafkaVersion"] == "4.4.0"


def test_rollguard_state_says_what_a_controller_only_node_runs(pki: Pki) -> None:
    with Broker("--no-broker-state", "--state", "3") as broker, Agent(pki, broker.address) as agent:
        wait_until(lambda: agent.state().status == 503, timeout=20, what="a first sample")
        wait_until(
            lambda: agent.state().json().get("error") == "broker-state-missing",  # type: ignore[union-attr]
            timeout=20,
            what="broker-state-missing",
        )
        done = rollguard("state", *pki.client_flags(), agent.api)
        assert done.returncode == 1  # answered, not ready: a controller-only node has no state
        assert done.stdout.rstrip().endswith("; Kafka 4.4.0 (rollguard-test-broker)"), done.stdout
        done = rollguard("state", *pki.client_flags(), agent.api, "--output", "json")
        said = json.loads(done.stdout.splitlines()[0])
        assert (said["error"], said["kafkaVersion"]) == ("broker-state-missing", "4.4.0")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retry-jitter-factor", "2"], "--retry-jitter-factor 2 must be in [0, 1]"),
        (["--retry-initial-backoff-ms", "99999"], "must not exceed --retry-max-backoff-ms"),
        (["--retry-max-retries", "many"], "--retry-max-retries: 'many' is not a whole number"),
        (["--timeout", "0"], "--timeout: '0' is not a positive number"),
    ],
)
def test_rollguard_state_refuses_bad_settings_with_exit_2(
    pki: Pki, args: list[str], message: str
) -> None:
    done = rollguard(
        "state",
        *pki.client_flags(),
        "https://127.0.0.1:1",
        *args,
    )
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_rollguard_state_reads_its_settings_from_the_environment(pki: Pki) -> None:
    import os

    env = {
        **os.environ,
        "ROLLGUARD_CERT": str(pki.client_cert),
        "ROLLGUARD_KEY": str(pki.client_key),
        "ROLLGUARD_CACERT": str(pki.ca),
        "ROLLGUARD_RETRY_JITTER_FACTOR": "7",
    }
    done = subprocess.run(
        [str(BIN / "rollguard"), "state", "https://127.0.0.1:1"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2 and "--retry-jitter-factor 7 must be in [0, 1]" in done.stderr

"""The agent as users run it: a real process, a JVM serving Kafka's MBeans, curl with certs."""

from __future__ import annotations

import itertools
import re
import shutil
import signal
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from rollguard.certs.pki import Issued, issue, write_pair
from rollguard.shared.tls import read_certificates
from rollguard.shared.wire import parse_time

from helpers import (
    Agent,
    Broker,
    Pki,
    SilentJmxPort,
    curl,
    free_port,
    mounted,
    state_of,
    until_running,
    wait_until,
)


@pytest.fixture(scope="module", autouse=True, params=["persistent", "jmxquery"])
def jmx_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs once with each JMX backend (agents take it from the environment)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROLLGUARD_AGENT_JMX_BACKEND", request.param)
        yield request.param


def test_curl_follows_a_broker_through_starting_recovery_and_running(
    pki: Pki, jmx_backend: str
) -> None:
    # The agent is sampling before the broker starts, so STARTING (1.5 s) is seen however long
    # the agent itself takes to start on a busy machine.
    port = free_port()
    with (
        Agent(pki, f"127.0.0.1:{port}") as agent,
        Broker(
            "--starting-ms",
            "1500",
            # long enough for a jmxquery agent under make test's load (a JVM a sample, seconds
            # each) to read the sum of the segments rise when a thread starts its next log
            "--recovery-ms",
            "12000",
            "--dirs",
            "2",
            "--threads",
            "2",
            "--logs",
            "10",
            "--segments",
            "50",
            port=port,
        ),
    ):
        assert f"({jmx_backend})" in agent.output.text()  # the backend this run is about
        seen = until_running(agent)

    states = [body["brokerState"] for body in seen]
    assert 1 in states and states[-1] == 3
    # the states only move forward: STARTING, then (0.1 s of) RECOVERY, then RUNNING
    assert states == sorted(states)
    # the recovery runs in STARTING, as in most restarts of a real Kafka 4.x broker
    recovering = [body["recovery"] for body in seen if "recovery" in body]
    assert recovering, "no recovery figures were reported"
    assert {body["brokerState"] for body in seen if "recovery" in body} == {1}
    assert {r["phase"] for r in recovering} >= {"recovering"}  # type: ignore[index]
    # 2 dirs x 10 logs, summed, counting down; 2 dirs x 2 threads, each thread on one of its
    # 5 logs of 10 segments at a time: the segments rise again when the threads start new logs
    logs = [r["remainingLogsToRecover"] for r in recovering]  # type: ignore[index]
    segments = [r["remainingSegmentsToRecover"] for r in recovering]  # type: ignore[index]
    assert max(logs) <= 20 and max(segments) <= 40
    assert max(segments) > 10, "the sum over 4 gauges must exceed what one gauge can hold"
    # Each dir's gauges are registered as its loading starts, one dir after the other: the sum
    # may rise in the first reads (10, then 20), and only counts down from its peak.
    peak = logs.index(max(logs))
    assert logs[peak:] == sorted(logs[peak:], reverse=True) and logs[peak] > logs[-1], logs
    assert any(b > a for a, b in itertools.pairwise(segments)), "no thread started a new log"


def test_a_stalled_recovery_stays_in_recovery_with_the_same_figures(pki: Pki) -> None:
    with (
        Broker("--recovery-ms", "2000", "--stall-at", "0.5", "--dirs", "2") as broker,
        Agent(pki, broker.address) as agent,
    ):
        samples: list[dict[str, object]] = []

        def two_later_samples_agree() -> bool:
            body = state_of(agent)
            if body is None or "recovery" not in body:
                return False
            samples.append(body)
            # the broker stops at half way after 1 s; wait until two samples taken 2 s apart
            # (sampledAt differs) report the same remaining work
            return any(
                old["recovery"] == body["recovery"] and old["sampledAt"] != body["sampledAt"]
                for old in samples[:-8]
            )

        wait_until(two_later_samples_agree, timeout=30, interval=0.25, what="a stall")
        # half way through 10 logs a dir (1 thread): 5 logs left in each of the 2 dirs, and
        # each thread between logs (its 5th done, its 6th being opened): 0 segments
        last = samples[-1]
        assert last["brokerState"] == 1
        assert last["recovery"] == {
            "remainingLogsToRecover": 10,
            "remainingSegmentsToRecover": 0,
            "phase": "recovering",
        }


def test_reports_carry_the_broker_jvms_start_time_which_changes_with_a_restart(
    pki: Pki, jmx_backend: str
) -> None:
    port = free_port()
    with Agent(pki, f"127.0.0.1:{port}") as agent:

        def report(other_than: object = None) -> dict[str, object] | None:
            body = state_of(agent)
            if body is None or body.get("brokerStartedAt") in (None, other_than):
                return None
            return body

        with Broker("--state", "3", port=port) as first:
            before = wait_until(report, timeout=20, what="a report with brokerStartedAt")
            started = parse_time(str(before["brokerStartedAt"])).timestamp()
            # the JVM's own start time: after the broker process was launched, before it served
            assert first.launched_at - 0.001 <= started <= first.ready_at
        boot = before["agentBootId"]
        assert isinstance(boot, str) and re.fullmatch("[0-9a-f]{32}", boot)
        with Broker("--state", "3", port=port) as second:
            after = wait_until(
                lambda: report(other_than=before["brokerStartedAt"]),
                timeout=20,
                what="the restarted broker's start time",
            )
            restarted = parse_time(str(after["brokerStartedAt"])).timestamp()
            assert second.launched_at - 0.001 <= restarted <= second.ready_at
            assert restarted > started
        assert after["agentBootId"] == boot  # the same agent, still running


def test_trustme_certificates_work_with_the_agent(trustme_pki: Pki) -> None:
    with Broker("--state", "3") as broker, Agent(trustme_pki, broker.address) as agent:
        body = wait_until(lambda: state_of(agent), timeout=20, what="a 200")
        assert body["brokerState"] == 3


@pytest.fixture(scope="module")
def running_agent(pki: Pki):  # type: ignore[no-untyped-def]
    with Broker("--state", "3") as broker, Agent(pki, broker.address) as agent:
        wait_until(lambda: state_of(agent), timeout=20, what="a first sample")
        yield agent


def test_no_client_certificate_is_refused(running_agent: Agent, pki: Pki) -> None:
    answer = curl(running_agent.api + "/v1/broker-state", pki, no_client_cert=True)
    assert answer.status == 0 and answer.returncode != 0


def test_a_client_certificate_from_another_ca_is_refused(
    running_agent: Agent, pki: Pki, other_pki: Pki
) -> None:
    answer = curl(
        running_agent.api + "/v1/broker-state",
        ca=pki.ca,
        cert=other_pki.client_cert,
        key=other_pki.client_key,
    )
    assert answer.status == 0 and answer.returncode != 0


def test_an_expired_client_certificate_is_refused(
    running_agent: Agent, pki: Pki, tmp_path: Path
) -> None:
    ca_cert = read_certificates(pki.ca, "CA")[0]
    ca_key = serialization.load_pem_private_key(pki.ca.with_suffix(".key").read_bytes(), None)
    # signed by the right CA, valid for one day two years ago
    expired = issue(
        Issued(ca_cert, ca_key),
        "old-roller",
        server=False,  # type: ignore[arg-type]
        days=1,
        now=datetime.now(UTC) - timedelta(days=730),
    )
    write_pair(expired, tmp_path / "old.crt", tmp_path / "old.key", force=False)
    answer = curl(
        running_agent.api + "/v1/broker-state",
        ca=pki.ca,
        cert=tmp_path / "old.crt",
        key=tmp_path / "old.key",
    )
    assert answer.status == 0 and answer.returncode != 0
    # the same request with a valid certificate is answered: the refusal is about expiry
    assert running_agent.state().status == 200


def test_a_started_broker_reports_the_kafka_it_runs(running_agent: Agent) -> None:
    body = running_agent.state().json()
    assert (body["kafkaVersion"], body["kafkaCommitId"]) == ("4.4.0", "rollguard-test-broker")


def test_tls_below_1_2_is_refused_and_1_2_is_served(running_agent: Agent) -> None:
    old = running_agent.state(extra=["--tlsv1", "--tls-max", "1.1"])
    assert old.status == 0 and old.returncode != 0
    assert running_agent.state(extra=["--tlsv1.2", "--tls-max", "1.2"]).status == 200
    assert running_agent.state(extra=["--tlsv1.3"]).status == 200


def test_unknown_versions_and_paths_are_404_with_json(running_agent: Agent) -> None:
    for path in ("/v5/broker-state", "/v1/nope", "/"):
        answer = running_agent.state(path)
        assert answer.status == 404, path
        assert answer.json()["error"] == "not-found"  # type: ignore[index]


def test_other_methods_are_405_with_json(running_agent: Agent) -> None:
    for method in ("POST", "PUT", "DELETE"):
        answer = running_agent.state(method=method)
        assert answer.status == 405, method
        assert answer.json()["error"] == "method-not-allowed"  # type: ignore[index]


def test_ready_probe_and_metrics(running_agent: Agent) -> None:
    assert curl(running_agent.probe + "/v1/ready").status == 204
    metrics = curl(running_agent.probe + "/metrics")
    assert metrics.status == 200
    assert "rollguard_agent_broker_state 3.0" in metrics.body
    assert "rollguard_agent_ready 1.0" in metrics.body
    assert "rollguard_agent_sample_duration_seconds" in metrics.body
    assert 'rollguard_agent_sampler_errors_total{reason="jmx-timeout"} 0.0' in metrics.body


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        # a controller-only node once its server has started, and while it still starts
        (("--no-broker-state", "--state", "3"), "broker-state-missing"),
        (("--no-broker-state", "--starting-ms", "600000"), "server-starting"),
        (("--malformed-state",), "malformed-value"),
    ],
)
def test_no_usable_broker_state_is_503_with_the_reason(
    pki: Pki, flags: tuple[str, ...], reason: str
) -> None:
    with Broker(*flags) as broker, Agent(pki, broker.address) as agent:
        answer = wait_until(
            lambda: (
                (a := agent.state()).status == 503 and a.json()["error"] != "no-sample-yet" and a
            ),
            timeout=20,
            what="a 503",
        )
        body = answer.json()
        assert body["error"] == reason
        assert curl(agent.probe + "/v1/ready").status == 503
        # a started controller-only node says what it runs all the same (its app-info MBean)
        started = reason == "broker-state-missing"
        assert body.get("kafkaVersion") == ("4.4.0" if started else None), body
        assert body.get("kafkaCommitId") == ("rollguard-test-broker" if started else None), body


def test_jmx_closed_gives_503_quickly_and_200_once_jmx_is_back(pki: Pki) -> None:
    port = free_port()
    with Agent(pki, f"127.0.0.1:{port}") as agent:
        closed = wait_until(
            lambda: (
                (a := agent.state()).status == 503 and a.json()["error"] == "jmx-unreachable" and a
            ),
            timeout=10,
            what="503 jmx-unreachable",
        )
        assert "127.0.0.1" in closed.json()["message"]
        with Broker("--state", "3", port=port):
            wait_until(lambda: state_of(agent), timeout=20, what="200 once JMX is back")
        wait_until(lambda: agent.state().status == 503, timeout=20, what="503 once JMX is gone")
        assert curl(agent.probe + "/v1/ready").status == 503


def test_hung_jmx_gives_503_after_the_time_limit_while_the_agent_keeps_answering(pki: Pki) -> None:
    silent = SilentJmxPort()
    try:
        with Agent(pki, f"127.0.0.1:{silent.port}", timeout="2") as agent:
            started = time.monotonic()
            timed_out = wait_until(
                lambda: (
                    (a := agent.state()).status == 503 and a.json()["error"] == "jmx-timeout" and a
                ),
                timeout=15,
                interval=0.1,
                what="503 jmx-timeout",
            )
            assert time.monotonic() - started < 6, "a hung JMX port must fail within its limit"
            # while rounds keep hanging, every request is still answered at once
            answers = [agent.state() for _ in range(5)]
            assert all(a.status == 503 for a in answers)
            assert max(a.seconds for a in answers) < 1.0
            assert timed_out.json()["message"]
            assert silent.accepted, "the agent never even connected to the JMX port"
    finally:
        silent.close()


def test_jmx_credentials_are_used_and_a_wrong_password_is_503(pki: Pki, tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("# JMX monitoring user\nmonitor s3cret\n")
    bad.write_text("monitor wrong\n")
    with Broker("--state", "3", "--jmx-user", "monitor", "--jmx-password", "s3cret") as broker:
        with Agent(pki, broker.address, "--jmx-credentials-file", str(good)) as agent:
            wait_until(lambda: state_of(agent), timeout=20, what="200 with credentials")
            assert "s3cret" not in agent.output.text()
        with Agent(pki, broker.address, "--jmx-credentials-file", str(bad)) as agent:
            answer = wait_until(
                lambda: (
                    (a := agent.state()).status == 503
                    and a.json()["error"] != "no-sample-yet"
                    and a
                ),
                timeout=20,
                what="503",
            )
            assert answer.json()["error"] == "jmx-auth-failed"
            assert "wrong" not in agent.output.text()


def test_ready_file_follows_readiness_and_is_removed_on_stop(pki: Pki, tmp_path: Path) -> None:
    ready = tmp_path / "kafka-ready"
    with Broker("--starting-ms", "1500", "--running-ms", "3000") as broker:
        agent = Agent(pki, broker.address, "--ready-file", str(ready))
        try:
            assert not ready.exists()
            wait_until(ready.exists, timeout=20, what="the ready file")
            # controlled shutdown (6, 7) still counts as ready; NOT_RUNNING (0) does not
            wait_until(lambda: not ready.exists(), timeout=20, what="the ready file to go")
            wait_until(lambda: broker.process.poll() is not None, timeout=10, what="broker exit")
        finally:
            agent.stop()


@pytest.mark.parametrize(
    ("signum", "expected"), [(signal.SIGTERM, 0), (signal.SIGINT, 3)], ids=["SIGTERM", "SIGINT"]
)
def test_a_signal_stops_the_agent_within_seconds_and_removes_the_ready_file(
    pki: Pki, tmp_path: Path, signum: signal.Signals, expected: int
) -> None:
    ready = tmp_path / "ready"
    silent = SilentJmxPort()  # a JMX round is hanging when SIGTERM arrives
    try:
        agent = Agent(
            pki,
            f"127.0.0.1:{silent.port}",
            "--ready-file",
            str(ready),
            "--max-sample-age",
            "60",
            timeout="30",
        )
        wait_until(lambda: silent.accepted, timeout=10, what="a JMX round in flight")
        started = time.monotonic()
        code = agent.stop(signum)
        assert time.monotonic() - started < 3
        assert code == expected  # SIGTERM is how Kubernetes stops it: a clean exit
        assert not ready.exists()
        assert "stopped" in agent.output.text()
    finally:
        silent.close()


def test_rotated_certificates_are_used_without_a_restart(
    pki: Pki, other_pki: Pki, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    secret = mounted(pki, live)
    with (
        Broker("--state", "3") as broker,
        Agent(secret, broker.address, "--cert-reload-interval", "0.2") as agent,
    ):
        wait_until(lambda: state_of(agent), timeout=20, what="a first 200")
        # rotate everything to the other CA, as a replaced Kubernetes secret would
        for name in ("ca.crt", "agent.crt", "agent.key"):
            shutil.copy(other_pki.ca.parent / name, live / name)
        url = agent.api + "/v1/broker-state"
        wait_until(lambda: curl(url, other_pki).status == 200, timeout=10, what="the new files")
        # the old client certificate is no longer trusted, even by a client trusting the new CA
        old = curl(url, ca=other_pki.ca, cert=pki.client_cert, key=pki.client_key)
        assert old.status == 0
        # a half-written rotation is refused and the current files keep serving
        (live / "agent.key").write_text("not a key")
        wait_until(lambda: "cannot be used" in agent.output.text(), timeout=10, what="an error")
        assert curl(url, other_pki).status == 200
        metrics = urllib.request.urlopen(agent.probe + "/metrics").read().decode()
        assert 'rollguard_agent_tls_reloads_total{result="ok"} 1.0' in metrics
        assert 'rollguard_agent_tls_reloads_total{result="error"} 1.0' in metrics


def test_keep_alive_for_curl_and_the_rollers_http_client(running_agent: Agent, pki: Pki) -> None:
    import asyncio
    import subprocess

    from rollguard.roller.agent_client import AgentClient
    from rollguard.shared.retry import RetryPolicy
    from rollguard.shared.tls import client_context

    url = running_agent.api + "/v1/broker-state"
    # curl with two URLs reuses its connection when the server keeps it open
    done = subprocess.run(
        ["curl", "-sS", *["-o", "/dev/null"] * 3, "-w", "%{http_code} %{num_connects}\n",
         "--cert", str(pki.client_cert), "--key", str(pki.client_key), "--cacert", str(pki.ca),
         url, url, url],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert done.stdout.split("\n")[:3] == ["200 1", "200 0", "200 0"]

    async def rollers_connections() -> set[object]:
        tls = client_context(pki.ca, pki.client_cert, pki.client_key)
        async with AgentClient(tls, RetryPolicy()) as client:
            ports = set()
            for _ in range(5):
                response = await client._http.get(url)
                assert response.status_code == 200
                ports.add(response.extensions["network_stream"].get_extra_info("client_addr"))
            return ports

    assert len(asyncio.run(rollers_connections())) == 1  # five requests, one TLS connection

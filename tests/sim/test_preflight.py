"""Never act blind: the check of every agent before a roll's first action, over real TLS."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from time import monotonic, time

import pytest

from rollguard.peers.commandline import rollguard_args
from rollguard.roller.agent_client import AgentClient, Probe
from rollguard.roller.model import AgentReport, AgentUnavailable, Node, Role
from rollguard.roller.roll.preflight import preflight, problem
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.states import BrokerState
from rollguard.shared.tls import client_context
from rollguard.shared.wire import BrokerStateReport

from helpers import HttpsPeer, Pki, answer, inventory, run

URL = "https://kafka-0:8443/v1/broker-state"
OK = AgentReport(URL, BrokerStateReport(BrokerState.RUNNING))


@pytest.mark.parametrize(
    ("probe", "found"),
    [
        (Probe(OK, 0.4), None),
        (Probe(OK, None), None),  # no Date header (Strimzi's agent): nothing to compare
        (Probe(OK, 30.8), None),  # within 30 s and the header's one-second resolution
        (Probe(OK, 600.0), "600s ahead of the roller's"),
        (Probe(OK, -45.0), "45s behind the roller's"),
        (
            Probe(AgentUnavailable(URL, None, "tls-refused", "alert certificate required"), None),
            "refused the roller's client certificate",
        ),
        (
            Probe(AgentUnavailable(URL, None, "tls-untrusted", "certificate is not yet valid"), 0),
            "certificate is not trusted (certificate is not yet valid)",
        ),
        (Probe(AgentUnavailable(URL, 404, "not-found", ""), 0), "HTTP 404"),
        # A silent or unwell agent may be a node that is down: not a configuration error.
        (Probe(AgentUnavailable(URL, None, "unreachable", "refused"), None), None),
        (Probe(AgentUnavailable(URL, 503, "jmx-unreachable", "down"), 0), None),
    ],
)
def test_what_makes_acting_blind(probe: Probe, found: str | None) -> None:
    text = problem(probe, 30.0)
    assert (text is None) is (found is None)
    if found is not None:
        assert text is not None and found in text


def dated_agent(skew: float):  # type: ignore[no-untyped-def]
    """An agent-shaped ASGI app whose clock (its HTTP Date) is `skew` seconds off ours."""

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        headers = [
            (b"content-type", b"application/json"),
            (b"date", formatdate(time() + skew, usegmt=True).encode()),
        ]
        await answer(send, 200, b'{"brokerState":3}', headers)

    return app


@pytest.fixture
def skewed(pki: Pki) -> Iterator[HttpsPeer]:
    with HttpsPeer(dated_agent(600), pki, date_header=False) as agent:
        yield agent


def check(
    pki: Pki, urls: list[str], folder: Path, *, ca: Path | None = None, force: bool = False
) -> None:
    async def go() -> None:
        tls = client_context(ca or pki.ca, pki.client_cert, pki.client_key)
        async with AgentClient(tls, RetryPolicy(max_retries=0), timeout=5) as agents:
            nodes = [
                Node(i, f"kafka-{i}", frozenset({Role.BROKER}), url) for i, url in enumerate(urls)
            ]
            events = EventLog(folder / "events.jsonl", "t")
            await preflight(agents, nodes, 30.0, events, force=force)

    asyncio.run(go())


@pytest.fixture
def agent(pki: Pki) -> Iterator[HttpsPeer]:
    with HttpsPeer(dated_agent(0), pki, date_header=False) as peer:
        yield peer


def closed_url() -> str:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{closed.getsockname()[1]}"


def test_an_agent_whose_clock_is_ten_minutes_ahead_stops_the_roll(
    pki: Pki, skewed: HttpsPeer, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        check(pki, [skewed.url], tmp_path)
    text = str(caught.value)
    assert "nothing was restarted" in text and "kafka-0" in text and skewed.url in text
    assert "ahead of the roller's" in text and "--max-clock-skew" in text


def test_an_agent_the_roller_does_not_trust_stops_the_roll(
    pki: Pki, other_pki: Pki, skewed: HttpsPeer, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        check(pki, [skewed.url], tmp_path, ca=other_pki.ca)
    assert "certificate is not trusted" in str(caught.value)
    assert "certificate verify failed" in str(caught.value)


def test_a_silent_agent_is_unknown_not_a_configuration_error(
    pki: Pki, agent: HttpsPeer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = closed_url()
    check(pki, [agent.url, url], tmp_path)  # no error: the node is waited for during the roll
    events = (tmp_path / "events.jsonl").read_text()
    assert '"action": "preflight"' in events and "unreachable" in events
    # The warning names the node and the URL it tried.
    assert any(f"kafka-1 ({url})" in r.getMessage() for r in caplog.records)


def test_not_one_agent_answering_is_a_configuration_error(pki: Pki, tmp_path: Path) -> None:
    urls = [closed_url(), closed_url()]
    with pytest.raises(ConfigError) as caught:
        check(pki, urls, tmp_path)
    text = str(caught.value)
    assert "nothing was restarted" in text and "not one agent answers" in text
    assert f"kafka-0 ({urls[0]})" in text and f"kafka-1 ({urls[1]})" in text
    assert "--on-agent-unreachable force" in text  # the opt-in, named


def test_rolling_without_agents_is_an_explicit_choice(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = closed_url()
    check(pki, [url, "https://kafka-1.nosuch.invalid:8443"], tmp_path, force=True)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert url in said and "kafka-1.nosuch.invalid" in said and "--operation-timeout" in said


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://kafka-1.nosuch.invalid:8443", "'kafka-1.nosuch.invalid' does not resolve ("),
        # `--agent-url https://{pod}.{service}...` with no --service: an empty label.
        ("https://prod-kafka-1..kafka.svc:8443", "'prod-kafka-1..kafka.svc' does not resolve ("),
    ],
)
def test_an_agent_url_that_does_not_resolve_stops_the_roll(
    pki: Pki, agent: HttpsPeer, tmp_path: Path, url: str, why: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check(pki, [agent.url, url], tmp_path)
    text = str(caught.value)
    assert f"kafka-1 ({url}): its host {why}" in text
    assert "kafka-0" not in text  # the agent that answers is not blamed
    assert "--agent-url" in text and "--on-agent-unreachable force" in text


def test_a_roll_whose_agent_urls_resolve_nowhere_exits_2_at_once_naming_them(
    pki: Pki, tmp_path: Path
) -> None:
    agents = [f"https://kafka-{i}.nosuch.invalid:8443" for i in range(3)]
    path = inventory(tmp_path / "inventory.yaml", agents, cluster="prod",
                     restart=f"touch {tmp_path}/restarted-{{i}}")  # fmt: skip
    started = monotonic()
    done = run(rollguard_args("roll", inventory=path, bootstrap="127.0.0.1:1", tls=pki,
                              state_dir=tmp_path / "state"))  # fmt: skip
    took = monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for i in range(3):
        url = f"https://kafka-{i}.nosuch.invalid:8443"
        assert f"kafka-{i} ({url}): its host 'kafka-{i}.nosuch.invalid' does not resolve" in (
            done.stderr
        )
    assert not list(tmp_path.glob("restarted-*"))
    assert took < 20, f"{took:.1f}s"  # a configuration error, not a minute of retries

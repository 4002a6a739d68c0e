"""The persistent JMX backend against the Java test broker: one JVM, one connection held open,
reconnection after a broker restart, the hard time limit, and credentials kept off argv."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rollguard.agent.jmx import JmxCredentials, service_url
from rollguard.agent.jmx_persistent import PersistentJmxBackend, parse_answer
from rollguard.agent.jvm import reader_classpath
from rollguard.agent.readings import QUERIES, FailureReason, SampleError, interpret

from helpers import Broker, SilentJmxPort, free_port

URL = "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"


def backend(address: str, classpath: Path, **kwargs: object) -> PersistentJmxBackend:
    return PersistentJmxBackend(
        service_url(address),
        classpath=classpath,
        queries=QUERIES,
        **kwargs,  # type: ignore[arg-type]
    )


def sum_of(values: list) -> tuple[int, object]:  # type: ignore[type-arg]
    from datetime import UTC, datetime

    report = interpret(values, datetime.now(UTC))
    return int(report.broker_state), report.recovery


def test_compiled_once_into_the_cache_and_reused(tmp_path: Path) -> None:
    first = reader_classpath("java", tmp_path)
    compiled = first / "RollguardJmx.class"
    stamp = compiled.stat().st_mtime_ns
    assert reader_classpath("java", tmp_path) == first
    assert compiled.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no staging folder left


def test_a_runtime_that_cannot_compile_is_named(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cannot compile the JMX reader with 'false'"):
        reader_classpath("false", tmp_path)


def test_every_gauge_of_every_dir_and_thread_in_one_jvm(classpath: Path) -> None:
    async def scenario() -> None:
        jmx = backend(broker.address, classpath)
        try:
            for _ in range(20):
                state, recovery = sum_of(await jmx.read(10))
                assert state == 1  # log recovery in STARTING, as on a real Kafka 4.x broker
                assert recovery is not None
                # 7 logs a dir, 3 threads (3, 2 and 2 logs), stalled half way through the
                # threads' 2nd log: 3 logs done a dir, and 1 - 0.4/0.9 of the 14 or 20
                # segments in each thread's log left
                assert recovery.remaining_logs == 2 * (7 - 3)
                assert recovery.remaining_segments == 2 * (8 + 12 + 12)
            assert jmx.starts == 1
        finally:
            await jmx.close()

    with Broker(
        "--starting-ms", "0", "--recovery-ms", "1000", "--stall-at", "0.5",
        "--dirs", "2", "--threads", "3", "--logs", "7", "--segments", "40",
    ) as broker:  # fmt: skip
        broker.output.wait_for("^LOADING recovery$")
        time.sleep(0.6)  # until the stall
        asyncio.run(scenario())


def test_a_restarted_broker_is_reconnected_by_the_same_jvm(classpath: Path) -> None:
    port = free_port()

    async def read(jmx: PersistentJmxBackend) -> int | FailureReason:
        try:
            return sum_of(await jmx.read(10))[0]
        except SampleError as exc:
            return exc.reason

    async def scenario() -> None:
        jmx = backend(f"127.0.0.1:{port}", classpath)
        try:
            with Broker("--state", "3", port=port):
                assert await read(jmx) == 3
            assert await read(jmx) is FailureReason.JMX_UNREACHABLE
            with Broker("--state", "2", port=port):
                assert await read(jmx) == 2
            assert jmx.starts == 1
            process = jmx._process
            assert process is not None
        finally:
            await jmx.close()
        assert process.returncode is not None  # closed with the agent

    asyncio.run(scenario())


def test_a_hung_jmx_port_is_cut_at_the_time_limit_and_the_jvm_replaced(classpath: Path) -> None:
    silent = SilentJmxPort()

    async def scenario() -> None:
        jmx = backend(f"127.0.0.1:{silent.port}", classpath)
        try:
            for attempt in (1, 2):
                started = time.monotonic()
                with pytest.raises(SampleError) as failed:
                    await jmx.read(1.5)
                assert failed.value.reason is FailureReason.JMX_TIMEOUT
                assert time.monotonic() - started < 3
                assert jmx._process is None  # killed with its process group
                assert jmx.starts == attempt
        finally:
            await jmx.close()

    try:
        asyncio.run(scenario())
        assert silent.accepted
    finally:
        silent.close()


def test_credentials_are_used_and_never_on_the_command_line(classpath: Path) -> None:
    async def scenario() -> None:
        good = backend(broker.address, classpath, credentials=JmxCredentials("monitor", "s3cret"))
        bad = backend(broker.address, classpath, credentials=JmxCredentials("monitor", "wrong"))
        try:
            assert sum_of(await good.read(10))[0] == 3
            assert good._process is not None
            argv = Path(f"/proc/{good._process.pid}/cmdline").read_bytes()
            assert b"s3cret" not in argv and b"monitor" not in argv
            with pytest.raises(SampleError) as refused:
                await bad.read(10)
            assert refused.value.reason is FailureReason.JMX_AUTH_FAILED
            assert "wrong" not in refused.value.message
        finally:
            await good.close()
            await bad.close()

    with Broker("--state", "3", "--jmx-user", "monitor", "--jmx-password", "s3cret") as broker:
        asyncio.run(scenario())


def test_a_reader_jvm_that_dies_is_an_error_and_the_next_read_starts_another(
    classpath: Path,
) -> None:
    async def scenario() -> None:
        jmx = backend(broker.address, classpath)
        try:
            assert sum_of(await jmx.read(10))[0] == 3
            assert jmx._process is not None
            os.kill(jmx._process.pid, 9)
            with pytest.raises(SampleError) as died:
                await jmx.read(10)
            assert died.value.reason is FailureReason.JMX_ERROR
            assert "exited" in died.value.message or "pipe" in died.value.message.lower()
            assert sum_of(await jmx.read(10))[0] == 3
            assert jmx.starts == 2
        finally:
            await jmx.close()

    with Broker("--state", "3") as broker:
        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("answer", "reason", "text"),
    [
        ({"error": "connection-error", "message": "connection refused (x)"},
         FailureReason.JMX_UNREACHABLE, "connection refused"),
        ({"error": "auth-failed", "message": "Authentication failed"},
         FailureReason.JMX_AUTH_FAILED, "refused the credentials"),
        ({"error": "jmx-error", "message": "x was unregistered during the read"},
         FailureReason.JMX_ERROR, "unregistered"),
        ({"values": "nope"}, FailureReason.JMX_ERROR, "unexpected"),
        ({"values": [{"value": 1}]}, FailureReason.JMX_ERROR, "unexpected"),
    ],
)  # fmt: skip
def test_answers_are_classified(answer: object, reason: FailureReason, text: str) -> None:
    with pytest.raises(SampleError) as failed:
        parse_answer(answer, URL)
    assert failed.value.reason is reason
    assert text in failed.value.message


def test_a_reader_jvm_slow_to_start_is_waited_for_not_killed_at_each_read(tmp_path: Path) -> None:
    """On a busy host a JVM's start can outlast a read's time limit: each read in the meantime
    is a jmx-timeout that says the reader is starting, and the same start goes on (one JVM),
    where killing it at each limit would start it again forever."""
    java = tmp_path / "slow-java"
    java.write_text(
        "#!/bin/sh\n"
        "sleep 3\n"
        "read secret\n"
        "echo '{\"ready\":true}'\n"
        "while read line; do echo '{\"values\":[]}'; done\n"
    )
    java.chmod(0o755)

    async def scenario() -> None:
        jmx = backend("127.0.0.1:9", tmp_path, java=str(java))
        try:
            began = time.monotonic()
            timeouts = 0
            while time.monotonic() - began < 1.0:  # the reader cannot be ready before 3 s
                with pytest.raises(SampleError) as failed:
                    await jmx.read(0.3)
                assert failed.value.reason is FailureReason.JMX_TIMEOUT
                assert "starting" in failed.value.message
                timeouts += 1
            # the same start, waited for by the next read: answered, one JVM in all
            assert await jmx.read(30) == []
            assert timeouts >= 2 and jmx.starts == 1
            assert time.monotonic() - began >= 3
        finally:
            await jmx.close()

    asyncio.run(scenario())


def test_a_start_past_its_limit_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader JVM that never starts is not waited for forever: past START_LIMIT_S the read
    that times out kills it, and the next read starts another."""
    import rollguard.agent.jmx_persistent as persistent

    monkeypatch.setattr(persistent, "START_LIMIT_S", 1.0)
    java = tmp_path / "hung-java"
    java.write_text("#!/bin/sh\nexec sleep 600\n")
    java.chmod(0o755)

    async def scenario() -> None:
        jmx = backend("127.0.0.1:9", tmp_path, java=str(java))
        try:
            messages = []
            for _ in range(6):
                with pytest.raises(SampleError) as failed:
                    await jmx.read(0.4)
                messages.append(failed.value.message)
            assert any("starting" in m for m in messages)
            assert any("starting" not in m for m in messages)  # the start past its limit
            assert jmx.starts >= 2
        finally:
            await jmx.close()

    asyncio.run(scenario())

"""Choosing the JMX backend (`--jmx-backend`): what each choice gives, and what it refuses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.agent.jmx import BACKENDS, JmxCredentials
from rollguard.agent.jmx_choice import open_backend
from rollguard.agent.jmx_jmxquery import JmxQueryBackend
from rollguard.agent.jmx_persistent import PersistentJmxBackend
from rollguard.agent.jvm import READER_SOURCE, find_java
from rollguard.shared.errors import ConfigError

URL = "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"


@pytest.fixture(scope="module", autouse=True)
def reader_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The reader is compiled once for this module, into a cache of its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


def test_each_backend_name_opens_a_backend_of_that_name() -> None:
    async def names() -> list[str]:
        opened = [await open_backend(kind, URL, credentials=None, java="java") for kind in BACKENDS]
        for backend in opened:
            await backend.close()
        return [backend.name for backend in opened]

    assert asyncio.run(names()) == list(BACKENDS)


def test_jmxquery_with_credentials_warns_that_the_password_is_on_its_command_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = JmxCredentials("admin", "s3cret")
    with caplog.at_level(logging.WARNING, logger="rollguard.agent.jmx_choice"):
        backend = asyncio.run(open_backend("jmxquery", URL, credentials=secret, java="java"))
    assert isinstance(backend, JmxQueryBackend)
    assert "takes the password only as a command-line argument" in caplog.text
    assert "s3cret" not in caplog.text


def test_only_jmxquery_with_credentials_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        persistent = asyncio.run(
            open_backend("persistent", URL, credentials=JmxCredentials("a", "b"), java="java")
        )
        asyncio.run(open_backend("jmxquery", URL, credentials=None, java="java"))
    assert isinstance(persistent, PersistentJmxBackend)
    assert caplog.text == ""


@pytest.mark.skipif(
    READER_SOURCE.with_suffix(".class").is_file(), reason="a shipped reader is never compiled"
)
def test_persistent_on_a_runtime_that_cannot_compile_is_a_config_error_naming_jmxquery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no reader compiled there yet
    with pytest.raises(ConfigError) as caught:
        asyncio.run(open_backend("persistent", URL, credentials=None, java="false"))
    message = str(caught.value)
    assert message.startswith("--jmx-backend persistent: cannot compile the JMX reader with")
    assert message.endswith("(--jmx-backend jmxquery needs no compiler)")


def test_an_unknown_backend_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown JMX backend 'jpype'"):
        asyncio.run(open_backend("jpype", URL, credentials=None, java="java"))


def test_find_java_takes_names_on_path_and_paths_to_executables(tmp_path: Path) -> None:
    assert find_java("java") is not None
    assert find_java(str(tmp_path / "no-such-java")) is None
    plain = tmp_path / "java"
    plain.write_text("")
    assert find_java(str(plain)) is None  # not executable

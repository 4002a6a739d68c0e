"""The error tree: drawn once, in `rollguard.shared.errors`' docstring, and true.

Every exception class the installed rollguard modules define is in the drawing, under the parent
and with the category the drawing says (so the drawing cannot go stale); each category is one a
caller branches on; and library errors met at each adapter come out as the category their caller
acts on.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.configmap import ConfigMapStore, MissingKey
from rollguard.roller.connect.client import ConnectClient, ConnectError
from rollguard.roller.host_commands import CommandError, CommandTimeout, run_command
from rollguard.roller.kafka_admin import AdminApiError, KafkaObserver, read_client_properties
from rollguard.roller.kubernetes import (
    KubernetesPlatform,
    KubernetesSettings,
    KubernetesUnavailable,
    api_error,
)
from rollguard.roller.model import AgentUnavailable, Node, Role
from rollguard.roller.platform import PlatformUnavailable, RestartError
from rollguard.roller.roll.stores.lease import LeaseError, LeaseUnavailable
from rollguard.roller.roll.stores.lease_file import FileLease
from rollguard.shared import errors
from rollguard.shared.errors import (
    ConfigError,
    NodeFailed,
    RetryLater,
    RollguardError,
    WireFormatError,
)
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.tls import trusting_nothing

PRODUCT = (
    "rollguard.shared",
    "rollguard.agent",
    "rollguard.roller",
    "rollguard.certs",
    "rollguard.spark",
)
CATEGORIES = (ConfigError, RetryLater, NodeFailed, WireFormatError)

TREE_LINE = re.compile(
    r"^    (?P<bars>[ |]*)(?:\+-- )?(?P<name>\w+) +(?P<module>[\w.]+)"
    r"(?: & (?P<also>\w+))?$"
)
OTHER_LINE = re.compile(r"^    (?P<name>\w+) +(?P<module>[\w.]+)  +\S")


def product_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the product's modules (each imported), by name."""
    found: dict[str, type[BaseException]] = {}
    for top in PRODUCT:
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, f"{top}."):
            if info.name.endswith(".__main__"):
                continue
            module = importlib.import_module(info.name)
            for thing in vars(module).values():
                if (
                    inspect.isclass(thing)
                    and issubclass(thing, BaseException)
                    and thing.__module__ == info.name
                ):
                    found[thing.__name__] = thing

    def below(cls: type[BaseException]) -> None:  # defined anywhere, in a function too
        for sub in cls.__subclasses__():
            if sub.__module__.startswith(PRODUCT):
                found.setdefault(sub.__name__, sub)
            below(sub)

    below(RollguardError)
    return found


def blocks(text: str) -> list[list[str]]:
    """The drawings of `text`: its paragraphs indented by four spaces, each a list of lines."""
    paragraphs = (p.splitlines() for p in text.split("\n\n"))
    return [p for p in paragraphs if p and all(line.startswith("    ") for line in p)]


def drawn() -> tuple[dict[str, tuple[str, str | None, str | None]], dict[str, str]]:
    """The drawing: {name: (module, parent, also)} of the tree, {name: module} of the rest."""
    tree_block, other_block = blocks(errors.__doc__ or "")
    tree: dict[str, tuple[str, str | None, str | None]] = {}
    parents: list[tuple[int, str]] = []  # (column of the name, name): the open branches
    for line in tree_block:
        match = TREE_LINE.match(line)
        assert match is not None, f"not a line of the tree: {line!r}"
        column = match.start("name")
        while parents and parents[-1][0] >= column:
            parents.pop()
        parent = parents[-1][1] if parents else None
        tree[match["name"]] = (match["module"], parent, match["also"])
        parents.append((column, match["name"]))
    others: dict[str, str] = {}
    for line in other_block:
        match = OTHER_LINE.match(line)
        assert match is not None, f"not a line of the list: {line!r}"
        others[match["name"]] = match["module"]
    return tree, others


def category(cls: type[BaseException]) -> list[type[BaseException]]:
    return [c for c in CATEGORIES if issubclass(cls, c)]


def test_the_drawing_is_read() -> None:
    tree, others = drawn()
    assert tree["RollguardError"] == ("shared.errors", None, None)
    assert tree["CommandTimeout"] == ("roller.host_commands", "CommandError", None)
    assert tree["LeaseLost"] == ("roller.roll.stores.lease", "LeaseError", None)
    assert tree["LeaseUnavailable"] == ("roller.roll.stores.lease", "RetryLater", "LeaseError")
    assert others["UnknownRelease"] == "roller.roll.upgrades.releases"


def test_every_rollguard_error_is_drawn_where_it_is() -> None:
    tree, _ = drawn()
    classes = {n: c for n, c in product_classes().items() if issubclass(c, RollguardError)}
    assert sorted(tree) == sorted(classes), "the drawing and the classes differ"
    for name, (module, parent, also) in tree.items():
        cls = classes[name]
        assert cls.__module__ == f"rollguard.{module}", f"{name} lives in {cls.__module__}"
        bases = {b.__name__ for b in cls.__bases__}
        assert bases == ({parent or "Exception"} | ({also} if also else set())), name


def test_every_error_has_one_category_at_most_and_the_group_s_members_say_theirs() -> None:
    """An error of no category stops its command: what every caller does with it."""
    tree, _ = drawn()
    classes = product_classes()
    for name in tree:
        assert len(category(classes[name])) <= 1, f"{name} is under {category(classes[name])}"
    group = classes["LeaseError"]  # the one origin group: none of its own, its members' each
    assert category(group) == []
    assert {c.__name__: category(c) for c in group.__subclasses__()} == {
        "LeaseUnavailable": [RetryLater],
        "LeaseHeld": [],
        "LeaseLost": [],
        "NotRunning": [],
    }


SOURCES = [Path(importlib.import_module(top).__path__[0]) for top in PRODUCT]


def test_every_category_is_one_a_caller_branches_on() -> None:
    """A category nobody branches on says nothing a caller acts on: it would not be one."""
    code = "\n".join(p.read_text() for root in SOURCES for p in root.rglob("*.py"))
    for cls in (*CATEGORIES, product_classes()["LeaseError"]):
        name = cls.__name__
        caught = rf"except \(?[\w, ]*\b{name}\b"
        retried = rf"retriable=\(?[\w, ]*\b{name}\b"
        tested = rf"isinstance\([^)]*\b{name}\b"
        assert re.search(f"{caught}|{retried}|{tested}", code), f"no caller branches on {name}"


def test_every_other_exception_is_listed() -> None:
    _, others = drawn()
    classes = {n: c for n, c in product_classes().items() if not issubclass(c, RollguardError)}
    assert sorted(others) == sorted(classes)
    for name, module in others.items():
        assert classes[name].__module__ == f"rollguard.{module}", name


def test_exit_codes_follow_the_categories() -> None:
    from rollguard.shared.cli import ExitCode, run_command

    def failing(exc: Exception) -> int:
        def command() -> int:
            raise exc

        return run_command(command)

    assert failing(MissingKey("ConfigMap kafka/x does not exist")) == ExitCode.USAGE
    for exc in (RetryLater("x"), NodeFailed("x"), RollguardError("x"), WireFormatError("x")):
        assert failing(exc) == ExitCode.FAILED


# --- at the adapters ------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_failure(code: int, reason: str) -> ApiError:
    error = ApiError.__new__(ApiError)
    error.status = Status(code=code, reason=reason, message=f"{reason} (test)")
    return error


class Unreachable:
    """A lightkube client whose API server cannot be reached (or answers `failure`)."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure or httpx.ConnectError("[Errno 111] Connection refused")

    async def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise self.failure

    get = delete = _fail


class UnreachableSync:
    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise self.failure


NODE = Node(0, "kafka-0", frozenset({Role.BROKER}), None)
SETTINGS = KubernetesSettings(namespace="kafka", selector="app=kafka")


def test_an_unreachable_kubernetes_api_is_retry_later() -> None:
    platform = KubernetesPlatform(Unreachable(), SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(RetryLater) as raised:
        asyncio.run(platform.observe(NODE))
    assert isinstance(raised.value, KubernetesUnavailable | PlatformUnavailable)
    assert isinstance(raised.value.__cause__, httpx.ConnectError)  # chained


def test_a_kubernetes_answer_is_its_category() -> None:
    assert isinstance(api_error("get pod kafka-0", api_failure(503, "Unavailable")), RetryLater)
    refused = api_error("get pod kafka-0", api_failure(403, "Forbidden"))
    assert category(type(refused)) == []  # no category: asking again brings the same
    assert not isinstance(refused, RetryLater)
    platform = KubernetesPlatform(Unreachable(api_failure(403, "Forbidden")), SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(NodeFailed) as raised:  # a refused delete: that node's restart failed
        asyncio.run(platform.restart(NODE))
    assert isinstance(raised.value, RestartError) and "403 Forbidden" in str(raised.value)


def test_a_configmap_store_says_unreachable_or_missing() -> None:
    store = ConfigMapStore(UnreachableSync(httpx.ConnectError("refused")), "kafka", "x")
    with pytest.raises(RetryLater):
        store.read("journal.json")
    store = ConfigMapStore(UnreachableSync(api_failure(404, "NotFound")), "kafka", "x")
    with pytest.raises(ConfigError) as missing:
        store.read("journal.json")
    assert isinstance(missing.value, MissingKey)


def test_a_bad_kafka_properties_file_is_configuration(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("sasl.jaas.config=whatever\n")
    with pytest.raises(ConfigError, match=r"client.properties:1: sasl.jaas.config"):
        read_client_properties(path)
    path.write_text("security.protocol=\\u12\n")  # a malformed escape: the parser's own error
    with pytest.raises(ConfigError, match=r"client.properties:1: malformed"):
        read_client_properties(path)
    with pytest.raises(ConfigError):
        read_client_properties(tmp_path / "absent.properties")


def test_an_admin_api_that_refuses_is_retry_later() -> None:
    observer = KafkaObserver(f"127.0.0.1:{closed_port()}", {})
    try:
        with pytest.raises(RetryLater) as raised:
            asyncio.run(observer.observe())
    finally:
        observer.close()
    assert isinstance(raised.value, AdminApiError)


def test_a_command_that_cannot_run_or_finish_is_node_failed(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NodeFailed) as raised:
        asyncio.run(
            run_command("true", env={}, timeout=5, log_path=tmp_path / "file" / "log", name="n1")
        )
    assert type(raised.value) is CommandError and "cannot write its log" in str(raised.value)
    with pytest.raises(NodeFailed) as late:
        asyncio.run(
            run_command(
                "sleep 5", env={}, timeout=0.2, kill_grace=0.1, log_path=tmp_path / "log", name="n1"
            )
        )
    assert isinstance(late.value, CommandTimeout)


def test_an_unreachable_connect_worker_stops_the_command_after_the_retries() -> None:
    async def ask() -> str:
        async with ConnectClient(
            f"http://127.0.0.1:{closed_port()}", RetryPolicy(max_retries=0)
        ) as client:
            return await client.version()

    with pytest.raises(ConnectError) as raised:
        asyncio.run(ask())
    assert category(ConnectError) == [] and "unreachable" in str(raised.value)


def test_a_lease_file_that_cannot_be_renewed_is_retry_later(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    lease = FileLease(tmp_path / "file" / "lease.json", holder="h:1", roll_id="r1")
    with pytest.raises(RetryLater) as raised:  # renewal: asked again while the lease lasts
        asyncio.run(lease.renew())
    assert isinstance(raised.value, LeaseUnavailable | LeaseError)
    with pytest.raises(ConfigError, match="check --state-dir"):  # taking it: nothing started
        asyncio.run(lease.acquire())


def test_an_unreachable_agent_is_a_value_not_an_error() -> None:
    async def ask() -> object:
        async with AgentClient(trusting_nothing(), RetryPolicy(max_retries=0)) as agents:
            return await agents.broker_state(f"https://127.0.0.1:{closed_port()}", once=True)

    answer = asyncio.run(ask())
    assert isinstance(answer, AgentUnavailable) and answer.status is None

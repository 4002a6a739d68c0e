"""`rollguard connect ...` and `rollguard mm2 ...`: Kafka Connect operations.

    rollguard connect restart CONNECTOR [--include-tasks] [--only-failed]
    rollguard connect auto-restart [--connectors A,B] [--config FILE] [--state-file FILE |
        --state-configmap NS/NAME] [--metrics-listen HOST:PORT] [--once]
    rollguard connect offsets list|alter|reset --connector NAME (key offsets.json)
    rollguard mm2 offsets list|alter|reset --connector 'east->west.MirrorSourceConnector'
        list: --to DIR | --to-configmap NS/NAME; alter: --from DIR|FILE | --from-configmap NS/NAME;
        alter and reset: [--stop] (stop the connector first and wait until it is STOPPED)

Every command takes --connect-url and the TLS (--cacert, --cert, --key), basic-auth (--user,
--password-file or ROLLGUARD_CONNECT_PASSWORD) and retry flags; every flag can also be set as
ROLLGUARD_<FLAG>. Exit codes: 0 done, 1 failed (the message names the connector and the cause),
2 bad flags, variables or files, 3 interrupted, 4 no such connector, 5 Connect kept answering 409
(a rebalance) through every retry.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rollguard.roller.configmap import ConfigMapStore, MissingKey
from rollguard.roller.connect.autorestart import (
    AutoRestarter,
    FileStateStore,
    Metrics,
    StateStore,
    decode_state,
    encode_state,
)
from rollguard.roller.connect.client import ConnectAuth, ConnectClient, ConnectError
from rollguard.roller.connect.offsets import (
    GENERIC_KEY,
    FolderStore,
    KeyStore,
    OffsetsError,
    alter_offsets,
    list_offsets,
    mm2_key,
    reset_offsets,
)
from rollguard.roller.connect.policy import Tracker, load_overrides
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RETRY_SETTINGS, policy_from_settings
from rollguard.shared.settings import (
    Flag,
    add_flags,
    duration_between,
    integer,
    listen_address,
    resolve,
    retry_flags,
)
from rollguard.shared.tls import client_context

ENV_PREFIX = "ROLLGUARD_"
PASSWORD_ENV = "ROLLGUARD_CONNECT_PASSWORD"  # noqa: S105 (a variable name)
EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = ExitCode.FAILED, ExitCode.USAGE, ExitCode.INTERRUPTED
EXIT_NOT_FOUND, EXIT_CONFLICT = 4, 5  # connect's own: no such connector; 409 through every retry

logger = logging.getLogger("rollguard.connect")


def _namespaced(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME")
    return namespace, name


def _max_restarts(text: str) -> int | None:
    if text in ("", "unlimited"):
        return None
    return integer(0)(text)


def _names(text: str) -> list[str] | None:
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names or None


CONNECT_FLAGS = (
    Flag("connect-url", None, str, "Kafka Connect REST URL, http(s)://HOST:PORT", "URL", True),
    Flag("cacert", None, Path, "CA bundle for Connect's certificate (default: system)", "PATH"),
    Flag("cert", None, Path, "client certificate (PEM) for mutual TLS", "PATH"),
    Flag("key", None, Path, "its unencrypted PEM private key", "PATH"),
    Flag("user", None, str, "basic-auth user", "USER"),
    Flag("password-file", None, Path, f"basic-auth password file (or {PASSWORD_ENV})", "FILE"),
    Flag("timeout", "30s", duration_between("10ms", "1h"), "time for one request", "DURATION"),
    *retry_flags(),
)
AUTO_RESTART_FLAGS = (
    *CONNECT_FLAGS,
    Flag("connectors", "", _names, "watch only these connectors (default: all)", "A,B"),
    Flag("config", None, Path, "YAML of per-connector settings (maxRestarts, enabled)", "FILE"),
    Flag("max-restarts", "", _max_restarts, "give up after this many restarts (empty: never)", "N"),
    Flag("interval", "1m", duration_between("10ms", "1d"), "time between two checks", "DURATION"),
    Flag("state-file", "rollguard-auto-restart.json", Path, "counts and times, kept", "FILE"),
    Flag("state-configmap", None, _namespaced, "keep them in this ConfigMap instead", "NS/NAME"),
    Flag("metrics-listen", None, listen_address, "serve Prometheus /metrics here", "HOST:PORT"),
)
OFFSETS_FLAGS = (
    *CONNECT_FLAGS,
    Flag("connector", None, str, "the connector's name", "NAME", True),
    Flag("to", None, Path, "list: folder to write the offsets key into", "DIR"),
    Flag("to-configmap", None, _namespaced, "list: ConfigMap to write the key into", "NS/NAME"),
    Flag("from", None, Path, "alter: folder holding the key, or the file itself", "PATH"),
    Flag("from-configmap", None, _namespaced, "alter: ConfigMap holding the key", "NS/NAME"),
    Flag(
        "stop-timeout",
        "1m",
        duration_between("10ms", "1d"),
        "with --stop: wait this long for STOPPED",
        "DURATION",
    ),
)


def add_parsers(sub: Any) -> None:
    parser_class = Parser
    connect = sub.add_parser("connect", help="Kafka Connect: restarts, auto-restart, offsets")
    connect.set_defaults(run=run)
    actions = connect.add_subparsers(dest="action", required=True, parser_class=parser_class)
    restart = actions.add_parser("restart", help="restart a connector (KIP-745)")
    restart.add_argument("connector_name", metavar="CONNECTOR")
    restart.add_argument("--include-tasks", action="store_true", help="restart its tasks too")
    restart.add_argument("--only-failed", action="store_true", help="only the FAILED ones")
    add_flags(restart, CONNECT_FLAGS, ENV_PREFIX)
    watcher = actions.add_parser("auto-restart", help="restart failed connectors, with backoff")
    watcher.add_argument("--once", action="store_true", help="one pass, then exit")
    add_flags(watcher, AUTO_RESTART_FLAGS, ENV_PREFIX)
    _offsets_parsers(actions, parser_class, "offsets of any connector (key offsets.json)")
    mm2 = sub.add_parser("mm2", help="MirrorMaker 2 connector offsets")
    mm2.set_defaults(run=run)
    mm2_actions = mm2.add_subparsers(dest="action", required=True, parser_class=parser_class)
    _offsets_parsers(mm2_actions, parser_class, "MirrorMaker 2 offsets (key NAME.json, -> as --)")


def _offsets_parsers(actions: Any, parser_class: type[argparse.ArgumentParser], text: str) -> None:
    offsets = actions.add_parser("offsets", help=text)
    verbs = offsets.add_subparsers(dest="verb", required=True, parser_class=parser_class)
    for verb, help_text in (
        ("list", "write the connector's offsets into a folder or ConfigMap"),
        ("alter", "PATCH the offsets read from a folder, file or ConfigMap"),
        ("reset", "DELETE the connector's offsets"),
    ):
        parser = verbs.add_parser(verb, help=help_text)
        if verb != "list":
            parser.add_argument("--stop", action="store_true", help="stop the connector first")
        add_flags(parser, OFFSETS_FLAGS, ENV_PREFIX)


# ---- shared -------------------------------------------------------------------------------


def connect_client(values: dict[str, Any], environ: Mapping[str, str]) -> ConnectClient:
    policy = policy_from_settings({s.name: values[s.name] for s in RETRY_SETTINGS})
    tls = None
    if values["cert"] is not None or values["cacert"] is not None:
        tls = client_context(values["cacert"], values["cert"], values["key"])
    elif values["key"] is not None:
        raise ConfigError("--key given without --cert")
    password = environ.get(PASSWORD_ENV)
    if values["password-file"] is not None:
        try:
            password = values["password-file"].read_text().rstrip("\n")
        except OSError as exc:
            raise ConfigError(
                f"--password-file {values['password-file']}: {exc.strerror}"
            ) from None
    if password is not None and values["user"] is None:
        raise ConfigError("a Connect password is set but --user is not")
    try:
        return ConnectClient(
            values["connect-url"],
            policy,
            tls=tls,
            auth=ConnectAuth(values["user"], password),
            timeout=values["timeout"],
        )
    except ValueError as exc:
        raise ConfigError(f"--connect-url: {exc}") from None


def _kube_client(namespace: str) -> Any:
    from lightkube import Client
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    try:
        return Client(namespace=namespace)
    except KubeConfigError as exc:
        raise ConfigError(f"Kubernetes: {exc}") from None


def exit_code(exc: ConnectError) -> int:
    return {404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(exc.status or 0, EXIT_FAILED)


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Dispatch `connect ...` and `mm2 ...`; ConfigError propagates (exit 2 in main)."""
    if args.command == "connect" and args.action == "restart":
        values = resolve(args, environ, CONNECT_FLAGS, ENV_PREFIX)
        return _guarded(_restart(args, values, connect_client(values, environ)))
    if args.command == "connect" and args.action == "auto-restart":
        values = resolve(args, environ, AUTO_RESTART_FLAGS, ENV_PREFIX)
        return _watch(args, values, environ)
    values = resolve(args, environ, OFFSETS_FLAGS, ENV_PREFIX)
    return _guarded(_offsets(args, values, connect_client(values, environ)))


def _guarded(coroutine: Any) -> int:
    try:
        return int(asyncio.run(coroutine))
    except ConnectError as exc:
        print(f"rollguard: {exc}", file=sys.stderr)
        return exit_code(exc)
    except OffsetsError as exc:
        print(f"rollguard: {exc}", file=sys.stderr)
        return EXIT_FAILED


# ---- restart ------------------------------------------------------------------------------


async def _restart(args: argparse.Namespace, values: dict[str, Any], client: ConnectClient) -> int:
    name = args.connector_name
    async with client:
        outcome = await client.restart(
            name, include_tasks=args.include_tasks, only_failed=args.only_failed
        )
    if outcome.states is None:
        print(f"connector {name} restarted (HTTP {outcome.status}; its tasks were not)")
        return 0
    print(f"connector {name}: restart accepted (HTTP 202)")
    print(f"  connector  {outcome.states.state:<12} {outcome.states.worker}")
    for task in outcome.states.tasks:
        print(f"  task {task.id:<5} {task.state:<12} {task.worker}")
    return 0


# ---- auto-restart -------------------------------------------------------------------------


class ConfigMapStateStore:
    KEY = "auto-restart.json"

    def __init__(self, client: Any, namespace: str, name: str) -> None:
        self.keys = ConfigMapStore(client, namespace, name)

    def load(self) -> dict[str, Tracker]:
        try:
            text = self.keys.read(self.KEY)
        except MissingKey:
            return {}
        return decode_state(text, f"{self.keys.where} key {self.KEY}")

    def save(self, trackers: dict[str, Tracker]) -> None:
        self.keys.write(self.KEY, encode_state(trackers))


def _watch(args: argparse.Namespace, values: dict[str, Any], environ: Mapping[str, str]) -> int:
    overrides = load_overrides(values["config"], values["max-restarts"])
    store: StateStore
    if values["state-configmap"] is not None:
        namespace, name = values["state-configmap"]
        store = ConfigMapStateStore(_kube_client(namespace), namespace, name)
    else:
        store = FileStateStore(values["state-file"])
    client = connect_client(values, environ)
    metrics = Metrics()
    if values["metrics-listen"] is not None:
        from prometheus_client import start_http_server

        host, port = values["metrics-listen"]
        try:
            start_http_server(port, host, registry=metrics.registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-listen {host}:{port}: {exc.strerror}") from None
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s rollguard: %(levelname)s %(message)s"))
    watch_logger = logging.getLogger("rollguard.auto-restart")
    watch_logger.addHandler(handler)
    watch_logger.setLevel(logging.INFO)
    watch_logger.propagate = False
    restarter = AutoRestarter(
        client, store, overrides, connectors=values["connectors"], metrics=metrics
    )

    async def loop() -> int:
        async with client:
            while True:
                try:
                    await restarter.check()
                except ConnectError as exc:
                    watch_logger.error("%s", exc)
                    if args.once:
                        return exit_code(exc)
                if args.once:
                    return 0
                await asyncio.sleep(values["interval"])

    event_loop = asyncio.new_event_loop()
    task = event_loop.create_task(loop())
    for signum in (signal.SIGINT, signal.SIGTERM):
        event_loop.add_signal_handler(signum, task.cancel)
    try:
        return event_loop.run_until_complete(task)
    except asyncio.CancelledError:
        watch_logger.info("stopped; counts are kept in %s", values["state-configmap"] or store)
        return 0
    finally:
        event_loop.close()


# ---- offsets ------------------------------------------------------------------------------


def _store(values: dict[str, Any], folder: str, configmap: str) -> KeyStore | None:
    if values[folder] is not None and values[configmap] is not None:
        raise ConfigError(f"give --{folder} or --{configmap}, not both")
    if values[configmap] is not None:
        namespace, name = values[configmap]
        return ConfigMapStore(_kube_client(namespace), namespace, name)
    if values[folder] is not None:
        return FolderStore(values[folder])
    return None


async def _offsets(args: argparse.Namespace, values: dict[str, Any], client: ConnectClient) -> int:
    name = values["connector"]
    key = mm2_key(name) if args.command == "mm2" else GENERIC_KEY
    timeout = values["stop-timeout"]
    async with client:
        if args.verb == "list":
            store = _store(values, "to", "to-configmap")
            if store is None:
                raise ConfigError("list needs --to DIR or --to-configmap NS/NAME")
            where = await list_offsets(client, name, store, key)
            print(f"offsets of connector {name} written to {where}")
        elif args.verb == "alter":
            store = _store(values, "from", "from-configmap")
            if store is None:
                raise ConfigError("alter needs --from DIR|FILE or --from-configmap NS/NAME")
            message = await alter_offsets(client, name, store, key, stop=args.stop, timeout=timeout)
            print(f"connector {name}: {message}")
        else:
            message = await reset_offsets(client, name, stop=args.stop, timeout=timeout)
            print(f"connector {name}: {message}")
    return 0

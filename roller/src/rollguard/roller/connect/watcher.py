"""`rollguard connect auto-restart`: the watcher's command, between its parser (`cli`) and the
watcher (`autorestart`): its state store, its metrics server and its log lines, then its loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import Mapping

from rollguard.roller.connect.client import ConnectError
from rollguard.roller.connect.commands import Work, _kube_client, exit_code
from rollguard.roller.connect.options import AutoRestartOptions
from rollguard.roller.connect.policy import load_overrides
from rollguard.shared.cli import ExitCode
from rollguard.shared.errors import ConfigError, RollguardError

watch_logger = logging.getLogger("rollguard.auto-restart")


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "time": self.formatTime(record),
                "level": record.levelname,
                "message": record.getMessage(),
            }
        )


def auto_restart(
    args: argparse.Namespace, options: AutoRestartOptions, environ: Mapping[str, str]
) -> tuple[Work, str]:
    """The watcher's coroutine, and where its counts are kept (for the message at exit)."""
    # The watcher's modules (prometheus_client) only for the watcher: not every command's start.
    from rollguard.roller.connect.autorestart import (
        AutoRestarter,
        ConfigMapStateStore,
        FileStateStore,
        Metrics,
        StateStore,
    )

    overrides = load_overrides(options.config, options.max_restarts)
    store: StateStore
    if options.state_configmap is not None:
        namespace, name = options.state_configmap
        store = ConfigMapStateStore(_kube_client(namespace), namespace, name)
        where = f"ConfigMap {namespace}/{name}"
    else:
        store = FileStateStore(options.state_file)
        where = str(options.state_file)
    client = options.client(environ)
    metrics = Metrics()
    if options.metrics_listen is not None:
        from prometheus_client import start_http_server

        host, port = options.metrics_listen
        try:
            start_http_server(port, host, registry=metrics.registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-listen {host}:{port}: {exc.strerror}") from None
    handler = logging.StreamHandler()
    handler.setFormatter(
        _JsonLines()
        if options.output == "json"
        else logging.Formatter("%(asctime)s rollguard: %(levelname)s %(message)s")
    )
    watch_logger.handlers[:] = [handler]
    watch_logger.setLevel(logging.INFO)
    watch_logger.propagate = False
    restarter = AutoRestarter(
        client, store, overrides, connectors=options.connectors, metrics=metrics
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
                except RollguardError as exc:  # the state store (a ConfigMap) failed
                    watch_logger.error("%s", exc)
                    if args.once:
                        return ExitCode.FAILED
                if args.once:
                    return ExitCode.OK
                await asyncio.sleep(options.interval)

    return loop(), where

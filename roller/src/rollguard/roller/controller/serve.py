"""The controller's process: its Kubernetes client and permissions checked, then leadership
(`leadership.lead`), and while it leads, kopf running the handlers over the reconciler.

Before anything: the credentials may take the leadership Lease, and watch, patch and report on
the StatefulSets of every namespace watched (`access.py`); a permission refused is exit 2 naming
it. Then the replica waits for the Lease; once it leads, kopf lists the opted-in StatefulSets
(each a first look at its cluster: a roll a crash left unfinished resumes from its journal) and
follows them. On SIGTERM kopf stops its watches, the rolls are interrupted (journals and Leases
say so) and the Lease is released: the other replica takes over at once. Exit 0.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rollguard.roller.controller import access
from rollguard.roller.controller.leadership import lead
from rollguard.roller.controller.metrics import ControllerMetrics
from rollguard.roller.controller.options import ControllerOptions
from rollguard.roller.roll.stores.lease import LeaseLost, default_holder
from rollguard.shared.cli import ExitCode
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


async def serve(options: ControllerOptions, environ: Mapping[str, str]) -> int:
    from lightkube import AsyncClient
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    from rollguard.roller.kubernetes import prepare_decoders

    prepare_decoders()
    try:
        client = AsyncClient()
    except KubeConfigError as exc:
        raise ConfigError(f"Kubernetes: {exc}") from None
    metrics = ControllerMetrics()
    server = None
    if options.metrics_listen is not None:
        from rollguard.roller.roll.metrics_server import MetricsServer

        server = MetricsServer(metrics.render)
        address = await server.start(options.metrics_listen)
        logger.info("metrics on http://%s/metrics", address)
    try:
        holder = default_holder()
        await access.check(
            client, options.leader_at, access.leader_permissions(options.leader_lease)
        )
        for namespace in options.watch_namespace or ("",):  # "": every namespace
            await access.check(client, namespace, access.controller_permissions())
        try:
            return await lead(
                client,
                options.leader_at,
                options.leader_lease,
                holder,
                options.leader_lease_duration,
                lambda: _operate(client, options, environ, holder, metrics),
            )
        except LeaseLost as exc:
            logger.error("no longer the leader, stopping: %s", exc)
            return ExitCode.FAILED
    finally:
        if server is not None:
            await server.stop()
        await client.close()


async def _operate(
    client: object,
    options: ControllerOptions,
    environ: Mapping[str, str],
    holder: str,
    metrics: ControllerMetrics,
) -> int:
    import kopf

    from rollguard.roller.controller import handlers
    from rollguard.roller.controller.reconciler import Reconciler

    reconciler = Reconciler(
        client, handlers.kopf_poster, environ, options.state_dir, metrics=metrics
    )
    metrics.leading = True
    watched = options.watch_namespace
    logger.info(
        "watching the StatefulSets labelled rollguard.io/roll=true in %s",
        ", ".join(watched) if watched else "every namespace",
    )
    try:
        await kopf.operator(
            registry=handlers.registry(reconciler),
            settings=handlers.settings(holder),
            standalone=True,
            clusterwide=not watched,
            namespaces=watched,
        )
    finally:
        metrics.leading = False
        await reconciler.stop()
    return ExitCode.OK

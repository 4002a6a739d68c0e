"""`rollguard controller`: rolls the Kafka StatefulSets that opt in, by itself, with every rule a
roll has (the room's package docstring says what it watches and when it rolls).

    rollguard controller (--watch-namespace NS ... | --all-namespaces) --cert PATH --key PATH
        --cacert PATH [--leader-namespace NS] [--state-dir DIR]

Its own flags, and the agents' client certificate (checked before anything starts). Every
`rollguard roll` flag given as a variable (`ROLLGUARD_<FLAG>`, the chart's `env`) is every
cluster's default, which the cluster's annotations override. Runs until SIGTERM (exit 0) or
SIGINT (3); 2 for bad flags, variables or certificates, or credentials that may not do what the
controller does (each permission named); 1 when it loses its leadership (a replica that cannot
renew its Lease in time stops, and is started again as a standby).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

from rollguard.roller.controller.options import ControllerOptions
from rollguard.roller.options import ENV_PREFIX, AgentOptions
from rollguard.shared.cli import ExitCode, run_until_signal
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser(
        "controller",
        help="roll the Kafka StatefulSets that opt in, by itself, when they change",
        description="Watch the StatefulSets labelled rollguard.io/roll=true and roll each Kafka "
        "cluster safely when its template, its ConfigMap or its Kafka version changes. "
        "Every roll flag given as ROLLGUARD_<FLAG> is each cluster's default; annotations "
        "rollguard.io/<flag> on a StatefulSet set its cluster's own. Example:\n"
        "  rollguard controller --watch-namespace kafka --cert /tls/tls.crt --key /tls/tls.key "
        "--cacert /tls/ca.crt",
        usage="rollguard controller (--watch-namespace NS | --all-namespaces) --cert PATH "
        "--key PATH --cacert PATH [options]",
    )
    ControllerOptions.add_flags(parser, ENV_PREFIX)
    parser.set_defaults(run=controller_command)


def roll_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    """The rolls' defaults: the controller's variables, and the agents' flags it was given
    (each roll reads them as variables)."""
    found = dict(environ)
    for flag in AgentOptions.flags():
        given = getattr(args, flag.name.replace("-", "_"), None)
        if given is not None:
            found[flag.env(ENV_PREFIX)] = "\n".join(given) if isinstance(given, list) else given
    return found


def controller_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if importlib.util.find_spec("kopf") is None:
        raise ConfigError(
            "rollguard controller needs kopf: pip install 'rollguard-roller[controller]' "
            "(the roller image has it)"
        )
    options = ControllerOptions.load(args, environ, ENV_PREFIX)
    options.agent_client()  # the certificates read now: a bad one is exit 2, before anything
    logging.getLogger("rollguard").setLevel(logging.INFO)  # a service's log says what it does
    from rollguard.roller.controller.serve import serve

    rolls = roll_environment(args, environ)
    return run_until_signal(serve(options, rolls), on_sigterm=ExitCode.OK)


__all__ = ["add_parsers", "controller_command"]

"""The bodies of the connect and mm2 commands, between the parsers (`cli`) and the operations.

Each `command(args, options, environ)` checks every input first (flags, connector name, offsets
file: a ConfigError, exit 2, before any request), then returns the coroutine that does the
work, which `cli` runs under `run_until_signal`. Output goes to stdout as text or, with
`--output json`, one JSON object a line; errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Coroutine, Mapping
from typing import Any

from rollguard.roller.configmap import ConfigMapStore
from rollguard.roller.connect import operations
from rollguard.roller.connect.client import ConnectError, ConnectorStatus
from rollguard.roller.connect.offsets import (
    GENERIC_KEY,
    Change,
    FolderStore,
    KeyStore,
    alter_offsets,
    list_offsets,
    mm2_key,
    partition_key,
    reset_offsets,
    reset_partitions,
)
from rollguard.roller.connect.options import (
    ConnectOptions,
    OffsetsOptions,
    WaitOptions,
)
from rollguard.roller.connect.shapes import (
    check_connector_name,
    check_offsets,
    mm2_type,
    parse_offsets,
)
from rollguard.shared.cli import ExitCode
from rollguard.shared.errors import ConfigError, RollguardError

EXIT_NOT_FOUND, EXIT_CONFLICT = 4, 5  # connect's own: no such connector; 409 through every retry


Work = Coroutine[Any, Any, int]


def exit_code(exc: ConnectError) -> int:
    return {404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(exc.status or 0, ExitCode.FAILED)


def fail(text: str) -> None:
    print(f"rollguard: {text}", file=sys.stderr, flush=True)


async def guarded(work: Work) -> int:
    """The command's exit code; its error as one line (a worker too old is exit 2)."""
    try:
        return int(await work)
    except ConfigError as exc:
        fail(str(exc))
        return ExitCode.USAGE
    except ConnectError as exc:
        fail(str(exc))
        return exit_code(exc)
    except RollguardError as exc:
        fail(str(exc))
        return ExitCode.FAILED


def emit(options: ConnectOptions, text: list[str], obj: dict[str, Any]) -> None:
    if options.output == "json":
        print(json.dumps(obj), flush=True)
    else:
        print("\n".join(text), flush=True)


# ---- status -------------------------------------------------------------------------------


def table(statuses: list[ConnectorStatus]) -> list[str]:
    """Connectors and their tasks, one line each; a FAILED one shows its trace's first line."""
    width = max([len(s.name) for s in statuses] + [9])
    lines = [f"{'CONNECTOR':<{width}}  {'TYPE':<6}  {'STATE':<11}  WORKER"]
    for s in statuses:
        lines.append(f"{s.name:<{width}}  {s.type:<6}  {s.state:<11}  {s.worker}{_why(s.trace)}")
        for t in s.tasks:
            task = f"  task {t.id}"
            lines.append(f"{task:<{width}}  {'':<6}  {t.state:<11}  {t.worker}{_why(t.trace)}")
    return lines


def _why(trace: str) -> str:
    return f"  {trace.strip().splitlines()[0]}" if trace.strip() else ""


def status(args: argparse.Namespace, options: ConnectOptions, environ: Mapping[str, str]) -> Work:
    for name in args.names:
        check_connector_name(name)
    client = options.client(environ)

    async def work() -> int:
        async with client:
            statuses = await client.statuses()
        if args.names:
            known = {s.name: s for s in statuses}
            missing = [n for n in args.names if n not in known]
            if missing:
                raise ConnectError(f"no connector {', '.join(missing)} at {client.shown_url}", 404)
            statuses = [known[n] for n in args.names]
        failed = [s.name for s in statuses if s.failed]
        if options.output == "json":
            for s in statuses:
                print(json.dumps({**s.to_json(), "failed": s.failed}), flush=True)
        else:
            print("\n".join(table(statuses)) if statuses else "no connectors", flush=True)
        plural = "" if len(statuses) == 1 else "s"
        summary = f"{len(statuses)} connector{plural}, {len(failed)} with something FAILED"
        print(summary + (f": {', '.join(failed)}" if failed else ""), file=sys.stderr)
        return ExitCode.FAILED if failed else ExitCode.OK

    return work()


# ---- restart, stop, resume ----------------------------------------------------------------


def _report(options: ConnectOptions, report: operations.RestartReport) -> None:
    text = list(report.lines)
    if report.states is not None:
        text.append(f"  connector  {report.states.state:<12} {report.states.worker}")
        text += [f"  task {t.id:<5} {t.state:<12} {t.worker}" for t in report.states.tasks]
    states = report.states.to_json() if report.states is not None else None
    emit(options, text, {"connector": report.connector, "report": report.lines, "states": states})


def restart(args: argparse.Namespace, options: WaitOptions, environ: Mapping[str, str]) -> Work:
    name, wait = args.connector_name, options.wait_timeout if args.wait else None
    if args.all_failed:
        if name is not None:
            raise ConfigError("give CONNECTOR or --all-failed, not both")
        if args.include_tasks or args.only_failed:
            raise ConfigError(
                "--all-failed restarts only what is FAILED, tasks included: "
                "drop --include-tasks and --only-failed"
            )
    elif name is None:
        raise ConfigError("give the CONNECTOR to restart, or --all-failed")
    else:
        check_connector_name(name)
    client = options.client(environ)

    async def one(status: ConnectorStatus | None, version: str | None) -> None:
        target = name if status is None else status.name
        report = await operations.restart(
            client,
            target,
            include_tasks=args.include_tasks or status is not None,
            only_failed=args.only_failed or status is not None,
            version=version,
            status=status,
        )
        if wait is not None:
            report.states = await operations.settle(
                client, target, timeout=wait, watch=report.watch
            )
            report.lines.append(f"connector {target}: settled, nothing FAILED")
            for key in sorted(report.watch.unseen):
                if report.watch.before.get(key) == "RUNNING":
                    report.lines.append(
                        f"  {key}: RUNNING before and after; its restart was not seen (Connect "
                        "shows RESTARTING for ~15 ms)"
                    )
        _report(options, report)

    async def work() -> int:
        async with client:
            if not args.all_failed:
                await one(None, None)
                return ExitCode.OK
            statuses = await client.statuses()  # read once
            version = await client.version()
            failed = [s for s in statuses if s.failed]
            if not failed:
                emit(options, ["nothing is FAILED: nothing restarted"], {"restarted": []})
            code = ExitCode.OK
            for status in failed:
                try:
                    await one(status, version)
                except RollguardError as exc:  # report it, carry on with the others
                    fail(str(exc))
                    code = ExitCode.FAILED
            return code

    return work()


def _state_command(verb: str) -> Any:
    def command(args: argparse.Namespace, options: WaitOptions, environ: Mapping[str, str]) -> Work:
        check_connector_name(args.connector_name)
        client = options.client(environ)
        wait = options.wait_timeout if args.wait else None

        async def work() -> int:
            async with client:
                change = operations.stop if verb == "stop" else operations.resume
                state = await change(client, args.connector_name, wait=wait)
            done = "stopped" if verb == "stop" else "resumed"
            how = f" ({'waited' if wait is not None else 'asked'}): now {state.describe()}"
            emit(
                options,
                [f"connector {args.connector_name} {done}{how}"],
                {
                    "connector": args.connector_name,
                    "action": verb,
                    "waited": wait is not None,
                    "states": state.to_json(),
                },
            )
            return ExitCode.OK

        return work()

    return command


stop = _state_command("stop")
resume = _state_command("resume")


# ---- offsets ------------------------------------------------------------------------------


def _kube_client(namespace: str) -> Any:
    from lightkube import Client
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    try:
        return Client(namespace=namespace)
    except KubeConfigError as exc:
        raise ConfigError(f"Kubernetes: {exc}") from None


def _store(folder: Any, configmap: tuple[str, str] | None) -> KeyStore | None:
    if configmap is not None:
        namespace, name = configmap
        return ConfigMapStore(_kube_client(namespace), namespace, name)
    return FolderStore(folder) if folder is not None else None


def offsets(args: argparse.Namespace, options: OffsetsOptions, environ: Mapping[str, str]) -> Work:
    name, verb = options.connector, args.verb
    check_connector_name(name)
    key = mm2_key(name) if args.tool == "mm2" else GENERIC_KEY
    kind = mm2_type(name) if args.tool == "mm2" else None
    given = {
        "--to": options.to or options.to_configmap,
        "--from": options.from_ or options.from_configmap,
    }
    for flag, value in given.items():
        if value is not None and flag != {"list": "--to", "alter": "--from"}.get(verb):
            raise ConfigError(f"{flag} is not for `offsets {verb}`")
    change = Change()
    if verb != "list":
        if (args.leave_stopped or args.resume) and not args.stop:
            raise ConfigError("--leave-stopped and --resume go with --stop")
        if args.leave_stopped and args.resume:
            raise ConfigError("give --leave-stopped or --resume, not both")
        change = Change(
            args.stop, args.leave_stopped, args.resume, args.dry_run, options.stop_timeout
        )
    entries: list[dict[str, Any]] = []
    store = None
    if verb == "list":
        store = _store(options.to, options.to_configmap)
        if store is None:
            raise ConfigError("list needs --to DIR or --to-configmap NS/NAME")
    elif verb == "alter":
        source = _store(options.from_, options.from_configmap)
        if source is None:
            raise ConfigError("alter needs --from DIR|FILE or --from-configmap NS/NAME")
        where = f"{source.where} key {key}"
        entries = check_offsets(parse_offsets(source.read(key), where), where, kind)
    client = options.client(environ)

    # A null offset in the file resets that partition (KIP-875): each one is named, never silent.
    resets = reset_partitions(entries)

    async def work() -> int:
        async with client:
            if store is not None:
                listing = await list_offsets(client, name, store, key)
                emit(
                    options,
                    [
                        f"offsets of connector {name} written to {listing.written}",
                        *(
                            f"partition {partition_key(p)}: offset null: no offset (reset; "
                            "Connect lists a partition so for a moment after resetting it)"
                            for p in listing.reset
                        ),
                    ],
                    {
                        "connector": name,
                        "written": listing.written,
                        "withOffset": listing.with_offset,
                        "reset": listing.reset,
                    },
                )
                return ExitCode.OK
            lines: list[str] = []
            if verb == "alter":
                message = await alter_offsets(client, name, entries, change, say=lines.append)
            else:
                message = await reset_offsets(client, name, change, say=lines.append)
        done = (
            []
            if change.dry_run
            else [f"partition {partition_key(p)}: reset (offset null in the file)" for p in resets]
        )
        emit(
            options,
            [*lines, *done, f"connector {name}: {message}"],
            {
                "connector": name,
                "message": message,
                "dryRun": change.dry_run,
                **({"changes": lines} if change.dry_run else {}),
                **({"reset": resets} if verb == "alter" else {}),
            },
        )
        return ExitCode.OK

    return work()

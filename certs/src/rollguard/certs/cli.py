"""`rollguard-certs`: make the CA and the certificates agents and rollers present.

    rollguard-certs init-ca      --dir pki
    rollguard-certs issue-server --dir pki kafka-0 --dns kafka-0.kafka.prod.svc --ip 10.0.0.7
    rollguard-certs issue-client --dir pki roller
    rollguard-certs show pki/kafka-0.crt

Files land in `--dir` as NAME.crt and NAME.key (the CA as ca.crt and ca.key). Exit codes:
0 done, 2 bad input (the message names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rollguard.certs.describe import describe
from rollguard.certs.pki import (
    Issued,
    KeyType,
    PrivateKey,
    issue,
    load_ca,
    make_ca,
    new_key,
    write_pair,
)
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.converters import boolean, braces, integer, one_of
from rollguard.shared.errors import ConfigError
from rollguard.shared.settings import Options, option, same
from rollguard.shared.tls import read_certificates

EXIT_USAGE = ExitCode.USAGE
MAX_DAYS = 36500  # a hundred years; X.509 dates end in 9999

# The options are read from the command line only (no variables): argparse converts them, so a
# bad value is its usage error, `argument --days: ...`, like an unknown flag.
OUTPUTS = ("text", "json")
KEY_TYPES = tuple(k.value for k in KeyType)
RSA_BITS = (2048, 3072, 4096)


@dataclass(frozen=True, kw_only=True)
class ShowOptions(Options):
    output: str = option(
        "text", one_of(OUTPUTS), "text, or json (one object a line)", braces(OUTPUTS)
    )


@dataclass(frozen=True, kw_only=True)
class KeyOptions(Options):
    """Where a key pair is written, and the key and validity it gets: every command but show."""

    dir: Path = option(".", Path, "PKI folder (default: .)")
    force: bool = option("false", boolean, "overwrite existing files", switch=True)
    output: str = option(
        "text", one_of(OUTPUTS), "text, or json (one object a line)", braces(OUTPUTS)
    )
    key_type: str = option(
        "ec", one_of(KEY_TYPES), "ec (ECDSA P-256, default) or rsa", braces(KEY_TYPES)
    )
    rsa_bits: int = option("3072", one_of(RSA_BITS, integer(0)), "", braces(RSA_BITS))
    days: int | None = option(
        None, integer(1, MAX_DAYS), f"validity in days, 1 to {MAX_DAYS} (CA 3650, others 365)"
    )


@dataclass(frozen=True, kw_only=True)
class CaOptions(KeyOptions):
    name: str = option("rollguard CA", str, "the CA's common name")


@dataclass(frozen=True, kw_only=True)
class IssueOptions(KeyOptions):
    # --cacert as in every rollguard command (and curl); --ca-cert before 0.2.
    cacert: Path | None = option(
        None, Path, "CA certificate (default: DIR/ca.crt)", deprecated=(("ca-cert", same),)
    )
    cakey: Path | None = option(
        None, Path, "CA key (default: DIR/ca.key)", deprecated=(("ca-key", same),)
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rollguard-certs", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    ca = sub.add_parser(
        "init-ca",
        help="create ca.crt and ca.key",
        description="Create a CA: DIR/ca.crt and DIR/ca.key (mode 0600). Example:\n"
        "  rollguard-certs init-ca --dir pki --name 'prod rollguard CA'",
    )
    CaOptions.add_flags(ca)
    ca.set_defaults(options=CaOptions)

    examples = {
        "issue-server": "rollguard-certs issue-server --dir pki kafka-0 "
        "--dns kafka-0.kafka.prod.svc --ip 10.0.0.7",
        "issue-client": "rollguard-certs issue-client --dir pki roller",
    }
    for command, what in (("issue-server", "an agent"), ("issue-client", "a roller")):
        leaf = sub.add_parser(
            command,
            help=f"a certificate for {what}",
            description=f"Issue a certificate for {what}, signed by the CA: DIR/NAME.crt and "
            f"DIR/NAME.key (mode 0600). Example:\n  {examples[command]}",
        )
        leaf.add_argument("name", help="common name, and the base of the file names")
        IssueOptions.add_flags(leaf)
        # What the certificate names, not settings: given per certificate, repeatable.
        leaf.add_argument("--dns", action="append", default=[], help="DNS SAN (repeatable)")
        leaf.add_argument("--ip", action="append", default=[], help="IP SAN (repeatable)")
        leaf.set_defaults(options=IssueOptions)

    show = sub.add_parser(
        "show",
        help="describe certificates",
        description="Describe certificates: subject, SANs, usages, validity. Example:\n"
        "  rollguard-certs show pki/kafka-0.crt --output json",
    )
    show.add_argument("files", nargs="+", type=Path)
    ShowOptions.add_flags(show)
    show.set_defaults(options=ShowOptions)
    return parser


def show(files: Sequence[Path], options: ShowOptions) -> None:
    for index, path in enumerate(files):
        if index and options.output == "text":
            print()
        for number, certificate in enumerate(read_certificates(path, "certificate")):
            lines = describe(certificate)
            if options.output == "json":
                fields = dict(line.split(":", 1) for line in lines)
                entry = {k.strip(): v.strip() for k, v in fields.items()}
                print(json.dumps({"file": str(path), "index": number, **entry}))
                continue
            print(f"{path}" + (f" [{number}]" if number else "") + ":")
            print("\n".join("  " + line for line in lines))


def run(args: argparse.Namespace) -> None:
    options = args.options.load(args)
    if isinstance(options, ShowOptions):
        show(args.files, options)
    elif isinstance(options, CaOptions):
        days = 3650 if options.days is None else options.days
        write(options, "ca", make_ca(options.name, days=days, key=_new_key(options)))
    else:
        write(options, args.name, _issue(args, options))


def _new_key(options: KeyOptions) -> PrivateKey:
    return new_key(KeyType(options.key_type), options.rsa_bits)


def _issue(args: argparse.Namespace, options: IssueOptions) -> Issued:
    ca = load_ca(options.cacert or options.dir / "ca.crt", options.cakey or options.dir / "ca.key")
    server = args.command == "issue-server"
    if not server and (args.dns or args.ip):
        # Nothing checks SANs of a client certificate; refusing avoids a false sense of scope.
        raise ConfigError("issue-client takes a name only; --dns and --ip are for issue-server")
    days = 365 if options.days is None else options.days
    key = _new_key(options)
    return issue(ca, args.name, server=server, dns=args.dns, ips=args.ip, days=days, key=key)


def write(options: KeyOptions, name: str, issued: Issued) -> None:
    """DIR/NAME.crt and DIR/NAME.key (mode 0600), and what was written on stdout."""
    cert_path, key_path = options.dir / f"{name}.crt", options.dir / f"{name}.key"
    write_pair(issued, cert_path, key_path, force=options.force)
    if options.output == "json":
        print(json.dumps({"certificate": str(cert_path), "key": str(key_path)}))
    else:
        print(f"wrote {cert_path} and {key_path} (key mode 0600)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except ConfigError as exc:
        print(f"rollguard-certs: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except OSError as exc:
        print(f"rollguard-certs: {exc.filename or ''}: {exc.strerror}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())

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
from pathlib import Path
from typing import Any

from rollguard.certs.describe import describe
from rollguard.certs.pki import KeyType, issue, load_ca, make_ca, new_key, write_pair
from rollguard.shared.cli import ExitCode, Parser, argument_type
from rollguard.shared.errors import ConfigError
from rollguard.shared.settings import integer
from rollguard.shared.tls import read_certificates

EXIT_USAGE = ExitCode.USAGE
MAX_DAYS = 36500  # a hundred years; X.509 dates end in 9999


OUTPUT_ARGS = ("--output",)
OUTPUT_KWARGS: dict[str, Any] = {
    "choices": ["text", "json"],
    "default": "text",
    "help": "text, or json (one object a line)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rollguard-certs", description=__doc__.split("\n")[0])
    common = Parser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path(), help="PKI folder (default: .)")
    common.add_argument("--force", action="store_true", help="overwrite existing files")
    common.add_argument(*OUTPUT_ARGS, **OUTPUT_KWARGS)
    common.add_argument(
        "--key-type",
        choices=[k.value for k in KeyType],
        default="ec",
        help="ec (ECDSA P-256, default) or rsa",
    )
    common.add_argument(
        "--rsa-bits", type=argument_type(integer(0)), choices=[2048, 3072, 4096], default=3072
    )
    common.add_argument(
        "--days",
        type=argument_type(integer(1, MAX_DAYS)),
        help=f"validity in days, 1 to {MAX_DAYS} (CA 3650, others 365)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    ca = sub.add_parser(
        "init-ca",
        parents=[common],
        help="create ca.crt and ca.key",
        description="Create a CA: DIR/ca.crt and DIR/ca.key (mode 0600). Example:\n"
        "  rollguard-certs init-ca --dir pki --name 'prod rollguard CA'",
    )
    ca.add_argument("--name", default="rollguard CA", help="the CA's common name")

    examples = {
        "issue-server": "rollguard-certs issue-server --dir pki kafka-0 "
        "--dns kafka-0.kafka.prod.svc --ip 10.0.0.7",
        "issue-client": "rollguard-certs issue-client --dir pki roller",
    }
    for command, what in (("issue-server", "an agent"), ("issue-client", "a roller")):
        leaf = sub.add_parser(
            command,
            parents=[common],
            help=f"a certificate for {what}",
            description=f"Issue a certificate for {what}, signed by the CA: DIR/NAME.crt and "
            f"DIR/NAME.key (mode 0600). Example:\n  {examples[command]}",
        )
        leaf.add_argument("name", help="common name, and the base of the file names")
        # --cacert as in every rollguard command (and curl); --ca-cert before 0.2.
        leaf.add_argument("--cacert", type=Path, help="CA certificate (default: DIR/ca.crt)")
        leaf.add_argument("--cakey", type=Path, help="CA key (default: DIR/ca.key)")
        leaf.add_renamed("--ca-cert", "--cacert")
        leaf.add_renamed("--ca-key", "--cakey")
        leaf.add_argument("--dns", action="append", default=[], help="DNS SAN (repeatable)")
        leaf.add_argument("--ip", action="append", default=[], help="IP SAN (repeatable)")

    show = sub.add_parser(
        "show",
        help="describe certificates",
        description="Describe certificates: subject, SANs, usages, validity. Example:\n"
        "  rollguard-certs show pki/kafka-0.crt --output json",
    )
    show.add_argument("files", nargs="+", type=Path)
    show.add_argument(*OUTPUT_ARGS, **OUTPUT_KWARGS)
    return parser


def run(args: argparse.Namespace) -> None:
    if args.command == "show":
        for index, path in enumerate(args.files):
            if index and args.output == "text":
                print()
            for number, certificate in enumerate(read_certificates(path, "certificate")):
                lines = describe(certificate)
                if args.output == "json":
                    fields = dict(line.split(":", 1) for line in lines)
                    entry = {k.strip(): v.strip() for k, v in fields.items()}
                    print(json.dumps({"file": str(path), "index": number, **entry}))
                    continue
                print(f"{path}" + (f" [{number}]" if number else "") + ":")
                print("\n".join("  " + line for line in lines))
        return
    key = new_key(KeyType(args.key_type), args.rsa_bits)
    if args.command == "init-ca":
        issued = make_ca(args.name, days=3650 if args.days is None else args.days, key=key)
        cert_path, key_path = args.dir / "ca.crt", args.dir / "ca.key"
    else:
        ca = load_ca(args.cacert or args.dir / "ca.crt", args.cakey or args.dir / "ca.key")
        server = args.command == "issue-server"
        if not server and (args.dns or args.ip):
            # Nothing checks SANs of a client certificate; refusing avoids a false sense of scope.
            raise ConfigError("issue-client takes a name only; --dns and --ip are for issue-server")
        issued = issue(
            ca,
            args.name,
            server=server,
            dns=args.dns,
            ips=args.ip,
            days=365 if args.days is None else args.days,
            key=key,
        )
        cert_path, key_path = args.dir / f"{args.name}.crt", args.dir / f"{args.name}.key"
    write_pair(issued, cert_path, key_path, force=args.force)
    if args.output == "json":
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

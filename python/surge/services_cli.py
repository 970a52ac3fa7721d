"""`surge services up|down|status`: local Tarantool, PostgreSQL and Redis for development."""

from __future__ import annotations

import argparse
import sys

from surge import services


def _up(args: argparse.Namespace) -> int:
    unknown = set(args.kinds) - set(services.STARTERS)
    if unknown:
        raise SystemExit(f"unknown service(s): {', '.join(sorted(unknown))}")
    for svc in services.up(args.kinds or None, args.state_dir):
        print(f"{svc.kind:10} {svc.url}  (pid {svc.pid}, dir {svc.workdir})")
    return 0


def _down(args: argparse.Namespace) -> int:
    for svc in services.down(args.state_dir):
        print(f"stopped {svc.kind} (pid {svc.pid})")
    return 0


def add_parser(subparsers) -> None:
    """Register the `services` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("services", help="start/stop local Tarantool, PostgreSQL, Redis")
    sub = p.add_subparsers(dest="services_command", required=True)
    up = sub.add_parser("up", help="start servers and print their URLs")
    up.add_argument(
        "kinds",
        nargs="*",
        help=f"any of: {' '.join(services.STARTERS)} (default: all but"
        f" {' and '.join(sorted(services.UP_ONLY_BY_NAME))})",
    )
    up.add_argument("--state-dir", default=services.STATE_DIR)
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="stop the servers started by `up`")
    down.add_argument("--state-dir", default=services.STATE_DIR)
    down.set_defaults(func=_down)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m surge.services_cli up``."""
    parser = argparse.ArgumentParser(prog="surge")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["services", *(argv if argv is not None else sys.argv[1:])])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

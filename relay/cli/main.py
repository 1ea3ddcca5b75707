"""The ``dfos-relay`` console command.

::

    dfos-relay serve [options]              serve the relay (options: relay.settings)
    dfos-relay dump-log URL -o FILE.jsonl   page a relay's GET /log into JSON Lines
    dfos-relay import FILE.jsonl [--store URL]
                                            ingest an export through the pipeline
    dfos-relay reconcile URL [--pull|--push|--both] [--window 24h] [--scope M,..]
                             [--runs N] [--max-ops N] [--store URL]
                                            reconcile a store with a peer relay
    dfos-relay converge ...                 the Spark convergence job
    dfos-relay verify-store [--store URL]   audit a store: re-verify every chain and row
    dfos-relay peers [--store URL] [--json] the replication ledger: every link's state and lag

A usage or configuration error is one line on stderr and exit status 2;
a failure while running is one line and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from relay.version import RELAY_VERSION

PROG = "dfos-relay"
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + 13  # as if killed by SIGPIPE, like other filters
# as the relay's scheduler: a run and its follow-ons (PeeringConfig.reconcile_follow_ons)
DEFAULT_RECONCILE_RUNS = 11


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is exactly one line (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_store_option(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    from relay.settings import DEFAULT_STORE_URL, ENV_PREFIX

    parser.add_argument(
        "--store",
        default=default,
        metavar="URL",
        help=f"store URL [env {ENV_PREFIX}STORE] (default {DEFAULT_STORE_URL})",
    )


def store_url(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
    """The store URL and where it came from, the name a bad one is blamed
    on: ``--store``, else ``DFOS_RELAY_STORE``, else the default."""
    from relay.settings import DEFAULT_STORE_URL, ENV_PREFIX

    variable = ENV_PREFIX + "STORE"
    if args.store:
        return str(args.store), "--store"
    if env.get(variable):
        return env[variable], variable
    return DEFAULT_STORE_URL, "--store"


def _count(text: str) -> int:
    """A number of times: an integer >= 0."""
    from relay.protocol.untrusted import ascii_decimal

    value = ascii_decimal(text.strip())
    if value is None:  # not digits: a sign, a fraction, garbage
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _at_least_one(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _max_ops(text: str) -> int:
    """``--max-ops``: at least 1, and at most what the memory of ops a peer
    answered ``new`` to holds per peer (``TAKEN_PER_PEER``): a run pushing
    more would forget the first before the next run checks them."""
    from relay.reconcile.answers import TAKEN_PER_PEER

    value = _at_least_one(text)
    if value > TAKEN_PER_PEER:
        raise argparse.ArgumentTypeError(
            f"at most {TAKEN_PER_PEER} (the ops a peer took that one run can remember),"
            f" got {text!r}"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    from relay.reconcile.answers import TAKEN_PER_PEER
    from relay.reconcile.bounds import ReconcileBounds
    from relay.settings import add_serve_arguments

    parser = OneLineParser(prog=PROG, description="DFOS web relay")
    parser.add_argument("--version", action="version", version=f"{PROG} {RELAY_VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    serve = commands.add_parser("serve", help="serve the relay with hypercorn")
    add_serve_arguments(serve)

    dump = commands.add_parser("dump-log", help="dump a relay's global log to JSON Lines")
    dump.add_argument("url", metavar="URL", help="base URL of the relay")
    dump.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="output file (.jsonl or .jsonl.gz)"
    )
    dump.add_argument("--no-resume", action="store_true", help="overwrite instead of resuming")

    imp = commands.add_parser("import", help="ingest a JSON Lines export into a store")
    imp.add_argument("file", metavar="FILE", help="a dump-log file (.jsonl or .jsonl.gz)")
    add_store_option(imp)

    fol = commands.add_parser("follow", help="print a relay's changes feed as JSON Lines")
    fol.add_argument("url", metavar="URL", help="base URL of the relay")
    fol.add_argument("--since", metavar="TOKEN", help="resume after this token (or seq)")
    fol.add_argument("--mode", choices=("tail", "bootstrap"), default="tail")
    fol.add_argument("--kinds", metavar="KIND,...", help="identity-op,content-op,beacon,...")
    fol.add_argument("--chains", metavar="ID,...", help="identity DIDs or contentIds")
    fol.add_argument("--authors", metavar="DID,...", help="signer DIDs")
    fol.add_argument("--no-live", action="store_true", help="stop at the end of stored events")
    fol.add_argument(
        "--retries",
        type=_count,
        default=None,
        metavar="N",
        help="give up after N failed reconnects",
    )

    feed = commands.add_parser("feed", help="administer a store's changes feed")
    # Options in any order: --store before the nested command too. The
    # nested one sets args.store only when given (it would otherwise
    # overwrite an earlier --store with its default), and then it wins.
    add_store_option(feed)
    feed_commands = feed.add_subparsers(
        dest="feed_command", required=True, parser_class=OneLineParser
    )
    reset = feed_commands.add_parser(
        "reset-epoch", help="start a new epoch (followers get 410 and bootstrap again)"
    )
    add_store_option(reset, default=argparse.SUPPRESS)

    rec = commands.add_parser("reconcile", help="reconcile a store with a peer relay")
    rec.add_argument("url", metavar="URL", help="base URL of the peer relay")
    way = rec.add_mutually_exclusive_group()
    for name, text in (("pull", "only fetch what we lack"), ("push", "only send what it lacks"),
                       ("both", "both (the default)")):  # fmt: skip
        way.add_argument(f"--{name}", dest="direction", action="store_const", const=name, help=text)
    rec.add_argument(
        "--window", metavar="DURATION", help="only ops created in the last DURATION (e.g. 24h)"
    )
    rec.add_argument(
        "--json", action="store_true", help="print each run's report as one JSON object"
    )
    rec.add_argument(
        "--scope",
        metavar="MEMBERS",
        help="only this scope: DIDs and contentIds, comma-separated, with their closure",
    )
    run_bounds = ReconcileBounds()
    rec.add_argument(
        "--runs",
        metavar="N",
        type=_at_least_one,
        default=DEFAULT_RECONCILE_RUNS,
        help="follow a run cut short by a bound that moved ops, up to N runs"
        f" (default {DEFAULT_RECONCILE_RUNS})",
    )
    rec.add_argument(
        "--max-ops",
        metavar="N",
        type=_max_ops,
        default=run_bounds.max_need,
        help=f"ops one run fetches at most, and pushes at most (default {run_bounds.max_need},"
        f" at most {TAKEN_PER_PEER})",
    )
    add_store_option(rec)

    audit = commands.add_parser(
        "verify-store", help="re-verify every stored chain and row (exit 0 only when clean)"
    )
    add_store_option(audit)

    peers = commands.add_parser(
        "peers", help="print the replication ledger (every link's state and lag) from a store"
    )
    peers.add_argument("--json", action="store_true", help="print one JSON object")
    add_store_option(peers)

    from spark.convergence import DESCRIPTION, add_arguments

    conv = commands.add_parser(
        "converge", help="run the Spark convergence job", description=DESCRIPTION
    )
    add_arguments(conv)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Options and positionals in any order, for every subcommand.

    argparse stops filling a positional list at the first option; the
    positionals it then leaves over belong to the command's own list."""
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-")]
    if stray or (extra and not isinstance(getattr(args, "dumps", None), list)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.dumps.extend(extra)
    return args


def _fail(command: str, message: object, status: int) -> int:
    print(f"{PROG} {command}: error: {message}", file=sys.stderr)
    return status


def _serve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.asgi import relay_from_settings
    from relay.observability.logging import configure_logging
    from relay.settings import ENV_PREFIX, SettingsError, merge_sources, parse_settings

    raw, sources = merge_sources(args, env)  # raw: what worker processes receive
    try:
        settings = parse_settings(raw, sources)
        store_source = sources.get(ENV_PREFIX + "STORE", "--store")
        # composes only: validates store and peers
        relay = relay_from_settings(settings, store_source=store_source)
    except SettingsError as exc:
        return _fail("serve", exc, EXIT_USAGE)
    # hypercorn once the settings hold: a usage error does not wait for it
    from relay.cli.serve import ServeError, serve

    configure_logging(settings.log_level)
    try:
        return serve(settings, relay.app, raw)
    except ServeError as exc:  # start-up failures (store unreachable, port taken)
        return _fail("serve", exc, EXIT_FAILURE)


def _transfer(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.cli.transfer import TransferError, dump_command, import_command
    from relay.settings import SettingsError

    try:
        if args.command == "dump-log":
            return asyncio.run(dump_command(args.url, args.output, resume=not args.no_resume))
        store, source = store_url(args, env)
        return asyncio.run(import_command(args.file, store, store_source=source))
    except SettingsError as exc:
        return _fail(args.command, exc, EXIT_USAGE)
    except TransferError as exc:
        return _fail(args.command, exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        return 130


def _converge(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return _fail(
            "converge", "pyspark is not installed (pip install 'dfos-relay[spark]')", EXIT_FAILURE
        )
    from spark.convergence import run_parsed

    return int(run_parsed(args) or 0)


def _split(text: str | None) -> list[str]:
    return [v.strip() for v in (text or "").split(",") if v.strip()]


def _feed(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.cli.feed import FollowError, follow_command, reset_epoch_command
    from relay.settings import SettingsError

    if args.command == "follow" and args.mode == "bootstrap" and args.since is not None:
        # a bootstrap starts at a snapshot: the relay takes no since with it
        message = "--since resumes a tail; --mode bootstrap starts at a snapshot (drop one)"
        return _fail("follow", message, EXIT_USAGE)
    try:
        if args.command == "follow":
            coro = follow_command(
                args.url, args.since, args.mode, _split(args.kinds), _split(args.chains),
                _split(args.authors), not args.no_live, args.retries,
            )  # fmt: skip
        else:
            store, source = store_url(args, env)
            coro = reset_epoch_command(store, store_source=source)
        return asyncio.run(coro)
    except SettingsError as exc:
        return _fail(args.command, exc, EXIT_USAGE)
    except FollowError as exc:
        return _fail(args.command, exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        return 130


def _reconcile(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.cli.reconcile import ReconcileCommandError, reconcile_command
    from relay.scope import ScopeError, parse_scope
    from relay.settings import SettingsError, parse_duration

    try:
        window = parse_duration(args.window) if args.window is not None else None
    except ValueError as exc:
        return _fail("reconcile", f"--window: {exc}", EXIT_USAGE)
    try:
        scope = parse_scope(args.scope) if args.scope is not None else None
    except ScopeError as exc:
        return _fail("reconcile", f"--scope: {exc}", EXIT_USAGE)
    store, source = store_url(args, env)
    try:
        coro = reconcile_command(
            args.url, store, args.direction or "both", window, args.json,
            scope=scope, store_source=source, runs=args.runs, max_ops=args.max_ops,
        )  # fmt: skip
        return asyncio.run(coro)
    except SettingsError as exc:
        return _fail("reconcile", exc, EXIT_USAGE)
    except ReconcileCommandError as exc:
        return _fail("reconcile", exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        return 130


def _verify(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.cli.verify import VerifyError, verify_store_command
    from relay.settings import SettingsError

    store, source = store_url(args, env)
    try:
        return asyncio.run(verify_store_command(store, store_source=source))
    except SettingsError as exc:
        return _fail(args.command, exc, EXIT_USAGE)
    except VerifyError as exc:
        return _fail(args.command, exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        return 130


def _peers(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from relay.cli.peers import PeersError, peers_command
    from relay.settings import SettingsError

    store, source = store_url(args, env)
    try:
        return asyncio.run(peers_command(store, args.json, store_source=source))
    except SettingsError as exc:
        return _fail(args.command, exc, EXIT_USAGE)
    except PeersError as exc:
        return _fail(args.command, exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    from relay.cli.output import OutputError, guarded

    args = parse_args(build_parser(), argv)
    environ = os.environ if env is None else env
    stdout = sys.stdout
    sys.stdout = guarded(stdout)
    try:
        status = _run(args, environ)
        sys.stdout.flush()  # a reader gone away shows here, not in the interpreter's exit
        return status
    except BrokenPipeError:  # `dfos-relay follow URL | head -1`: the reader has enough
        _discard_output()
        return EXIT_BROKEN_PIPE
    except OutputError as exc:  # `> file` on a full disk, `>&-`
        _discard_output()
        return _fail(args.command, f"cannot write to standard output: {exc}", EXIT_FAILURE)
    finally:
        sys.stdout = stdout


def _discard_output() -> None:
    """What is still buffered for stdout goes nowhere, so the interpreter's
    exit does not fail on it again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


def _run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.command == "serve":
        return _serve(args, environ)
    if args.command in ("follow", "feed"):
        return _feed(args, environ)
    if args.command == "converge":
        return _converge(args)
    if args.command == "reconcile":
        return _reconcile(args, environ)
    if args.command == "verify-store":
        return _verify(args, environ)
    if args.command == "peers":
        return _peers(args, environ)
    return _transfer(args, environ)


if __name__ == "__main__":  # python -m relay.cli.main
    sys.exit(main())

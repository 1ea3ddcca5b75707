"""Convergence check over relay log dumps (issue 6): the job's entry point.

Usage (cluster):  spark-submit --py-files dfos.zip spark/convergence.py [options] DUMP...
Usage (local):    dfos-relay converge [--master local[*]] [--verify] [--out report.json] DUMP...

A DUMP is ``name=path`` or ``path`` (a JSON Lines file of ``dump-log``, gzip
or not, or a directory of them). Exit codes: 0 when all relays agree (and,
with ``--verify``, every op verifies), 1 when they do not, 2 on bad input
(named with file and line, never a trace).
"""

from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):  # run as a script by spark-submit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spark.dumpargs import DumpSpec, is_remote, parse_dump_args

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "add_arguments",
    "build_parser",
    "get_session",
    "input_bytes",
    "is_small",
    "run_convergence",
    "run_job",
    "run_parsed",
    "session_settings",
]

DEFAULT_SHUFFLE_PARTITIONS = 4
LOCAL_DRIVER_MEMORY = "3g"
# Below this much dump data (local files; gzip counted at GZIP_RATIO times its
# size) a job is small: its cold JVM spends more CPU compiling (C2) and
# collecting (G1's threads) than computing, so a local session it starts runs
# with SMALL_JOB_JAVA_OPTIONS (about 40% less JVM CPU on a 2 x 40-op dump) and
# no UI, and it shuffles into one partition unless told otherwise.
SMALL_INPUT_BYTES = 16 << 20
GZIP_RATIO = 8
SMALL_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_VERIFY_ONLY = ("jwsToken", "did", "author")
DEFAULT_MAX_LISTED = 1000
EXIT_AGREE, EXIT_DIVERGED, EXIT_BAD_INPUT = 0, 1, 2
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


DESCRIPTION = "Check whether relay log dumps have converged."


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options; shared by spark-submit and ``dfos-relay converge``."""
    parser.add_argument(
        "dumps", nargs="+", metavar="DUMP", help="NAME=PATH or PATH (.jsonl[.gz] or a directory)"
    )
    parser.add_argument(
        "--master", default=None, metavar="URL", help="Spark master (default: spark-submit's)"
    )
    parser.add_argument("--verify", action="store_true", help="re-verify every operation")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the JSON report here")
    parser.add_argument(
        "--parquet", default=None, metavar="DIR", help="write the difference tables here"
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=_count(1),
        default=None,
        metavar="N",
        help=f"Spark shuffle partitions (default {DEFAULT_SHUFFLE_PARTITIONS},"
        f" 1 under {SMALL_INPUT_BYTES >> 20} MiB of dumps)",
    )
    parser.add_argument(
        "--max-listed",
        type=_count(0),
        default=DEFAULT_MAX_LISTED,
        metavar="N",
        help=f"cap on items per list in the JSON report (default {DEFAULT_MAX_LISTED})",
    )
    parser.add_argument("--quiet", action="store_true", help="no summary on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="converge", description=DESCRIPTION)
    add_arguments(parser)
    return parser


def input_bytes(specs: list[DumpSpec]) -> int | None:
    """The dumps' local bytes (a gzip file's times ``GZIP_RATIO``), or None
    when one is remote or cannot be sized."""
    total = 0
    for spec in specs:
        if is_remote(spec.path):
            return None
        path = spec.path.removeprefix("file://")
        try:
            files = [e.path for e in os.scandir(path)] if os.path.isdir(path) else [path]
            for file in files:
                total += os.path.getsize(file) * (GZIP_RATIO if file.endswith(".gz") else 1)
        except OSError:
            return None
    return total


def is_small(specs: list[DumpSpec]) -> bool:
    size = input_bytes(specs)
    return size is not None and size < SMALL_INPUT_BYTES


def session_settings(
    master: str | None, conf: dict[str, str] | None, *, small: bool
) -> dict[str, str]:
    """``conf`` with what a local session gets by default (``get_session``)."""
    settings = dict(conf or {})
    if master and master.startswith("local"):
        settings.setdefault("spark.driver.memory", LOCAL_DRIVER_MEMORY)
        if small:
            settings.setdefault("spark.driver.extraJavaOptions", SMALL_JOB_JAVA_OPTIONS)
            settings.setdefault("spark.ui.enabled", "false")
    return settings


def get_session(
    master: str | None,
    shuffle_partitions: int,
    conf: dict[str, str] | None = None,
    *,
    small: bool = False,
) -> SparkSession:
    """Get or create the session; Python workers use this interpreter and tree.

    A local master gets ``LOCAL_DRIVER_MEMORY`` unless the caller sets
    ``spark.driver.memory`` (the decoded entries are cached in the driver's
    JVM) and, for a ``small`` job, ``SMALL_JOB_JAVA_OPTIONS`` and no UI
    unless the caller sets them. ``conf`` only applies when this call starts
    the JVM.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    path = os.environ.get("PYTHONPATH", "")
    if _ROOT not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, path) if p)
    settings = session_settings(master, conf, small=small)
    builder = SparkSession.builder.appName("dfos-convergence")
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    configure(spark, shuffle_partitions)
    return spark


def configure(spark: SparkSession, shuffle_partitions: int) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # Malformed timestamps become nulls rather than failing the job.
    spark.conf.set("spark.sql.ansi.enabled", "false")
    # Per-CID aggregations collect a few variants per key: keep them in the
    # hash map instead of sorting after 128 keys (about 2.5x faster here).
    spark.conf.set("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "65536")


def run_job(spark: SparkSession, args: argparse.Namespace) -> dict[str, object]:
    """Read, replay, compare (and verify); return the report. Raises InputError."""
    from pyspark.sql import functions as F

    from spark.compare import chain_table, holdings, partial_ops, relay_stats, token_conflicts
    from spark.dumps import InputError, check_entries, read_entries
    from spark.replay import chain_heads, decode_entries
    from spark.report import Tables, build_report, write_parquet
    from spark.tokens import token_table

    specs = parse_dump_args(args.dumps)
    relays = [s.relay for s in specs]
    partitions = int(
        spark.conf.get("spark.sql.shuffle.partitions")
        or args.shuffle_partitions
        or DEFAULT_SHUFFLE_PARTITIONS
    )
    entries = read_entries(spark, specs).withColumn("tokenHash", F.sha2("jwsToken", 256))
    # Tokens, signers and authors only travel when --verify needs them.
    decoded = decode_entries(entries).drop(*([] if args.verify else _VERIFY_ONLY))
    # The one pass over the input: every later table reads this cached one.
    table = token_table(decoded, relays, partitions).cache()
    try:
        check_entries(spark, specs, table)
        slim: DataFrame = table.drop("ok", "jwsToken", "did")
        heads = chain_heads(slim, relays).cache()
        held = holdings(slim, relays).cache()
        partial = partial_ops(held, relays).cache()
        tables = Tables(
            stats=relay_stats(slim, heads, relays),
            chains=chain_table(heads, partial, relays).cache(),
            partial=partial,
            conflicts=token_conflicts(held),
            invalid=_invalid(spark, table.drop("ok"), held, relays, partitions)
            if args.verify
            else None,
        )
        report = build_report(tables, relays, args.max_listed)
        if args.parquet:
            try:
                write_parquet(tables, args.parquet)
            except Exception as exc:
                raise InputError(f"--parquet {args.parquet}: {root_cause(exc)}") from exc
        return report
    finally:
        spark.catalog.clearCache()


def _invalid(
    spark: SparkSession, table: DataFrame, held: DataFrame, relays: list[str], partitions: int
) -> DataFrame:
    from spark.verify import invalid_ops
    from spark.verify_ops import now_ms

    return invalid_ops(spark, table, held, relays, partitions, now_ms()).cache()


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the job runs, outputs that cannot be written."""
    from spark.dumps import InputError

    if args.out:
        if os.path.isdir(args.out):
            raise InputError(f"--out {args.out}: is a directory")
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
            raise InputError(f"--out {args.out}: its directory does not exist")
    parquet = (args.parquet or "").removeprefix("file://")
    if parquet and os.path.exists(parquet) and not os.path.isdir(parquet):
        raise InputError(f"--parquet {args.parquet}: is not a directory")


def root_cause(exc: BaseException) -> str:
    """The first line of the innermost cause of a (py4j-wrapped) Spark error."""
    error: Any = getattr(exc, "java_exception", None)
    if error is None:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for _ in range(32):  # a cause chain is short; a cycle must not hang us
        cause = error.getCause()
        if cause is None:
            break
        error = cause
    message = error.getMessage()
    return str(message).splitlines()[0] if message else str(error.getClass().getName())


def run_convergence(argv: list[str], spark: SparkSession | None = None) -> int:
    """Run the job; print the summary; return the exit code (0, 1 or 2)."""
    try:
        args = build_parser().parse_intermixed_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return EXIT_BAD_INPUT if exc.code else EXIT_AGREE
    return run_parsed(args, spark)


def run_parsed(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """``run_convergence`` for arguments already parsed (``dfos-relay converge``)."""
    from spark.dumps import InputError, read_failure
    from spark.report import summary, write_json

    try:
        check_outputs(args)
        small = is_small(parse_dump_args(args.dumps))
        partitions = args.shuffle_partitions or (1 if small else DEFAULT_SHUFFLE_PARTITIONS)
        session = spark or get_session(args.master, partitions, small=small)
        if spark is not None:
            configure(spark, partitions)
        report = run_job(session, args)
    except Exception as exc:  # a dump Spark cannot read fails the first action
        error = exc if isinstance(exc, InputError) else read_failure(exc)
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out:
        try:
            write_json(report, args.out)
        except OSError as exc:
            print(f"error: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if not args.quiet:
        print(summary(report))
    ok = report["converged"] and report.get("verified", True)
    return EXIT_AGREE if ok else EXIT_DIVERGED


if __name__ == "__main__":
    sys.exit(run_convergence(sys.argv[1:]))

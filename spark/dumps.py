"""Read global-log dumps (the JSON Lines of ``dfos-relay dump-log``).

Role: read the dumps of ``DUMP`` arguments (``spark.dumpargs``; a file or a
directory, gzip read directly) into one DataFrame of
``relay, cid, jwsToken, kind, chainId``. Invariant: every non-blank line is
a JSON object with the four string fields and a known kind, otherwise
``InputError`` names the file and line. Line numbers are only
computed on that error path, so the hot path stays in Spark's JSON reader;
since that reader turns a number or object into the string of its JSON text,
a field that reads like one sends its file down the error path, where
``malformed_reason`` judges each line by its JSON types.
That reader reads a line holding a JSON array as its entries, and no reader
keeps a line longer than ``MAX_LINE_BYTES``: ``spark.lines`` audits the
lines in a text pass, so an array line is reported as malformed and an
over-long line as too long, never read as entries or dropped.

Not checked here: tokens are not decoded (``replay``) nor verified (``verify``).
"""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark.dumpargs import DumpSpec, InputError, parse_dump_args
from spark.lines import (
    MAX_LINE_BYTES,
    READ_OPTIONS,
    audit_lines,
    check_line_lengths,
    shown_file,
    spark_path,
)

__all__ = [
    "KINDS",
    "MAX_LINE_BYTES",
    "DumpSpec",
    "InputError",
    "check_entries",
    "load_dumps",
    "parse_dump_args",
    "read_entries",
    "read_failure",
]

KINDS = ("identity-op", "content-op", "beacon", "artifact", "countersign")
ENTRY_SCHEMA = StructType(
    [StructField(name, StringType()) for name in ("cid", "jwsToken", "kind", "chainId")]
)
_READ_SCHEMA = StructType([*ENTRY_SCHEMA.fields, StructField("_corrupt", StringType())])
_MAX_REPORTED_LINES = 5
_MAX_SHOWN = 64  # characters of an offending value in an error line
# The JSON text of a number, as the reader keeps it (``_suspect``); content
# chain ids may start with a digit, so a first character is not enough.
_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_NUMBER_STARTS = ("-", *"0123456789")
_READ_FAILED = "FAILED_READ_FILE"  # Spark's error class for a file it cannot read


def _read_raw(spark: SparkSession, spec: DumpSpec) -> DataFrame:
    """One dump through Spark's JSON Lines reader (Jackson over the raw
    bytes: about 2x faster than ``from_json`` over text lines, and each line
    is parsed once). A line that is not JSON lands in ``_corrupt``; single
    quotes and NaN are not JSON (``malformed_reason`` agrees)."""
    return (
        spark.read.schema(_READ_SCHEMA)
        .options(**READ_OPTIONS)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt")
        .option("allowSingleQuotes", "false")
        .option("allowNonNumericNumbers", "false")
        .json(spark_path(spec.path))
    )


def _well_formed() -> Column:
    """What Spark's reader can tell of a line: JSON, the four fields, a known
    kind (null when a field is missing)."""
    present = [F.col(name).isNotNull() for name in ("cid", "jwsToken", "chainId")]
    return reduce(
        Column.__and__, [F.col("_corrupt").isNull(), *present, F.col("kind").isin(*KINDS)]
    )


def _suspect() -> Column:
    """A field that may not have been a JSON string: the reader gives a
    string field the JSON text of any other value (``12``, ``true``,
    ``{...}``): a number's whole text, or an object's or array's start. A
    real string may read so too (``"12"``), so a suspect line is judged by
    ``malformed_reason`` (``check_entries``); real CIDs, tokens and chain
    ids never do."""

    def suspect(c: Column) -> Column:
        first = F.substring(c, 1, 1)
        number = first.isin(*_NUMBER_STARTS) & c.rlike(_NUMBER)  # the regex only when needed
        return number | first.isin("{", "[") | c.isin("true", "false")

    return reduce(Column.__or__, [suspect(F.col(n)) for n in ("cid", "jwsToken", "chainId")])


def _read_one(spark: SparkSession, spec: DumpSpec, index: int) -> DataFrame:
    """``_read_raw`` with ``ok``: false for a malformed or suspect line."""
    ok = F.coalesce(_well_formed() & ~_suspect(), F.lit(False))
    return _read_raw(spark, spec).select(
        F.lit(spec.relay).alias("relay"),
        F.lit(index).alias("relayIndex"),
        ok.alias("ok"),
        "cid",
        "jwsToken",
        "kind",
        "chainId",
    )


def read_entries(spark: SparkSession, specs: list[DumpSpec]) -> DataFrame:
    """All entries of all dumps, parsed but not checked: ``relay, relayIndex,
    ok, cid, jwsToken, kind, chainId`` (``ok`` false for a malformed line;
    ``relayIndex`` is the relay's position among the sorted relay names).

    Lets the caller validate in the same pass that decodes (``check_entries``
    over its result), so the input is read once. Blank lines are skipped.
    """
    order = {name: i for i, name in enumerate(sorted(s.relay for s in specs))}
    try:
        parts = [_read_one(spark, s, order[s.relay]) for s in specs]
    except Exception as exc:  # Spark raises AnalysisException for unreadable paths
        raise InputError(f"cannot read dumps: {str(exc).splitlines()[0]}") from exc
    return reduce(DataFrame.unionByName, parts)


def check_entries(spark: SparkSession, specs: list[DumpSpec], entries: DataFrame) -> None:
    """Raise ``InputError`` naming file and line when a dump has an
    over-long line (``spark.lines``) or a malformed line. ``entries`` is
    ``read_entries`` (or a table derived from it that keeps ``ok`` and either
    ``relay`` or the relay bitmask words of ``spark.tokens``); a text pass
    over the dumps and one small Spark job when every line is well formed.
    Lines that are only suspect (``_suspect``) are judged line by line, as
    are the files holding a JSON array line (which the reader took for
    entries)."""
    from spark.tokens import held_by

    audits = audit_lines(spark, specs)
    check_line_lengths(spark, audits)  # before: a skipped line shifts line numbers
    arrays: dict[str, list[str]] = {}
    for audit in audits:
        if audit.arrays:
            arrays.setdefault(audit.relay, []).append(audit.file)
    names = sorted(s.relay for s in specs)
    relay = F.col("relay") if "relay" in entries.columns else held_by(names).getItem(0)
    bad = entries.where(~F.col("ok")).select(relay.alias("relay")).distinct().collect()
    flagged = {row["relay"] for row in bad} | set(arrays)
    for spec in sorted((s for s in specs if s.relay in flagged), key=lambda s: s.relay):
        _check_dump(spark, spec, arrays.get(spec.relay, []))


def _check_dump(spark: SparkSession, spec: DumpSpec, array_files: list[str]) -> None:
    """Error path: the files of ``spec`` with flagged lines (and
    ``array_files``, whose array lines read as entries), checked line by
    line; raise on the first holding a malformed line."""
    rows = (
        _read_raw(spark, spec)
        .select(
            F.input_file_name().alias("file"),
            F.coalesce(_well_formed(), F.lit(False)).alias("formed"),
            F.coalesce(_suspect(), F.lit(False)).alias("suspect"),
        )
        .where(~F.col("formed") | F.col("suspect"))
        .groupBy("file")
        .agg(F.bool_and("formed").alias("formed"))
        .collect()
    )
    formed = {row["file"]: row["formed"] for row in rows} | dict.fromkeys(array_files, False)
    for file in sorted(formed):
        found = _malformed_lines(spark, spec, file)
        shown = shown_file(file)
        if found:
            raise InputError(
                "; ".join(f"{shown}:{n}: {reason} (relay {spec.relay})" for n, reason in found)
            )
        if not formed[file]:
            raise InputError(f"{shown} (relay {spec.relay}): malformed log entry")


def read_failure(exc: Exception) -> InputError | None:
    """The ``InputError`` for a dump Spark failed to read (a truncated or
    corrupt gzip member, an unreadable file) while running a job, or None
    for any other failure. Spark reports it by error class, on the Python
    exception or on the Java one py4j wraps."""
    java = getattr(exc, "java_exception", None)
    source: Any = exc if hasattr(exc, "getCondition") else java
    try:
        condition = source.getCondition() if source is not None else None
        message = str(source.getMessage()) if source is not None else ""
    except Exception:  # not a Spark error after all
        return None
    if not isinstance(condition, str) or not condition.startswith(_READ_FAILED):
        return None
    shown = message.split("] ", 1)[-1].split("SQLSTATE")[0].strip()
    return InputError(f"cannot read dumps: {shown.replace('file://', '')}")


def load_dumps(spark: SparkSession, specs: list[DumpSpec]) -> DataFrame:
    """All entries of all dumps: ``relay, relayIndex, cid, jwsToken, kind,
    chainId``.

    Raises ``InputError`` when a dump has a malformed line (validation runs
    one Spark job over the input).
    """
    entries = read_entries(spark, specs)
    check_entries(spark, specs, entries)
    return entries.drop("ok")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def malformed_reason(line: str) -> str | None:
    """Why a dump line is not a log entry, or None when it is one."""
    if not line.strip():
        return None
    try:
        entry = json.loads(line, parse_constant=_no_constant)
    except ValueError:
        return "not valid JSON"
    except RecursionError:  # json's decoder recurses once per nesting level
        return "JSON nested too deeply"
    if not isinstance(entry, dict):
        return "not a JSON object"
    for name in ("cid", "jwsToken", "kind", "chainId"):
        if not isinstance(entry.get(name), str):
            return f"field {name} missing or not a string"
    if entry["kind"] not in KINDS:
        return f"unknown kind {_clipped(entry['kind'])}"
    return None


def _clipped(value: str) -> str:
    """``value`` quoted for an error line: its first ``_MAX_SHOWN``
    characters and, when cut, its length (a dump line may be as long as
    ``MAX_LINE_BYTES``). Only the shown part is quoted."""
    if len(value) <= _MAX_SHOWN:
        return repr(value)
    return f"{value[:_MAX_SHOWN]!r}... ({len(value)} characters)"


def _malformed_lines(spark: SparkSession, spec: DumpSpec, file: str) -> list[tuple[int, str]]:
    """Error path only: number the lines of ``file`` (one of ``spec``'s, as
    ``input_file_name`` names it); the first bad ones. The file is found
    again through ``spec``'s path, as the JSON reader found it: its name is
    a URI (escaped), and ``textFile`` would also split it at commas and
    expand glob characters."""
    lines = (
        spark.read.options(**READ_OPTIONS)
        .text(spark_path(spec.path))
        .where(F.input_file_name() == file)
        .select("value")
    )
    numbered = lines.rdd.map(lambda row: row[0]).zipWithIndex()
    found = (
        numbered.map(lambda pair: (pair[1] + 1, malformed_reason(pair[0])))
        .filter(lambda pair: pair[1] is not None)
        .take(_MAX_REPORTED_LINES)
    )
    return [(n, reason) for n, reason in found if reason is not None]

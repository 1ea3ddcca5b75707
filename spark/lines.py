"""Dump files as lines: the line-length bound and the line audit.

Role: what Spark's JSON reader cannot see of a dump's lines. Every read of a
dump goes through Hadoop's ``LineRecordReader`` with ``READ_OPTIONS``: it
keeps at most ``MAX_LINE_BYTES`` (plus a line end) of a line in memory and
*skips* a longer line without a trace, so a several-GB line cannot exhaust an
executor. The JSON reader also reads a line holding a JSON array as its
entries. ``audit_lines`` makes both visible in one text pass over the dumps
(no JSON parsing), per file:

- array lines: lines whose first non-blank character is ``[``;
- over-long lines: an uncompressed file's bytes not accounted for by the
  lines read and their line ends; a local gzip dump, whose decompressed size
  is unknown, is scanned in a Python task (``scan_overlong``), as is a local
  file whose bytes do not add up, to name the over-long lines.

Not detected: an over-long line in a remote compressed dump (its size is
unknown without decompressing it; the line is still bounded and skipped).
Relay tokens are at most ``MAX_TOKEN_CHARS`` (64 KiB), so a log entry line is
far below the bound.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from relay.protocol.jws import MAX_TOKEN_CHARS
from spark.dumpargs import DumpSpec, InputError, is_remote

__all__ = [
    "MAX_LINE_BYTES",
    "READ_OPTIONS",
    "LineAudit",
    "audit_lines",
    "check_line_lengths",
    "scan_overlong",
    "shown_file",
    "spark_path",
]

# 64 times the largest token a relay accepts, and the default request body
# cap: no log entry line comes near it.
MAX_LINE_BYTES = 64 * MAX_TOKEN_CHARS
# Hadoop skips a line whose bytes *with its line end* reach this; + 3 keeps
# every line of at most MAX_LINE_BYTES whatever its end ("\n" or "\r\n").
READ_OPTIONS = {"mapreduce.input.linerecordreader.line.maxlength": str(MAX_LINE_BYTES + 3)}
_MAX_REPORTED_LINES = 5
_GLOB_CHARS = frozenset("\\[]{}*?")  # Hadoop's glob syntax, escaped by a backslash
_COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")  # Hadoop's codecs
_BOM = 3  # LineRecordReader drops a UTF-8 byte order mark
_CHUNK = 1 << 20


class _Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class LineAudit:
    """One dump file as its lines were read (``file`` as ``input_file_name``)."""

    relay: str
    file: str
    size: int  # bytes on storage (compressed size for a compressed file)
    lines: int
    line_bytes: int  # bytes of the lines read, line ends excluded
    arrays: int  # lines holding a JSON array
    longest: int  # bytes of its longest line read

    def suspect(self) -> bool:
        """A line read past the limit (Hadoop keeps two bytes more of a line
        ending in a single ``\\n``) or, uncompressed, bytes that no line read
        explains: a skipped (over-long) line, or line ends mixing ``\\n``
        and ``\\r\\n``. A compressed file's size says nothing of its lines."""
        if self.longest > MAX_LINE_BYTES:
            return True
        if self.file.endswith(_COMPRESSED):
            return False
        slack = self.size - self.line_bytes
        ends = (self.lines, self.lines - 1, 2 * self.lines, 2 * self.lines - 1)
        return not any(slack - bom in ends for bom in (0, _BOM))


def spark_path(path: str) -> str:
    """``path`` as Spark must be given it: a local dump exists as named
    (``parse_dump_args``), so its glob characters are escaped; a remote
    path may be a glob on purpose."""
    if is_remote(path):
        return path
    return "".join(f"\\{c}" if c in _GLOB_CHARS else c for c in path)


def shown_file(file: str) -> str:
    """``input_file_name``'s URI as the user wrote the path."""
    local = file.removeprefix("file://") if file.startswith("file:///") else file
    return unquote(local.removeprefix("file:"))


def _lines(spark: SparkSession, spec: DumpSpec) -> DataFrame:
    """One row per line read, and one per file (a file of nothing but an
    over-long line has no line read): ``relay, file, size, line, bytes,
    array``."""
    value = F.col("value")
    first = F.substring(value, 1, 1)
    # The regex only for a line starting with JSON whitespace.
    array = (first == "[") | (first.isin(" ", "\t", "\r") & value.rlike(r"^[ \t\r]*\["))
    path = spark_path(spec.path)
    lines = (
        spark.read.options(**READ_OPTIONS)
        .text(path)
        .select(
            F.lit(1).alias("line"),
            F.octet_length(value).alias("bytes"),
            array.cast("int").alias("array"),
        )
    )
    # binaryFile lists the files Spark reads; their content is not read
    # unless selected.
    files = spark.read.format("binaryFile").load(path).select(F.col("length").alias("size"))
    parts = [
        df.select(F.lit(spec.relay).alias("relay"), F.input_file_name().alias("file"), "*")
        for df in (lines, files)
    ]
    return parts[0].unionByName(parts[1], allowMissingColumns=True)


def audit_lines(spark: SparkSession, specs: list[DumpSpec]) -> list[LineAudit]:
    """Every dump file's ``LineAudit``, sorted by relay and file (one job)."""
    parts = [_lines(spark, s) for s in specs]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    rows = (
        union.groupBy("relay", "file")
        .agg(
            F.max("size").alias("size"),
            F.coalesce(F.sum("line"), F.lit(0)).alias("lines"),
            F.coalesce(F.sum("bytes"), F.lit(0)).alias("b"),
            F.coalesce(F.sum("array"), F.lit(0)).alias("a"),
            F.coalesce(F.max("bytes"), F.lit(0)).alias("m"),
        )
        .collect()
    )
    # Sorted here, not by an orderBy (a sampling job and a shuffle of its
    # own): Python orders strings by code point, as Spark by UTF-8 bytes.
    audits = [
        LineAudit(r["relay"], r["file"], r["size"], r["lines"], r["b"], r["a"], r["m"])
        for r in rows
    ]
    return sorted(audits, key=lambda a: (a.relay, a.file))


def scan_overlong(path: str) -> tuple[int, list[int]]:
    """Over-long lines of a local dump (gzip by its ``.gz`` name): how many,
    and the numbers of the first ones. Reads at most a chunk at a time; an
    unreadable file counts none (Spark's own read reports it)."""
    try:
        with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
            return _count_overlong(f)
    except (OSError, EOFError, ValueError):  # BadGzipFile is an OSError; zlib.error a ValueError
        return 0, []


def _count_overlong(f: _Readable) -> tuple[int, list[int]]:
    count, number = 0, 0
    first: list[int] = []
    while line := f.readline(MAX_LINE_BYTES + 3):
        number += 1
        if line.endswith(b"\n") and len(line.rstrip(b"\r\n")) <= MAX_LINE_BYTES:
            continue
        if not line.endswith(b"\n"):  # cut by the limit, or the last line
            if len(line) <= MAX_LINE_BYTES:
                continue
            while (rest := f.readline(_CHUNK)) and not rest.endswith(b"\n"):
                pass
        count += 1
        if len(first) < _MAX_REPORTED_LINES:
            first.append(number)
    return count, first


def _local(audit: LineAudit) -> bool:
    return audit.file.startswith("file:")


def _scanned(audit: LineAudit) -> bool:
    """Scanned in Python: a local gzip dump (its size says nothing of its
    lines), or a local suspect one."""
    return _local(audit) and (audit.file.endswith(".gz") or audit.suspect())


def check_line_lengths(spark: SparkSession, audits: list[LineAudit]) -> None:
    """Raise ``InputError`` naming the over-long lines of the audited files
    (file and line for a local file; the file for a remote one)."""
    for a in audits:
        if not _local(a) and a.suspect():
            raise InputError(
                f"{shown_file(a.file)} (relay {a.relay}): a line longer than {MAX_LINE_BYTES}"
                " bytes (its bytes are not all in the lines read, or its line ends are mixed)"
            )
    scanned = [a for a in audits if _scanned(a)]
    if not scanned:
        return
    paths = [shown_file(a.file) for a in scanned]
    found = spark.sparkContext.parallelize(paths, len(paths)).map(scan_overlong).collect()
    for audit, path, (count, first) in zip(scanned, paths, found, strict=True):
        if count:
            shown = "; ".join(
                f"{path}:{n}: line longer than {MAX_LINE_BYTES} bytes (relay {audit.relay})"
                for n in first
            )
            more = f" ({count} such lines in the file)" if count > len(first) else ""
            raise InputError(shown + more)

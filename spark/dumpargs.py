"""The ``DUMP`` arguments of the convergence job: ``name=path`` or ``path``.

Role: name each dump (by its file name without suffixes when no name is
given) and refuse, before Spark runs, what cannot be a dump. Invariants:
relay names are unique and non-empty; a local dump exists, and a local dump
directory holds its dump files directly. Remote paths (``hdfs://``,
``s3a://``...) are left to Spark. Nothing here reads a dump (``dumps``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DumpSpec", "InputError", "is_remote", "parse_dump_args"]

_SUFFIXES = (".gz", ".jsonl", ".ndjson", ".json", ".log")
_HIDDEN = ("_", ".")  # names Spark does not read in a directory


class InputError(Exception):
    """Bad input: a missing dump, a duplicate relay name or a malformed line."""


@dataclass(frozen=True, slots=True)
class DumpSpec:
    relay: str
    path: str


def _default_name(path: str) -> str:
    name = os.path.basename(path.rstrip("/"))
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _check_local(relay: str, path: str) -> None:
    """A local dump exists; a directory holds its files directly. Spark
    reads no plain subdirectory (a relay dumped one level down would read as
    an empty log) and takes ``name=value`` subdirectories for partitions,
    whose value then replaces every entry's field of that name."""
    if not os.path.exists(path):
        raise InputError(f"dump {path!r} of relay {relay!r} does not exist")
    if not os.path.isdir(path):
        return
    shown = [e for e in os.scandir(path) if not e.name.startswith(_HIDDEN)]
    nested = sorted(e.name for e in shown if e.is_dir())
    if nested:
        raise InputError(
            f"dump directory {path!r} of relay {relay!r} holds directories"
            f" ({', '.join(nested[:3])}): its dump files must be directly in it"
        )
    if not shown:
        raise InputError(f"dump directory {path!r} of relay {relay!r} holds no dump files")


def parse_dump_args(args: list[str]) -> list[DumpSpec]:
    """``name=path`` or ``path`` (named by the file name without suffixes)."""
    specs: list[DumpSpec] = []
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep or "/" in name:
            name, path = _default_name(arg), arg
        if not name or not path:
            raise InputError(f"bad dump argument {arg!r} (expected name=path or path)")
        if not is_remote(path):
            _check_local(name, path.removeprefix("file://"))
        specs.append(DumpSpec(name, path))
    names = [s.relay for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(f"relay names must be unique: {', '.join(duplicates)} given twice")
    if not specs:
        raise InputError("no dumps given")
    return specs

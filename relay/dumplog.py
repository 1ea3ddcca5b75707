"""Dump a relay's global log to JSON Lines (WEB-RELAY.md "Operation Log").

Role: the input format of the convergence job (``spark/``): one log entry per
line, ``{"cid", "jwsToken", "kind", "chainId"}``, in the relay's log order.
``dump_log`` pages ``GET /log?after=&limit=1000`` through an injected
``httpx.AsyncClient`` and appends each page as it arrives, so an interrupted
dump resumes from the last CID written. A ``.gz`` path is written gzip
compressed (appends add gzip members, which readers concatenate); a ``.gz``
dump interrupted mid-write (its last member flushed but never closed) is
rewritten as its complete lines before resuming, since a member appended
after an unterminated one would be unreadable.

Not checked here: the entries are copied as served; nothing is decoded or
verified (that is the convergence job's ``--verify``).
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from relay.protocol.untrusted import json_value

__all__ = ["LOG_PAGE_LIMIT", "DumpError", "dump_log", "last_dumped_cid", "log_entry_to_jsonl"]

LOG_PAGE_LIMIT = 1000
ENTRY_FIELDS = ("cid", "jwsToken", "kind", "chainId")


class DumpError(Exception):
    """The relay answered with a bad status or a payload that is not a log page."""


def log_entry_to_jsonl(entry: Mapping[str, Any]) -> str:
    """One log entry as a JSON Lines line (no trailing newline).

    Raises ``DumpError`` when a field is missing or not a string.
    """
    if not isinstance(entry, Mapping):
        raise DumpError(f"log entry must be a JSON object, got {str(entry)[:100]!r}")
    values = {name: entry.get(name) for name in ENTRY_FIELDS}
    for name, value in values.items():
        if not isinstance(value, str):
            raise DumpError(f"log entry field {name} must be a string, got {value!r}")
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return path.open(mode, encoding="utf-8")


def last_dumped_cid(path: Path) -> str | None:
    """The CID of the last complete line of an existing dump, or None when
    it has none. Raises ``DumpError`` when the file cannot be read or its
    last line is not a log entry: resuming from a guess would duplicate
    the log (or append it to something that is not a dump)."""
    return _read_last(path)[0]


def _read_last(path: Path) -> tuple[str | None, bool]:
    """``last_dumped_cid``, and whether the file is a ``.gz`` dump torn
    mid-write (its last member flushed but never closed)."""
    if not path.exists():
        return None, False
    last: str | None = None
    torn = False
    try:
        with _open(path, "r") as fh:
            for line in fh:
                if line.endswith("\n") and line.strip():
                    last = line
    except EOFError:
        torn = True
    except (OSError, UnicodeDecodeError) as exc:  # BadGzipFile is an OSError
        raise DumpError(f"cannot resume {path} ({exc}); dump it anew with --no-resume") from None
    if last is None:
        return None, torn
    try:
        entry = json.loads(last)
    except ValueError:
        entry = None
    cid = entry.get("cid") if isinstance(entry, dict) else None
    if not isinstance(cid, str):
        raise DumpError(
            f"cannot resume {path}: its last line is not a log entry; dump it anew with --no-resume"
        )
    return cid, torn


def _mend_torn_gzip(path: Path) -> None:
    """Rewrite a ``.gz`` dump whose last member has no end as its complete
    lines (a temporary file, then an atomic replace): a member appended
    after an unterminated one would be unreadable."""
    mended = path.with_name(f".{path.name}")  # still .gz: written compressed
    with _open(path, "r") as src, _open(mended, "w") as dst, contextlib.suppress(EOFError):
        for line in src:
            if line.endswith("\n"):
                dst.write(line)
    mended.replace(path)


async def _page(
    client: httpx.AsyncClient, base_url: str, after: str | None
) -> tuple[list[Mapping[str, Any]], str | None]:
    params: dict[str, str | int] = {"limit": LOG_PAGE_LIMIT}
    if after is not None:
        params["after"] = after
    url = base_url.rstrip("/") + "/log"
    response = await client.get(url, params=params)
    if response.status_code != 200:
        excerpt = " ".join(response.text[:200].split())  # an HTML error page: one line
        raise DumpError(f"GET {url} answered {response.status_code}: {excerpt}")
    try:
        body = json_value(response.content)
    except ValueError:  # not JSON, not UTF-8, nested past the parser
        raise DumpError(f"GET {url} did not answer JSON") from None
    entries = body.get("entries") if isinstance(body, dict) else None
    cursor = body.get("cursor") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not (cursor is None or isinstance(cursor, str)):
        raise DumpError(f"GET {url} did not answer a log page")
    return entries, cursor


async def _check_resumes_here(
    client: httpx.AsyncClient, base_url: str, after: str, path: Path
) -> None:
    """Nothing after ``after``: a dump that is complete, or one whose last CID
    this relay does not hold (another relay's dump, or an op purged since),
    which would never advance. Only a 404 says which; other answers pass."""
    url = f"{base_url.rstrip('/')}/operations/{after}"
    if (await client.get(url)).status_code == 404:
        raise DumpError(
            f"{path} ends with {after}, which {base_url} does not hold (a dump of another "
            "relay, or purged since); dump it anew with --no-resume"
        )


async def dump_log(
    client: httpx.AsyncClient, base_url: str, out_path: str | Path, resume: bool = True
) -> int:
    """Write the relay's global log at ``base_url`` to ``out_path``; return
    the number of entries written by this call.

    With ``resume`` an existing file is continued after its last CID;
    otherwise it is overwritten. Raises ``DumpError`` (or ``httpx.HTTPError``
    when the relay is unreachable).
    """
    path = Path(out_path)
    after, torn = _read_last(path) if resume else (None, False)
    # The first page is fetched before the file is touched: a relay that
    # cannot answer leaves an existing dump as it was, even without resume.
    entries, cursor = await _page(client, base_url, after)
    if after is not None and not entries:
        await _check_resumes_here(client, base_url, after, path)
    if torn:
        _mend_torn_gzip(path)
    lines = [log_entry_to_jsonl(entry) + "\n" for entry in entries]
    written = 0
    with _open(path, "a" if resume else "w") as fh:
        while True:
            fh.writelines(lines)
            fh.flush()
            written += len(lines)
            if cursor is None or not entries:
                return written
            entries, cursor = await _page(client, base_url, cursor)
            lines = [log_entry_to_jsonl(entry) + "\n" for entry in entries]

"""``dfos-relay dump-log`` and ``dfos-relay import``: move a relay's log in
and out as JSON Lines (``{"cid", "jwsToken", "kind", "chainId"}`` per line).

``import`` goes through ``Relay.ingest`` in batches of 100, the same
verification pipeline as ``POST /operations``: an export restores or seeds a
relay, it is never trusted. Entries whose dependencies are missing stay in
the pending buffer, exactly as they would over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import httpx

from relay.cli.progress import Progress
from relay.config import MAX_OPERATIONS_PER_REQUEST
from relay.protocol.untrusted import json_value

if TYPE_CHECKING:
    from relay.engine import Relay
    from stores.base import RelayStore

DUMP_TIMEOUT_S = 30.0
IMPORT_BATCH = MAX_OPERATIONS_PER_REQUEST


class TransferError(Exception):
    """One line for the operator."""


def drop_torn_tail(path: Path) -> int:
    """Cut an interrupted dump's incomplete last line (plain files only),
    so resuming appends after the last complete entry; returns bytes cut."""
    if path.suffix == ".gz" or not path.is_file():
        return 0
    with path.open("rb+") as fh:
        data = fh.read()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            fh.truncate(keep)
        return len(data) - keep


async def dump_command(url: str, out: str, resume: bool) -> int:
    from peer.base import normalize_peer_url
    from relay.dumplog import DumpError, dump_log

    try:
        url = normalize_peer_url(url)
    except ValueError as exc:
        raise TransferError(str(exc)) from None
    target = Path(out)
    if target.is_dir():
        raise TransferError(f"{target} is a directory, not a file to write the log to")
    if not target.parent.is_dir():
        raise TransferError(f"{out}: the directory {target.parent} does not exist")
    existed = target.exists()
    if resume:
        drop_torn_tail(target)
    progress = Progress(f"dump {url}")

    async def count_page(response: httpx.Response) -> None:
        if response.status_code == 200 and response.request.url.path.endswith("/log"):
            await response.aread()
            with contextlib.suppress(ValueError):  # dump_log reports it
                page = json_value(response.content)
                entries = page.get("entries") if isinstance(page, dict) else None
                progress.add(len(entries) if isinstance(entries, list) else 0)

    hooks = {"response": [count_page]}
    async with httpx.AsyncClient(timeout=DUMP_TIMEOUT_S, event_hooks=hooks) as client:
        try:
            written = await dump_log(client, url, out, resume=resume)
        except (DumpError, httpx.HTTPError, OSError) as exc:
            if not existed:  # a failed first dump leaves no (empty) file behind
                _remove_if_empty(target)
            raise TransferError(f"dump of {url} failed: {_plain(exc)}") from None
        except asyncio.CancelledError:  # Ctrl-C: what was written stays, resumable
            if not existed:
                _remove_if_empty(target)
            raise
        finally:
            progress.close()
    print(f"wrote {written} entries to {out}")
    return 0


def _plain(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_file() and path.stat().st_size == 0:
            path.unlink()


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_tokens(path: Path) -> Iterator[str]:
    """The ``jwsToken`` of every line; a bad line or file raises ``TransferError``."""
    number = 0
    try:
        with _open(path) as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    yield _token_of(path, number, line)
    except UnicodeDecodeError:
        raise TransferError(f"{path}:{number + 1}: not UTF-8 text") from None
    except (EOFError, OSError) as exc:  # gzip.BadGzipFile is an OSError
        raise TransferError(f"{path}: cannot read it: {_plain(exc)}") from None


def _token_of(path: Path, number: int, line: str) -> str:
    try:
        value = json_value(line)
        token = value.get("jwsToken") if isinstance(value, dict) else None
    except ValueError:
        token = None
    if not isinstance(token, str):
        raise TransferError(f"{path}:{number}: not a log entry with a jwsToken")
    return token


def _count_lines(path: Path) -> int:
    """Lines to import (for progress); an unreadable file is named here."""
    return sum(1 for _ in read_tokens(path))


async def import_command(path_text: str, store_url: str, *, store_source: str) -> int:
    """Ingest a dump; exit 0 unless an entry was rejected for good.

    Entries still waiting for a dependency that is not in the file are
    reported apart from rejections: they sequence when it arrives."""
    from relay.asgi import store_from_url
    from relay.compose import create_relay
    from stores.base import StoreError

    path = Path(path_text)
    if not path.is_file():
        raise TransferError(f"{path}: no such file")
    store = store_from_url(store_url, store_source)  # a bad URL is a usage error, before reading
    total = _count_lines(path)
    relay = create_relay(store)
    progress = Progress(f"import {path.name}", total=total)
    counts: Counter[str] = Counter()
    try:
        rebuilt = await _is_empty(store)
        async with relay.running():
            before = await relay.store.log_length()
            batch: list[str] = []
            for token in read_tokens(path):
                batch.append(token)
                if len(batch) == IMPORT_BATCH:
                    counts.update(await _ingest(relay, batch, progress))
                    batch = []
            if batch:
                counts.update(await _ingest(relay, batch, progress))
            sequenced = await relay.store.log_length() - before
            waiting = await relay.store.count_unsequenced()
            if rebuilt:
                # A log rebuilt from a dump is a new seq domain: feed tokens
                # issued before it must not resume here (they get 410).
                await relay.store.reset_feed_epoch()
    except StoreError as exc:
        raise TransferError(f"store {store_url}: {exc}") from None
    finally:
        progress.close()
    print(
        f"imported {total} entries into {store_url}: sequenced {sequenced}, "
        f"duplicate {counts['duplicate']}, rejected {counts['rejected']}, "
        f"still waiting for dependencies {waiting}"
    )
    if counts["rejected"]:
        print(f"{counts['rejected']} entries were rejected (they do not verify)", file=sys.stderr)
        return 1
    return 0


async def _is_empty(store: RelayStore) -> bool:
    await store.open()
    try:
        return await store.log_length() == 0
    finally:
        await store.close()


async def _ingest(relay: Relay, batch: list[str], progress: Progress) -> Counter[str]:
    """Per batch: ``new``, ``duplicate``, ``rejected`` (for good) or ``waiting``."""
    results = await relay.ingest(batch)
    progress.add(len(batch))
    counts: Counter[str] = Counter()
    for r in results:
        if r.reason is not None and not r.reason.is_permanent:
            counts["waiting"] += 1
        else:
            counts[str(getattr(r.status, "value", r.status))] += 1
    return counts

"""``dfos-relay dump-log`` and ``dfos-relay import``: move a relay's log in
and out as JSON Lines (``{"cid", "jwsToken", "kind", "chainId"}`` per line).

``import`` goes through ``Relay.ingest`` in batches of 100, the same
verification pipeline as ``POST /operations``: an export restores or seeds a
relay, it is never trusted. Entries whose dependencies are missing stay in
the pending buffer, exactly as they would over HTTP.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import httpx

from relay.cli.progress import Progress
from relay.config import MAX_OPERATIONS_PER_REQUEST

if TYPE_CHECKING:
    from relay.engine import Relay

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
    from relay.dumplog import DumpError, dump_log

    if resume:
        drop_torn_tail(Path(out))
    progress = Progress(f"dump {url}")

    async def count_page(response: httpx.Response) -> None:
        if response.status_code == 200 and response.request.url.path.endswith("/log"):
            await response.aread()
            with contextlib.suppress(ValueError, AttributeError):  # dump_log reports it
                progress.add(len(response.json().get("entries") or ()))

    hooks = {"response": [count_page]}
    async with httpx.AsyncClient(timeout=DUMP_TIMEOUT_S, event_hooks=hooks) as client:
        try:
            written = await dump_log(client, url, out, resume=resume)
        except (DumpError, httpx.HTTPError) as exc:
            raise TransferError(f"dump of {url} failed: {exc}") from None
        finally:
            progress.close()
    print(f"wrote {written} entries to {out}")
    return 0


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_tokens(path: Path) -> Iterator[str]:
    """The ``jwsToken`` of every line; a bad line raises ``TransferError``."""
    with _open(path) as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                token = json.loads(line).get("jwsToken")
            except (ValueError, AttributeError):
                token = None
            if not isinstance(token, str):
                raise TransferError(f"{path}:{number}: not a log entry with a jwsToken")
            yield token


def _count_lines(path: Path) -> int:
    with _open(path) as fh:
        return sum(1 for line in fh if line.strip())


async def import_command(path_text: str, store_url: str) -> int:
    from relay.asgi import store_from_url
    from relay.compose import create_relay

    path = Path(path_text)
    if not path.is_file():
        raise TransferError(f"{path}: no such file")
    relay = create_relay(store_from_url(store_url))
    progress = Progress(f"import {path.name}", total=_count_lines(path))
    counts: Counter[str] = Counter()
    async with relay.running():
        batch: list[str] = []
        for token in read_tokens(path):
            batch.append(token)
            if len(batch) == IMPORT_BATCH:
                counts.update(await _ingest(relay, batch, progress))
                batch = []
        if batch:
            counts.update(await _ingest(relay, batch, progress))
        pending = await relay.store.count_unsequenced()
    progress.close()
    summary = ", ".join(f"{status} {counts[status]}" for status in ("new", "duplicate", "rejected"))
    print(
        f"imported {sum(counts.values())} entries into {store_url}: {summary}; pending {pending}",
        file=sys.stdout,
    )
    return 0


async def _ingest(relay: Relay, batch: list[str], progress: Progress) -> Counter[str]:
    results = await relay.ingest(batch)
    progress.add(len(batch))
    return Counter(str(getattr(r.status, "value", r.status)) for r in results)

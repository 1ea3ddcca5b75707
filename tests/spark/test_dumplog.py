"""relay.dumplog: JSON Lines of a real relay's global log, resumable."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from relay.dumplog import DumpError, dump_log, log_entry_to_jsonl
from relay.testing.workload import mixed_workload

from .relays import relays


def test_entry_line_has_exactly_the_four_fields() -> None:
    entry = {"cid": "b", "jwsToken": "t", "kind": "beacon", "chainId": "d", "x": 1}
    line = log_entry_to_jsonl(entry)
    assert json.loads(line) == {"cid": "b", "jwsToken": "t", "kind": "beacon", "chainId": "d"}
    with pytest.raises(DumpError):
        log_entry_to_jsonl({"cid": "b"})


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
async def test_dump_resumes_after_the_last_cid(tmp_path: Path, suffix: str) -> None:
    tokens = mixed_workload(40, seed=2)
    path = tmp_path / f"r{suffix}"
    async with relays(1) as (node,):
        await node.post(tokens[:20])
        first = await dump_log(node.client, "http://relay.test", path)
        await node.post(tokens[20:])
        second = await dump_log(node.client, "http://relay.test", path)
        served = await node.log_tokens()
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh]
    assert first > 0 and second > 0 and first + second == len(served)
    assert lines == served


async def test_dump_resumes_after_a_gzip_dump_torn_mid_write(tmp_path: Path) -> None:
    """An interrupted ``.gz`` dump ends in a member without its trailer (each
    page is flushed, not closed): resuming keeps its entries and appends."""
    tokens = mixed_workload(40, seed=3)
    path = tmp_path / "r.jsonl.gz"
    async with relays(1) as (node,):
        await node.post(tokens[:20])
        first = [log_entry_to_jsonl(e) + "\n" for e in await node.log_tokens()]
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.writelines(first)
            fh.flush()
            torn = path.read_bytes()  # what a kill before close() leaves
        path.write_bytes(torn)
        await node.post(tokens[20:])
        await dump_log(node.client, "http://relay.test", path)
        served = await node.log_tokens()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh]
    assert lines == served

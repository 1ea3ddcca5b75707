"""Changes-feed benchmark (issue 13). Not a test; CI does not run it::

    .venv/bin/python bench/feed.py [--ops 10000] [--subscribers 200] [--batch 100] [--sweep]

Three processes, as a deployment has them: the relay (memory store, served
by hypercorn on loopback), the subscribers (one process of ``--subscribers``
live SSE readers) and the poster (this process, posting ``--ops`` ops in
batches of ``--batch``). The readers are minimal HTTP/1.1 clients that
scan each read for the events' ``id:`` lines: they check that every
subscriber gets every op once, in order, and cost little, so the figures
are the relay's and not a client library's parser.

This machine has 2 cores: the relay's event loop gets about one, and the
subscriber process the other (shared with the poster). What is printed:

1. ingest ratio: the relay's ingest rate while it serves the subscribers,
   over the rate of a fresh relay without any (target >= 0.8), in one run.
   It measures what following costs the relay (the events' encoding, the
   store reads, the writes to N sockets), with the readers off its core;
2. commit-to-receipt latency over every (op, subscriber): from the POST
   answer (the commit) at the poster to the read that brought the event
   to the subscriber (both on the system's monotonic clock); p50 and p99;
3. relay RSS per subscriber: (the relay process's RSS with N idle
   subscribers - its RSS before they connected) / N (target <= 64 KiB);
4. the delivery floor (``bench/feed_floor``): the same bytes per subscriber
   written by a bare process to as many loopback sockets, in writes of the
   relay's average size; its CPU time is what the kernel charges for the
   bytes alone, so ``C / (C + floor)`` (C: the relay's CPU for the ingest
   alone) is the best ratio any relay on one core could print here;
5. with ``--sweep``: subscriber counts doubling from 50, ``--sweep-ops``
   ops each, while p99 <= 1 s, then the midpoint of the last step: the
   largest count tried that this machine sustains with p99 <= 1 s.

Each run also prints the relay's CPU time while the ops were posted, how
long it waited for a CPU (run-queue time: other load on the machine), and
how many writes the events took: on a shared machine the wall-clock ratio
moves with the other load, the CPU figures much less.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from httpx_sse import aconnect_sse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cached_workload
from bench.feed_floor import delivery_floor
from bench.feed_readers import run_readers
from relay.testing.server import free_port, wait_for_relay

Reads = list[tuple[float, int, int]]  # per subscriber: (time, first seq, last seq) per read


def _serve_relay(port: int, max_subscribers: int, stop: Any) -> None:
    """The relay process: serve until ``stop`` is set."""
    from relay import create_relay
    from relay.config import RelayConfig
    from relay.testing.server import serve_on_loopback
    from stores.memory import MemoryStore

    async def serve() -> None:
        config = RelayConfig(feed_max_subscribers=max_subscribers)
        relay = create_relay(MemoryStore(), config=config)
        async with serve_on_loopback(relay.app, port):
            await asyncio.to_thread(stop.wait)

    asyncio.run(serve())


class RelayProcess:
    def __init__(self, max_subscribers: int) -> None:
        ctx = mp.get_context("spawn")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = ctx.Event()
        self._proc = ctx.Process(target=_serve_relay, args=(self.port, max_subscribers, self._stop))

    async def __aenter__(self) -> RelayProcess:
        self._proc.start()
        await wait_for_relay(self.url, 60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._proc.join, 20)
        if self._proc.is_alive():
            self._proc.kill()

    def cpu_s(self) -> tuple[float, float]:
        return cpu_s(self._proc.pid)

    def waited_s(self) -> float:
        return run_queue_wait_s(self._proc.pid)

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self._proc.pid}/status").read_text()
        return next(int(line.split()[1]) for line in status.splitlines() if line[:6] == "VmRSS:")


def cpu_s(pid: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def run_queue_wait_s(pid: int | None) -> float:
    """Seconds this process was runnable but waiting for a CPU (other load)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def cpu_delta(before: tuple[float, float], after: tuple[float, float]) -> str:
    user, system = after[0] - before[0], after[1] - before[1]
    return f"{user + system:.1f} s (user {user:.1f}, system {system:.1f})"


def cpu_total(before: tuple[float, float], after: tuple[float, float]) -> float:
    return after[0] + after[1] - before[0] - before[1]


async def post_all(url: str, tokens: list[str], batch: int) -> tuple[float, dict[str, float]]:
    """(ops/s, commit time per CID): the time each op's POST answer came."""
    committed: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=120) as http:
        start = time.monotonic()
        for i in range(0, len(tokens), batch):
            ops = {"operations": tokens[i : i + batch]}
            answer = await http.post(f"{url}/operations", json=ops)
            answer.raise_for_status()
            now = time.monotonic()

            for result in answer.json()["results"]:
                committed[result["cid"]] = now
        return len(tokens) / (time.monotonic() - start), committed


async def seqs_by_cid(url: str, since: int) -> dict[str, int]:
    out: dict[str, int] = {}
    params = {"since": since}
    async with (
        httpx.AsyncClient(timeout=120) as http,
        aconnect_sse(http, "GET", f"{url}/changes", params=params) as es,
    ):
        async for sse in es.aiter_sse():
            if sse.event == "op":
                data = sse.json()
                out[data["cid"]] = data["seq"]
    return out


async def head_seq(url: str) -> int:
    async with httpx.AsyncClient(timeout=30) as http:
        doc = (await http.get(f"{url}/.well-known/dfos-relay")).json()
    return int(doc["changesFeed"]["headSeq"])


async def feed_writes(url: str) -> tuple[float, float]:
    """How the relay sent the events: (writes, events), over all subscribers."""
    async with httpx.AsyncClient(timeout=30) as http:
        text = (await http.get(f"{url}/metrics")).text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line[:1] != "#")
    return (
        float(values["dfos_relay_feed_lag_operations_count"]),
        float(values["dfos_relay_feed_events_total"]),
    )


class Run(NamedTuple):
    """One run with subscribers."""

    rate: float  # ops/s
    latencies: list[float]  # s, over every (op, subscriber)
    per_subscriber_kib: float  # relay RSS per idle subscriber
    check: str  # what was checked and spent
    relay_cpu_s: float  # the relay's CPU while posting
    stream_bytes: int  # per subscriber (the median), after the response headers
    writes: float  # the relay's writes of events, over all subscribers


async def ingest_alone(tokens: list[str], batch: int) -> tuple[float, float, str]:
    """(ingest rate, the relay's CPU seconds while posting, what it spent)."""
    async with RelayProcess(1000) as relay:
        before, waited = relay.cpu_s(), relay.waited_s()
        rate, _ = await post_all(relay.url, tokens, batch)
        after, waited = relay.cpu_s(), relay.waited_s() - waited
        spent = f"{cpu_delta(before, after)}, waited for a CPU {waited:.1f} s"
        return rate, cpu_total(before, after), spent


async def with_subscribers(tokens: list[str], batch: int, n: int) -> Run:
    async with RelayProcess(max(1000, n + 10)) as relay:
        since = await head_seq(relay.url)
        before = relay.rss_kib()
        parent, child = mp.get_context("spawn").Pipe()
        readers = mp.get_context("spawn").Process(
            target=run_readers, args=(relay.port, n, since, child)
        )
        readers.start()
        try:
            await _expect(parent, "ready", 180)
            per_sub = max(0, relay.rss_kib() - before) / n
            cpu, waited = (relay.cpu_s(), cpu_s(readers.pid)), relay.waited_s()
            rate, committed = await post_all(relay.url, tokens, batch)
            relay_cpu = cpu_total(cpu[0], relay.cpu_s())
            spent = (
                f"relay CPU while posting {cpu_delta(cpu[0], relay.cpu_s())}, "
                f"waited for a CPU {relay.waited_s() - waited:.1f} s; "
                f"readers {cpu_delta(cpu[1], cpu_s(readers.pid))}"
            )
            seqs = await seqs_by_cid(relay.url, since)
            parent.send(("until", since + len(seqs), 180.0))
            reads: list[Reads]
            reads, received = await _expect(parent, "done", 240)
            writes, events = await feed_writes(relay.url)
        finally:
            await asyncio.to_thread(readers.join, 30)
            if readers.is_alive():
                readers.kill()
    commit_at = {seq: committed[cid] for cid, seq in seqs.items() if cid in committed}
    latencies = [
        t - commit_at[seq] for sub in reads for t, lo, hi in sub for seq in range(lo, hi + 1)
    ]
    complete = sum(1 for sub in reads if sub and sub[-1][2] == since + len(seqs))
    sent = f"{writes:,.0f} writes of {events / max(writes, 1):.0f} events on average"
    check = f"{complete}/{n} subscribers got all {len(seqs)} ops, in order, once; {sent}; {spent}"
    stream_bytes = int(statistics.median(received))
    return Run(rate, latencies, per_sub, check, relay_cpu, stream_bytes, writes)


async def _expect(conn: Connection, what: str, timeout_s: float) -> Any:
    if not await asyncio.to_thread(conn.poll, timeout_s):
        raise TimeoutError(f"the readers did not report {what!r} in {timeout_s:.0f} s")
    kind, value = conn.recv()
    if kind != what:
        raise RuntimeError(f"the readers failed: {value}")
    return value


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--sweep-ops", type=int, default=2000)
    args = parser.parse_args()
    tokens = cached_workload(args.ops)[: args.ops]
    print(f"{len(tokens)} ops in batches of {args.batch}; relay, subscribers and poster "
          f"in three processes on {mp.cpu_count()} cores")  # fmt: skip
    alone, alone_cpu, spent = await ingest_alone(tokens, args.batch)
    print(f"  without subscribers: relay CPU while posting {spent}")
    run = await with_subscribers(tokens, args.batch, args.subscribers)
    rate, lat, per_sub, check, relay_cpu = run[:5]
    ratio = rate / alone
    print(f"ingest alone: {alone:,.0f} ops/s; with {args.subscribers} live SSE subscribers: "
          f"{rate:,.0f} ops/s; ratio {ratio:.2f} (target >= 0.8: "
          f"{'met' if ratio >= 0.8 else 'MISSED'})")  # fmt: skip
    print(f"relay CPU for the ingest alone / with the subscribers: {alone_cpu / relay_cpu:.2f} "
          "(per op: the ingest ratio of a CPU-bound relay with a core to itself)")  # fmt: skip
    print(f"commit-to-receipt latency over {len(lat):,} deliveries: "
          f"p50 {pct(lat, 50) * 1000:.0f} ms, p99 {pct(lat, 99) * 1000:.0f} ms")  # fmt: skip
    print(f"  check: {check}")
    print(f"relay RSS per idle subscriber: {per_sub:.1f} KiB "
          f"(target <= 64: {'met' if per_sub <= 64 else 'MISSED'})")  # fmt: skip
    print_floor(args.subscribers, run, alone_cpu)
    if args.sweep:
        best = await sweep(tokens[: args.sweep_ops], args.batch)
        print(f"sustained with p99 <= 1 s: {best} subscribers (of those tried) on this machine")


def print_floor(n: int, run: Run, alone_cpu: float) -> None:
    """The same bytes written by a bare process (``bench/feed_floor``): the
    part of the feed's cost that is the kernel's, and the best ratio a relay
    on one core could reach."""
    chunk = max(1, int(run.stream_bytes * n / max(run.writes, 1)))
    floor = delivery_floor(n, run.stream_bytes, chunk)
    feed_cpu = run.relay_cpu_s - alone_cpu
    gb = floor.sent_bytes / 1e9
    print(f"delivery floor: a bare process writing the same {gb:.2f} GB to {n} loopback "
          f"sockets ({chunk / 1024:.0f} KiB per write) spends {floor.cpu_s:.2f} CPU-s "
          f"(user {floor.user_s:.2f}, system {floor.system_s:.2f})")  # fmt: skip
    times_floor = feed_cpu / max(floor.cpu_s, 1e-9)
    bound = alone_cpu / (alone_cpu + floor.cpu_s)
    print(f"  the relay's feed cost {feed_cpu:.2f} CPU-s beyond the ingest alone "
          f"({times_floor:.1f}x the floor); with the ingest at {alone_cpu:.2f} CPU-s, "
          f"a relay on one core reaches at most {bound:.2f} of its rate alone")  # fmt: skip


async def sweep(tokens: list[str], batch: int) -> int:
    """Subscriber counts doubling from 50 while p99 <= 1 s, then the
    midpoint between the last that held and the first that did not."""

    async def holds(n: int) -> bool:
        run = await with_subscribers(tokens, batch, n)
        lat, check = run.latencies, run.check
        p99 = pct(lat, 99)
        print(f"  {n} subscribers, {len(tokens)} ops: p50 {pct(lat, 50) * 1000:.0f} ms, "
              f"p99 {p99 * 1000:.0f} ms; {check}")  # fmt: skip
        return p99 <= 1.0

    n, best = 50, 0
    while n <= 6400 and await holds(n):
        best, n = n, n * 2
    if best and n <= 6400 and await holds((best + n) // 2):
        best = (best + n) // 2
    return best


if __name__ == "__main__":
    asyncio.run(main())

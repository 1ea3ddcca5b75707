"""The subscriber process of ``bench/feed.py``: N live SSE readers of
``GET /changes`` on one event loop.

Each reader is a plain HTTP/1.1 client over an asyncio stream that scans
every read for the events' ``id: <epoch>.<seq>`` lines: it counts them and
parses the first and the last (C-speed scans, not a per-line parser), so
one process keeps up with many subscribers and takes little of the CPU the
relay needs: the benchmark measures the relay. It notes (time, first seq, last seq) per read
and checks that seqs arrive once each, in order. The parent is told
``("ready", None)`` once every reader has had its first ``eose``, then sends
``("until", last_seq, timeout_s)``, and gets ``("done", (reads, bytes))``
back: per reader its reads, and the bytes of stream it received.
"""

from __future__ import annotations

import asyncio
import re
import resource
import time
from multiprocessing.connection import Connection

MARK = b"\nid: "
ID = re.compile(rb"\nid: [0-9a-z]+\.([0-9]+)\r")
READ_BYTES = 1 << 18
CONNECT_WAVE = 50  # connections opened at once: within the listen backlog


class Reader:
    def __init__(self, since: int) -> None:
        self.next = since + 1
        self.ready = asyncio.Event()
        self.reads: list[tuple[float, int, int]] = []
        self.bytes = 0  # of the stream after its headers: what the delivery floor re-sends
        self.error: str | None = None

    async def follow(self, port: int, since: int) -> None:
        try:
            await self._follow(port, since)
        except Exception as exc:
            self.error = repr(exc)
            self.ready.set()

    async def _follow(self, port: int, since: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                f"GET /changes?live=true&since={since} HTTP/1.1\r\nHost: relay\r\n"
                "Accept: text/event-stream\r\n\r\n".encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if b" 200 " not in head.split(b"\r\n", 1)[0]:
                raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
            tail = b"\n"  # kept "\n"s anchor the id lines across reads
            while True:
                data = await reader.read(READ_BYTES)
                if not data:
                    raise RuntimeError("the relay closed the stream")
                now = time.monotonic()
                self.bytes += len(data)
                first, last = data.find(b"\n"), data.rfind(b"\n")
                if first < 0:
                    tail += data
                    continue
                head, tail = tail + data[: first + 1], data[last:]
                if not self.ready.is_set():  # the first eose's id is the since seq
                    scan = head + data[first:last]
                    if b"event: eose" in scan:
                        self.ready.set()
                    seqs = [s for s in map(int, ID.findall(scan)) if s >= self.next]
                    self._note(now, seqs, len(seqs))
                else:
                    self._scan(now, head, data, first, last)
        finally:
            writer.close()

    def _scan(self, now: float, head: bytes, data: bytes, start: int, end: int) -> None:
        """The ids of one read without parsing each: count them, read the
        first and the last (C-speed scans; the readers must stay cheap)."""
        seqs = [int(s) for s in ID.findall(head)]  # the line the last read cut: 0 or 1 id
        count = len(seqs) + data.count(MARK, start, end)
        if count > len(seqs):
            lo = ID.search(data, start, end)
            hi = ID.match(data, data.rfind(MARK, start, end))
            assert lo is not None and hi is not None
            seqs += [int(lo.group(1)), int(hi.group(1))]
        self._note(now, seqs, count)

    def _note(self, now: float, seqs: list[int], count: int) -> None:
        """``count`` ids arrived, the first and last of them in ``seqs``."""
        if not seqs:
            return
        lo, hi = seqs[0], seqs[-1]
        if lo != self.next or hi - lo + 1 != count:
            raise RuntimeError(f"expected seq {self.next}, got {lo}..{hi} ({count} ids)")
        self.reads.append((now, lo, hi))
        self.next = hi + 1


async def _readers(port: int, n: int, since: int, conn: Connection) -> None:
    readers = [Reader(since) for _ in range(n)]
    tasks: list[asyncio.Task[None]] = []
    for i in range(0, n, CONNECT_WAVE):
        wave = readers[i : i + CONNECT_WAVE]
        tasks += [asyncio.create_task(r.follow(port, since)) for r in wave]
        await asyncio.wait_for(asyncio.gather(*(r.ready.wait() for r in wave)), 60)
    conn.send(("ready", None))
    _, last, timeout_s = await asyncio.to_thread(conn.recv)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(r.next <= last and not r.error for r in readers):
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r.error for r in readers if r.error]
    if errors:
        conn.send(("error", f"{len(errors)} readers failed, e.g. {errors[0]}"))
        return
    conn.send(("done", ([r.reads for r in readers], [r.bytes for r in readers])))


def run_readers(port: int, n: int, since: int, conn: Connection) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 256)), hard))
    try:
        asyncio.run(_readers(port, n, since, conn))
    except Exception as exc:
        conn.send(("error", repr(exc)))

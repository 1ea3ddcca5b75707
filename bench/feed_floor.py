"""The delivery floor of ``bench/feed.py``: what the same bytes cost to
write to the same number of loopback sockets with no relay at all.

The feed run sends every op to every subscriber: with 200 subscribers and
~1 KB per event, 10,000 ops are ~2 GB of socket writes, and on loopback
the sender's system calls also carry much of the TCP receive path. No
relay can deliver those bytes for less than a bare process writing them,
so this measures that bare process: a sender with plain blocking sockets
(one ``sendall`` per subscriber per chunk, round-robin, as a commit's
fan-out is) and a reader process that drains N sockets with
``recv_into`` and drops the bytes. The sender's CPU time (user and system,
``getrusage``) over the writes is the floor.

With the ingest alone at C CPU-seconds and the floor at F, a relay that
ingests and delivers on one core can reach at most C / (C + F) of its
ingest rate without subscribers: that bound, next to the measured ratio,
says how much of the gap is the relay's and how much is the kernel's.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import selectors
import socket
from multiprocessing.connection import Connection
from typing import NamedTuple

READ_BYTES = 1 << 18


class Floor(NamedTuple):
    user_s: float
    system_s: float
    sent_bytes: int

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


def delivery_floor(n: int, per_subscriber: int, chunk: int) -> Floor:
    """The sender's CPU to write ``per_subscriber`` bytes to each of ``n``
    loopback sockets, ``chunk`` bytes per write."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    sender = ctx.Process(target=_send, args=(n, per_subscriber, chunk, child))
    sender.start()
    port = _expect(parent, "port")
    reader = ctx.Process(target=_drain, args=(port, n))
    reader.start()
    try:
        floor: Floor = _expect(parent, "done")
    finally:
        sender.join(60)
        reader.join(60)
        for process in (sender, reader):
            if process.is_alive():
                process.kill()
    return floor


def _expect(conn: Connection, what: str) -> object:
    if not conn.poll(300):
        raise TimeoutError(f"the floor sender did not report {what!r}")
    kind, value = conn.recv()
    if kind != what:
        raise RuntimeError(f"the floor sender failed: {value}")
    return value


def _send(n: int, per_subscriber: int, chunk: int, conn: Connection) -> None:
    try:
        with socket.create_server(("127.0.0.1", 0), backlog=n + 16) as server:
            conn.send(("port", server.getsockname()[1]))
            peers = [server.accept()[0] for _ in range(n)]
        payload = b"x" * chunk
        rounds, rest = divmod(per_subscriber, chunk)
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(rounds):
            for peer in peers:
                peer.sendall(payload)
        if rest:
            for peer in peers:
                peer.sendall(payload[:rest])
        after = resource.getrusage(resource.RUSAGE_SELF)
        for peer in peers:
            peer.close()
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        conn.send(("done", Floor(user, system, n * per_subscriber)))
    except Exception as exc:
        conn.send(("error", repr(exc)))


def _drain(port: int, n: int) -> None:
    """Connect ``n`` sockets and read each until the sender closes it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 256)), hard))
    selector = selectors.DefaultSelector()
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    buffer = bytearray(READ_BYTES)
    open_sockets = n
    while open_sockets:
        for key, _ in selector.select():
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                got = sock.recv_into(buffer)
            except BlockingIOError:
                continue
            if not got:
                selector.unregister(sock)
                sock.close()
                open_sockets -= 1

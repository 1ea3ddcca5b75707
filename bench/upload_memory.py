"""Memory held by many slow request bodies received at once.

A relay runs as ``hypercorn relay.asgi:app`` (one worker, memory store) on
loopback. ``--uploads`` clients each open a ``PUT /content/{id}/blob/{op}``
of ``--size`` bytes (Content-Length known) and send all of it but its last
byte, then hold; once every upload has sent what it will (or was answered),
the RSS of the relay's process tree is read, the last bytes are sent and the
answers counted. Printed: RSS before the uploads, RSS while they are held,
its growth, and how many uploads were answered what.

The document is one long string (cheap to check, on a worker thread) whose
CID is not the operation's: a received upload is answered 400 after its
check, or 503 if the document-check line was full. ``--target operations``
sends the same bodies as ``POST /operations`` instead (400: no operations).

    .venv/bin/python -m bench.upload_memory --uploads 64 --size 16777216
    .venv/bin/python -m bench.upload_memory --uploads 64 --budget 67108864
    .venv/bin/python -m bench.upload_memory --target operations --size 4194304
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from relay.config import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BODY_BYTES
from relay.protocol import create_auth_token
from relay.testing.server import free_port, wait_for_relay
from relay.testing.workload import WorkloadBuilder

MIB = 1024 * 1024
CHUNK = 256 * 1024


def tree_rss_bytes(root: int) -> int:
    """VmRSS of ``root`` and its descendants (hypercorn spawns its worker)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                children[int(fields[1])].append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


async def upload(
    port: int, request: str, token: str, size: int, held: asyncio.Event, release: asyncio.Event
) -> int:
    """Send all but the last byte, say so, wait for ``release``, finish; the status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"{request} HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
    )
    body = b'"' + b"a" * (size - 2) + b'"'
    answer = asyncio.create_task(reader.readuntil(b"\r\n\r\n"))
    try:
        writer.write(head.encode())
        sent = 0
        while sent < size - 1 and not answer.done():
            writer.write(body[sent : min(sent + CHUNK, size - 1)])
            sent = min(sent + CHUNK, size - 1)
            drained = asyncio.ensure_future(writer.drain())
            await asyncio.wait({drained, answer}, return_when=asyncio.FIRST_COMPLETED)
            if not drained.done():
                drained.cancel()
            elif drained.exception() is not None:  # refused mid-body: the answer tells
                break
        held.set()
        if not answer.done():
            await release.wait()
            writer.write(body[-1:])
        with contextlib.suppress(OSError):
            await writer.drain()
        status_line = await answer
        return int(status_line.split(b" ", 2)[1])
    except (OSError, asyncio.IncompleteReadError):
        held.set()
        return 0  # the connection was closed under us
    finally:
        answer.cancel()
        writer.close()


async def main(args: argparse.Namespace) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFOS_RELAY_")}
    env |= {"DFOS_RELAY_STORE": "memory://", "DFOS_RELAY_LOG_LEVEL": "error"}
    env["DFOS_RELAY_MAX_BLOB_BYTES"] = str(max(args.size, DEFAULT_MAX_BLOB_BYTES))
    env["DFOS_RELAY_MAX_BODY_BYTES"] = str(max(args.size, DEFAULT_MAX_BODY_BYTES))
    if args.budget is not None:
        env["DFOS_RELAY_RECEIVE_BUDGET"] = str(args.budget)
    cmd = [
        str(Path(sys.executable).parent / "hypercorn"), "relay.asgi:app",
        "--bind", f"127.0.0.1:{port}", "--workers", "1",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tempfile.gettempdir(), env=env, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_for_relay(url)
        now_ms = int(time.time() * 1000)
        build = WorkloadBuilder(seed=1, start_ms=now_ms - 60_000)
        alice = build.identity()
        post = build.content_create(alice, {"title": "memory", "createdByDID": alice.did})
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            await http.post("/operations", json={"operations": build.tokens})
            relay_did = (await http.get("/.well-known/dfos-relay")).json()["did"]
        now_s = now_ms // 1000
        kid = f"{alice.did}#{alice.keypair.key_id}"
        token = create_auth_token(alice.keypair, kid, alice.did, relay_did, now_s - 60, now_s + 600)
        request = f"PUT /content/{post.content_id}/blob/{post.genesis_cid}"
        if args.target == "operations":
            request = "POST /operations"
        await asyncio.sleep(1)
        before = tree_rss_bytes(proc.pid)
        release = asyncio.Event()
        helds = [asyncio.Event() for _ in range(args.uploads)]
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(upload(port, request, token, args.size, held, release))
            for held in helds
        ]
        await asyncio.gather(*(held.wait() for held in helds))
        await asyncio.sleep(1)  # the relay catches up with what was sent
        during = tree_rss_bytes(proc.pid)
        release.set()
        statuses = collections.Counter(await asyncio.gather(*tasks))
        elapsed = time.perf_counter() - started
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    budget = "default" if args.budget is None else str(args.budget)
    print(f"{args.target}: {args.uploads} x {args.size} bytes, receive budget {budget}")
    print(f"relay RSS before  {before / MIB:8.1f} MiB")
    print(f"relay RSS held    {during / MIB:8.1f} MiB  (+{(during - before) / MIB:.1f} MiB)")
    print(f"answers {dict(sorted(statuses.items()))} in {elapsed:.1f} s (0: connection closed)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=64)
    parser.add_argument("--size", type=int, default=16 * MIB)
    parser.add_argument("--target", choices=("uploads", "operations"), default="uploads")
    parser.add_argument("--budget", type=int, default=None, help="--receive-budget BYTES")
    asyncio.run(main(parser.parse_args()))

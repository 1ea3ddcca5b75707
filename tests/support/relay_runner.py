"""Run one relay as its own OS process (for multi-process peering tests).

    python -m tests.support.relay_runner --port 8001 --store sqlite:////tmp/a.db \\
        --peer http://127.0.0.1:8002 --peer http://127.0.0.1:8003 \\
        [--no-gossip] [--no-read-through] [--no-sync] [--sync-interval 0.2]

Builds the relay with ``create_relay`` on the store URL and serves it with
hypercorn on 127.0.0.1 until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from hypercorn.asyncio import serve
from hypercorn.config import Config

from peer import PeerConfig
from relay import create_relay
from relay.peering.config import PeeringConfig
from relay.peering.service import build_peering
from stores.factory import open_store_from_url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--store", default="memory://")
    p.add_argument("--peer", action="append", default=[])
    p.add_argument("--no-gossip", action="store_true")
    p.add_argument("--no-read-through", action="store_true")
    p.add_argument("--no-sync", action="store_true")
    p.add_argument("--sync-interval", type=float, default=None)
    return p.parse_args(argv)


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    peers = [
        PeerConfig(
            url,
            gossip=not args.no_gossip,
            read_through=not args.no_read_through,
            sync=not args.no_sync,
        )
        for url in args.peer
    ]
    config = PeeringConfig(
        sync_interval_s=args.sync_interval, backoff_base_s=0.05, backoff_max_s=0.5
    )
    relay = create_relay(
        open_store_from_url(args.store),
        peering=build_peering(peers, None, config) if peers else None,
    )
    hc = Config()
    hc.bind = [f"127.0.0.1:{args.port}"]
    hc.accesslog = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(relay.app, hc, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main())

"""``dfos-relay follow URL`` prints a relay's changes feed as JSON Lines;
``dfos-relay feed reset-epoch`` starts a new epoch of a store's feed."""

from __future__ import annotations

import json
import sys
from typing import Any

from peer.base import normalize_peer_url
from peer.feed import FeedClientError, FeedGapError, FollowOptions, follow


class FollowError(Exception):
    """One line for the operator."""


async def follow_command(
    url: str,
    since: str | None,
    mode: str,
    kinds: list[str],
    chains: list[str],
    authors: list[str],
    live: bool,
    retries: int | None,
) -> int:
    try:
        url = normalize_peer_url(url)
    except ValueError as exc:
        raise FollowError(str(exc)) from None
    options = FollowOptions(
        mode=mode, live=live, kinds=kinds, chains=chains, authors=authors, max_retries=retries
    )
    try:
        async for event in follow(url, since=since, options=options):
            line: dict[str, Any] = {"event": event.kind}
            if event.token:
                line["token"] = event.token
            line["data"] = event.data
            sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
            sys.stdout.flush()
    except FeedGapError as exc:
        raise FollowError(
            f"{exc} (minSeq {exc.min_seq}, epoch {exc.epoch}); bootstrap: {exc.bootstrap}"
        ) from None
    except FeedClientError as exc:
        raise FollowError(str(exc)) from None
    return 0


async def reset_epoch_command(store_url: str, *, store_source: str) -> int:
    from relay.asgi import store_from_url
    from stores.base import StoreError

    store = store_from_url(store_url, store_source)
    try:
        await store.open()
        try:
            epoch = await store.reset_feed_epoch()
        finally:
            await store.close()
    except StoreError as exc:
        raise FollowError(f"store {store_url}: {exc}") from None
    print(f"the changes feed of {store_url} is now epoch {epoch}")
    return 0

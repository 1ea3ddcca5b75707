"""``dfos-relay follow URL`` prints a relay's changes feed as JSON Lines;
``dfos-relay feed reset-epoch`` starts a new epoch of a store's feed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


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
    from peer.base import normalize_peer_url
    from peer.feed import FeedClientError, FeedGapError, FollowOptions, follow

    try:
        url = normalize_peer_url(url)
    except ValueError as exc:
        raise FollowError(str(exc)) from None
    options = FollowOptions(
        mode=mode, live=live, kinds=kinds, chains=chains, authors=authors, max_retries=retries,
        on_retry=_say_why(url),
    )  # fmt: skip
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


def _say_why(url: str) -> Callable[[int, float, Exception], None]:
    """One line on stderr per failed attempt: a relay that is down, or a URL
    that is no relay, would otherwise be retried in silence forever."""

    def say(failures: int, delay: float, exc: Exception) -> None:
        reason = " ".join((str(exc) or type(exc).__name__).split())
        if not reason.startswith(url):
            reason = f"{url}: {reason}"
        print(
            f"dfos-relay follow: {reason} (failure {failures}); retrying in {delay:.1f}s",
            file=sys.stderr,
            flush=True,
        )

    return say


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

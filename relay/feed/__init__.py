"""The relay's changes feed: bootstrap at a stable snapshot, tail from a
relay-local seq, live follow, explicit gaps. Transport-free: ``relay.http``
frames its messages as SSE events or WebSocket arrays."""

from relay.feed.errors import FeedBusy, FeedError, FeedGone, FeedRequestError
from relay.feed.filters import FeedFilter, filter_from_json, filter_from_query
from relay.feed.hub import FeedHub
from relay.feed.messages import Eose, Event, Events, FeedMessage, Heartbeat, Snapshot, Status
from relay.feed.service import Feed, FeedConfig, Subscription
from relay.feed.tokens import ProgressToken

__all__ = [
    "Eose",
    "Event",
    "Events",
    "Feed",
    "FeedBusy",
    "FeedConfig",
    "FeedError",
    "FeedFilter",
    "FeedGone",
    "FeedHub",
    "FeedMessage",
    "FeedRequestError",
    "Heartbeat",
    "ProgressToken",
    "Snapshot",
    "Status",
    "Subscription",
    "filter_from_json",
    "filter_from_query",
]

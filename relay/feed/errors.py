"""Why a subscription cannot start (or stopped): each maps to one status
and one JSON body on every transport."""

from __future__ import annotations

from typing import Any


class FeedError(Exception):
    status = 400

    def body(self) -> dict[str, Any]:
        return {"error": str(self)}


class FeedRequestError(FeedError):
    """A malformed token, filter or parameter; or ``since`` ahead of the head."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": str(self), **self.extra}


class FeedGone(FeedError):
    """The requested position is no longer replayable here (below the replay
    window, or a token from another epoch): bootstrap again."""

    status = 410

    def __init__(self, message: str, min_seq: int, epoch: str, bootstrap: str) -> None:
        super().__init__(message)
        self.min_seq = min_seq
        self.epoch = epoch
        self.bootstrap = bootstrap

    def body(self) -> dict[str, Any]:
        return {
            "error": str(self),
            "minSeq": self.min_seq,
            "epoch": self.epoch,
            "bootstrap": self.bootstrap,
        }


class FeedBusy(FeedError):
    """The subscriber cap is reached; retry after ``retry_after_s``."""

    status = 503

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        # SSE also sends Retry-After; a WebSocket ERR has only its body
        return {"error": str(self), "retryAfter": self.retry_after_s}

"""Errors at the HTTP boundary: every error body is ``{"error": ...}``,
produced through one exception-handler table."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from relay.parse_pool import ParseBusy
from relay.receive_budget import ReceiveBusy

log = logging.getLogger("dfos_relay.http")


class ApiError(Exception):
    """Raised by handlers; becomes a JSON error response."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers

    def __reduce__(self) -> tuple[type[ApiError], tuple[int, str, dict[str, str] | None]]:
        # raised in the parse child process (relay.parse_pool) and re-raised here
        return ApiError, (self.status, self.message, self.headers)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.headers)


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "not found", 405: "method not allowed"}
    # Starlette's own headers (a 405's Allow, which RFC 9110 requires) go out too
    message = messages.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, dict(exc.headers) if exc.headers else None)


async def _busy(request: Request, exc: Exception) -> Response:
    # as the changes feed answers its subscriber cap: 503, Retry-After, and
    # the seconds in the body too
    assert isinstance(exc, ParseBusy | ReceiveBusy)
    headers = {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, ReceiveBusy):
        # its body is left unread, so the server closes the connection after
        # the answer: said, so that the client does not send another on it
        headers["Connection"] = "close"
    return JSONResponse(
        {"error": str(exc), "retryAfter": exc.retry_after_s}, status_code=503, headers=headers
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal error")


EXCEPTION_HANDLERS = {
    ApiError: _api_error,
    HTTPException: _http_exception,
    ParseBusy: _busy,
    ReceiveBusy: _busy,
    Exception: _unexpected,
}

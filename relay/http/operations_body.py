"""The ``{"operations": [...]}`` body of ``POST /operations`` (openapi.yaml:
1 to ``MAX_OPERATIONS_PER_REQUEST`` JWS compact strings).

Pure and light on imports: a large body is parsed in the relay's parse
child process (``relay.parse_pool``), which imports this module.
"""

from __future__ import annotations

import orjson

from relay.config import MAX_OPERATIONS_PER_REQUEST
from relay.protocol.untrusted import json_value

from .errors import ApiError

__all__ = ["parse_operations_body"]


def parse_operations_body(body: bytes) -> list[str]:
    """The ``{"operations": [...]}`` body of POST /operations, or 400."""
    try:
        data = orjson.loads(body)  # fast; json decides whatever orjson refuses
    except orjson.JSONDecodeError:
        try:
            data = json_value(body)
        except ValueError as exc:
            raise ApiError(400, "request body is not valid JSON") from exc
    if not isinstance(data, dict) or "operations" not in data:
        raise ApiError(400, 'request body must be {"operations": [...]}')
    ops = data["operations"]
    if not isinstance(ops, list):
        raise ApiError(400, "operations must be an array")
    if not ops:
        raise ApiError(400, "operations must not be empty")
    if len(ops) > MAX_OPERATIONS_PER_REQUEST:
        raise ApiError(400, f"at most {MAX_OPERATIONS_PER_REQUEST} operations per request")
    if not all(isinstance(op, str) for op in ops):
        raise ApiError(400, "every operation must be a JWS compact string")
    return ops

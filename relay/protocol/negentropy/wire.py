"""Negentropy V1 wire primitives: varints, bounds and a bounded reader.

Bounds carry delta-encoded timestamps whose running base resets at the
start of every message, so one ``BoundWriter``/``BoundReader`` lives for
exactly one message. Every decoding failure is a ``NegentropyError``; the
reader never reads past the end of its buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ..errors import MalformedError

PROTOCOL_VERSION = 0x61  # V1
ID_SIZE = 32
FINGERPRINT_SIZE = 16
INFINITY = 2**64 - 1  # the reserved "infinity" timestamp
_MAX_VARINT_BYTES = 10  # enough for any value below 2**64


class NegentropyError(MalformedError):
    """A message that is not well-formed Negentropy V1."""


class UnsupportedVersion(NegentropyError):
    """The message's protocol version byte is one this side cannot speak."""

    def __init__(self, version: int) -> None:
        super().__init__(f"unsupported negentropy protocol version 0x{version:02x}")
        self.version = version


class Mode(IntEnum):
    SKIP = 0
    FINGERPRINT = 1
    ID_LIST = 2


def encode_varint(value: int) -> bytes:
    """Base-128, most significant digit first, high bit on all but the last."""
    if value < 0:
        raise ValueError("varints are unsigned")
    digits = [value & 0x7F]
    value >>= 7
    while value:
        digits.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(digits))


def decode_varint(data: bytes, pos: int = 0) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it."""
    value = 0
    for count in range(_MAX_VARINT_BYTES):
        if pos >= len(data):
            raise NegentropyError("truncated varint")
        byte = data[pos]
        pos += 1
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            if value >= 2**64:
                raise NegentropyError("varint exceeds 64 bits")
            return value, pos
        if count == 0 and byte == 0x80:
            raise NegentropyError("varint with a leading zero digit")
    raise NegentropyError("varint longer than 10 bytes")


@dataclass(frozen=True, slots=True)
class Bound:
    """An exclusive upper bound: a timestamp and an id prefix (0..32 bytes,
    implicitly zero-padded)."""

    timestamp: int
    prefix: bytes = b""

    @property
    def key(self) -> tuple[int, bytes]:
        """Comparable with items: ``(timestamp, id)`` with the prefix padded."""
        return (self.timestamp, self.prefix.ljust(ID_SIZE, b"\0"))

    @classmethod
    def of_item(cls, timestamp: int, item_id: bytes) -> Bound:
        return cls(timestamp, item_id)


class Reader:
    """Sequential reads over one message; every read checks the length."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise NegentropyError("truncated message")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, size: int, what: str) -> bytes:
        if self.remaining() < size:
            raise NegentropyError(f"truncated {what}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def varint(self) -> int:
        value, self.pos = decode_varint(self.data, self.pos)
        return value


class BoundWriter:
    """Encodes one message's bounds (timestamps as deltas from the last)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0

    def encode(self, bound: Bound) -> bytes:
        if bound.timestamp == INFINITY:
            self._last = INFINITY
            head = encode_varint(0)
        else:
            head = encode_varint(1 + bound.timestamp - self._last)
            self._last = bound.timestamp
        return head + encode_varint(len(bound.prefix)) + bound.prefix


class BoundReader:
    """Decodes one message's bounds; rejects what cannot be a V1 bound."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0

    def decode(self, reader: Reader) -> Bound:
        encoded = reader.varint()
        if encoded == 0 or self._last == INFINITY:
            timestamp = INFINITY
        else:
            timestamp = self._last + encoded - 1
            if timestamp >= INFINITY:
                raise NegentropyError("bound timestamp overflows 64 bits")
        self._last = timestamp
        length = reader.varint()
        if length > ID_SIZE:
            raise NegentropyError(f"bound id prefix of {length} bytes (at most {ID_SIZE})")
        return Bound(timestamp, reader.take(length, "bound id prefix"))

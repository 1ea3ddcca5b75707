"""The two participants of Negentropy V1 over one ``Storage``.

The server (``respond``) is stateless: every reply is computed from the
query and the storage alone. The client (``initiate`` then ``step``)
learns which ids it has that the server lacks (``have``) and which the
server has that it lacks (``need``); the exchange ends when ``step``
returns no next message.

Frame limit: when a message would pass ``frame_size_limit`` (0 = none;
otherwise at least 4096, as V1 requires), processing stops and one last
fingerprint range covers everything from the last bound written to
infinity, so the peer keeps going in the next round. The fingerprint
always covers exactly the items of the range it is sent for.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from .storage import Item, Storage
from .wire import (
    FINGERPRINT_SIZE,
    ID_SIZE,
    INFINITY,
    PROTOCOL_VERSION,
    Bound,
    BoundReader,
    BoundWriter,
    Mode,
    NegentropyError,
    Reader,
    UnsupportedVersion,
    encode_varint,
)

MIN_FRAME_LIMIT = 4096
_FRAME_SLACK = 200  # room kept for the closing range, as V1 implementations do

_T = TypeVar("_T")
Steps = Generator[None, None, _T]  # work that pauses with a bare yield, then returns


@dataclass(frozen=True, slots=True)
class NegentropyOptions:
    """How ranges are split; none of this changes the meaning of a message.

    ``buckets``: fingerprints a mismatched range is split into;
    ``narrow_buckets`` once the range is small (under buckets**2 *
    id_list_below items), where each extra fingerprint costs more bytes
    than the round trip it saves.
    ``id_list_below``: ranges smaller than this are sent as id lists.
    The defaults came from a sweep at 1M items differing by 2,000 (see
    ``bench/reconcile.py``): about 0.8 MB in 4 round trips, where V1's
    reference 16/16/32 sends 2.5 MB in 3.
    ``random_splits``: jitter the split points, so a peer cannot predict
    where ranges will be cut (hostile-peer hardening, draft section 9).
    ``ranges_per_step``: how often ``respond_in_steps`` and
    ``step_in_steps`` pause (256 ranges: a few ms of work).
    """

    frame_size_limit: int = 0
    buckets: int = 8
    narrow_buckets: int = 4
    id_list_below: int = 8
    random_splits: bool = False
    ranges_per_step: int = 256

    def __post_init__(self) -> None:
        if self.frame_size_limit and self.frame_size_limit < MIN_FRAME_LIMIT:
            raise ValueError(f"frame_size_limit is 0 or at least {MIN_FRAME_LIMIT}")
        if self.buckets < 2:
            raise ValueError("buckets must be at least 2")
        if self.id_list_below < 2:  # a 1-item range split in one is itself: no progress
            raise ValueError("id_list_below must be at least 2")
        if self.ranges_per_step < 1:
            raise ValueError("ranges_per_step must be at least 1")


@dataclass(slots=True)
class ClientRound:
    """The client's view after one reply: the next message (None: done)
    and the ids learned in this round. ``have`` holds at most the room the
    step was given; ``have_cut`` says ids past it were left out."""

    message: bytes | None
    have: list[bytes] = field(default_factory=list)
    need: list[bytes] = field(default_factory=list)
    have_room: int | None = None
    have_cut: bool = False


class Negentropy:
    def __init__(
        self,
        storage: Storage,
        options: NegentropyOptions | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.storage = storage
        self.options = options or NegentropyOptions()
        self._rng = rng or random.Random()

    # -- client ------------------------------------------------------------
    def initiate(self) -> bytes:
        """The client's first message: the whole space, split."""
        writer = BoundWriter()
        body = self._split(0, self.storage.size(), Bound(INFINITY), writer)
        return bytes([PROTOCOL_VERSION]) + body

    def step(self, reply: bytes, have_room: int | None = None) -> ClientRound:
        """Process a server reply; raises ``UnsupportedVersion`` on a
        downgrade reply (a lone version byte other than ours). At most
        ``have_room`` ids are kept in ``have`` (None: all): a server that
        claims to lack everything names our whole store."""
        return _run(self.step_in_steps(reply, have_room))

    def step_in_steps(self, reply: bytes, have_room: int | None = None) -> Steps[ClientRound]:
        """``step``, pausing (a bare ``yield``) every ``ranges_per_step``
        ranges. During a pause the storage may change, and ``storage`` may
        be set to a new view of it; positions are found again from the
        bounds, which do not move."""
        result = ClientRound(None, have_room=have_room)
        message = yield from self._process(reply, result)
        result.message = None if len(message) == 1 else message
        return result

    # -- server ------------------------------------------------------------
    def respond(self, query: bytes) -> bytes:
        """The server's reply; a query in a version we cannot speak gets the
        one-byte downgrade reply naming ours."""
        return _run(self.respond_in_steps(query))

    def respond_in_steps(self, query: bytes) -> Steps[bytes]:
        """``respond``, pausing like ``step_in_steps``: a message of many
        ranges (up to ~350,000 in 1 MiB) is seconds of work, which an event
        loop must be able to interleave with everything else."""
        try:
            return (yield from self._process(query, None))
        except UnsupportedVersion:
            return bytes([PROTOCOL_VERSION])

    # -- both --------------------------------------------------------------
    def _process(self, message: bytes, client: ClientRound | None) -> Steps[bytes]:
        reader = Reader(message)
        version = reader.byte() if message else None
        if version is None:
            raise NegentropyError("empty message")
        if not 0x60 <= version <= 0x6F:
            raise NegentropyError(f"invalid protocol version byte 0x{version:02x}")
        if version != PROTOCOL_VERSION:
            raise UnsupportedVersion(version)
        storage = self.storage
        bounds_in, bounds_out = BoundReader(), BoundWriter()
        out = bytearray([PROTOCOL_VERSION])
        prev_index, prev_bound = 0, Bound(0)
        emitted = Bound(0)  # the last bound written to ``out``
        skip = False
        ranges, per_step = 0, self.options.ranges_per_step

        while not reader.at_end():
            ranges += 1
            if ranges % per_step == 0:
                yield
                storage = self.storage
                prev_index = storage.lower_bound(prev_bound.key)
            if prev_bound.timestamp == INFINITY:
                raise NegentropyError("range after the infinity bound")
            bound = bounds_in.decode(reader)
            if bound.key < prev_bound.key:
                raise NegentropyError("bounds out of order")
            mode = reader.varint()
            lower = prev_index
            upper = max(storage.lower_bound(bound.key), lower)
            piece = b""
            if mode == Mode.SKIP:
                skip = True
            elif mode == Mode.FINGERPRINT:
                theirs = reader.take(FINGERPRINT_SIZE, "fingerprint")
                if theirs == storage.fingerprint(lower, upper):
                    skip = True
                else:
                    piece = self._flush_skip(skip, prev_bound, bounds_out)
                    skip = False
                    piece += self._split(lower, upper, bound, bounds_out)
            elif mode == Mode.ID_LIST:
                ids = _read_ids(reader)
                if client is not None:
                    skip = True
                    _compare(storage.items(lower, upper), ids, client)
                else:
                    out += self._flush_skip(skip, prev_bound, bounds_out)
                    skip = False
                    upper, emitted = self._answer_ids(lower, upper, bound, bounds_out, out)
            else:
                raise NegentropyError(f"unknown range mode {mode}")

            if self._over_limit(len(out) + len(piece)):
                # Stop here: one range from the last bound written to infinity.
                rest = storage.fingerprint(storage.lower_bound(emitted.key), storage.size())
                out += bounds_out.encode(Bound(INFINITY))
                out += encode_varint(Mode.FINGERPRINT) + rest
                break
            if piece:
                out += piece
                emitted = bound
            prev_index, prev_bound = upper, bound
        return bytes(out)

    def _answer_ids(
        self, lower: int, upper: int, bound: Bound, writer: BoundWriter, out: bytearray
    ) -> tuple[int, Bound]:
        """Write our ids of [lower, upper) as an id list, cut short at the
        frame limit; returns the index and bound the list really ended at."""
        ids = bytearray()
        end_bound, end = bound, upper
        for index, (timestamp, item_id) in enumerate(self.storage.items(lower, upper), lower):
            if self._over_limit(len(out) + len(ids)):
                end_bound, end = Bound.of_item(timestamp, item_id), index
                break
            ids += item_id
        out += writer.encode(end_bound) + encode_varint(Mode.ID_LIST)
        out += encode_varint(len(ids) // ID_SIZE) + ids
        return end, end_bound

    def _flush_skip(self, skip: bool, prev_bound: Bound, writer: BoundWriter) -> bytes:
        """A pending skip is written out (up to ``prev_bound``) before a range
        that needs an answer, so the ranges stay adjacent."""
        if not skip:
            return b""
        return writer.encode(prev_bound) + encode_varint(Mode.SKIP)

    def _split(self, lower: int, upper: int, upper_bound: Bound, writer: BoundWriter) -> bytes:
        storage, opts = self.storage, self.options
        count = upper - lower
        if count < opts.id_list_below:
            ids = b"".join(item_id for _, item_id in storage.items(lower, upper))
            return (
                writer.encode(upper_bound)
                + encode_varint(Mode.ID_LIST)
                + encode_varint(count)
                + ids
            )
        out = bytearray()
        cuts = self._cuts(lower, upper)
        start = lower
        for cut in cuts:
            fingerprint = storage.fingerprint(start, cut)
            if cut == upper:
                next_bound = upper_bound
            else:
                next_bound = _minimal_bound(storage.item(cut - 1), storage.item(cut))
            out += writer.encode(next_bound) + encode_varint(Mode.FINGERPRINT) + fingerprint
            start = cut
        return bytes(out)

    def _cuts(self, lower: int, upper: int) -> list[int]:
        """The end index of each bucket (the last is ``upper``)."""
        count = upper - lower
        opts = self.options
        wide = count >= opts.buckets * opts.buckets * opts.id_list_below
        buckets = min(opts.buckets if wide else opts.narrow_buckets, count)
        per, extra = divmod(count, buckets)
        cuts, at = [], lower
        for i in range(buckets):
            at += per + (1 if i < extra else 0)
            cuts.append(at)
        if self.options.random_splits and per >= 4:
            jitter = per // 4
            for i in range(buckets - 1):
                floor = (cuts[i - 1] if i else lower) + 1
                cuts[i] = max(floor, cuts[i] + self._rng.randint(-jitter, jitter))
        return cuts

    def _over_limit(self, size: int) -> bool:
        limit = self.options.frame_size_limit
        return bool(limit) and size > limit - _FRAME_SLACK


def _run(steps: Steps[_T]) -> _T:
    """Drive ``steps`` to its end without pausing."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        result: _T = done.value
        return result


def _minimal_bound(prev: tuple[int, bytes], curr: tuple[int, bytes]) -> Bound:
    """The shortest bound that separates ``prev`` from ``curr``."""
    if curr[0] != prev[0]:
        return Bound(curr[0])
    shared = 0
    for a, b in zip(prev[1], curr[1], strict=True):
        if a != b:
            break
        shared += 1
    return Bound(curr[0], curr[1][: shared + 1])


def _read_ids(reader: Reader) -> list[bytes]:
    count = reader.varint()
    if count * ID_SIZE > reader.remaining():
        raise NegentropyError(f"id list of {count} ids is longer than the message")
    return [reader.take(ID_SIZE, "id") for _ in range(count)]


def _compare(ours: Iterator[Item], theirs: list[bytes], client: ClientRound) -> None:
    """Ours but not theirs is ``have`` (up to its room); theirs but not ours
    is ``need``."""
    remaining = dict.fromkeys(theirs)  # ordered, de-duplicated
    room = client.have_room
    for _, item_id in ours:
        if item_id in remaining:
            del remaining[item_id]
        elif room is None or len(client.have) < room:
            client.have.append(item_id)
        else:
            client.have_cut = True
            if not remaining:  # the rest of ours can only be more of the same
                break
    client.need.extend(remaining)

"""Write policies the tests name as ``tests.admin.policies:<function>``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
import time

from relay.ingest.policy import VerifiedOp

CALLS: list[tuple[str, str, str]] = []  # (cid, kind, signer) seen by ``recording``
SLOW: set[str] = set()  # signers ``slow_for_some`` sleeps on
RELEASE = threading.Event()  # what ``hang_for_some`` waits for (set by the test's end)
PACE_S = 0.2  # how long ``paced`` takes per call


def refuse_beacons(op: VerifiedOp, signer: str) -> str | None:
    return "no beacons here" if op.kind == "beacon" else None


def refuse_all(op: VerifiedOp, signer: str) -> bool:
    return False


def explode(op: VerifiedOp, signer: str) -> None:
    raise RuntimeError("boom")


def exits(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":
        sys.exit(1)


def interrupts(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":
        raise KeyboardInterrupt


def cancelled(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":  # what .result() of a cancelled future raises
        raise concurrent.futures.CancelledError


async def exits_async(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":
        sys.exit(1)


def hang_for_some(op: VerifiedOp, signer: str) -> None:
    if signer in SLOW:
        RELEASE.wait(30)


def paced(op: VerifiedOp, signer: str) -> None:
    time.sleep(PACE_S)


STUBBORN = {"started": 0, "stop": False}  # ``ignores_cancellation``'s calls, and its end


async def ignores_cancellation(op: VerifiedOp, signer: str) -> None:
    STUBBORN["started"] += 1
    while not STUBBORN["stop"]:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)


def ill_typed(op: VerifiedOp, signer: str) -> int:
    return 42


def slow_for_some(op: VerifiedOp, signer: str) -> None:
    if signer in SLOW:
        time.sleep(5)


async def refuse_artifacts(op: VerifiedOp, signer: str) -> str | None:
    await asyncio.sleep(0)
    return "no artifacts" if op.kind == "artifact" else None


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no words")


class SullenStr(str):
    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


def raises_unprintable(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":
        raise Unprintable


def sullen_reason(op: VerifiedOp, signer: str) -> str | None:
    return SullenStr("no beacons") if op.kind == "beacon" else None


def untextual_reason(op: VerifiedOp, signer: str) -> str | None:
    return "no \ud800 beacons \x00 here" if op.kind == "beacon" else None


def untextual_error(op: VerifiedOp, signer: str) -> None:
    if op.kind == "beacon":
        raise ValueError("no \ud800 beacons \x00 here")


def endless_reason(op: VerifiedOp, signer: str) -> str | None:
    return "no beacons " * 200_000 if op.kind == "beacon" else None


def meddles(op: VerifiedOp, signer: str) -> None:
    """Changes what it is shown (nested values are plain lists and dicts)."""
    for value in op.payload.values():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value.append(dict(value[0], id="planted"))
        elif isinstance(value, list | dict):
            value.clear()


def recording(op: VerifiedOp, signer: str) -> None:
    assert signer == op.signer and op.payload.get("did", signer)
    CALLS.append((op.cid, op.kind, signer))


not_callable = 3

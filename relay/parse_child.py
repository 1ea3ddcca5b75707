"""The parse child of ``relay.parse_pool``: ``python -m relay.parse_child``.

Reads frames of ``(function, body)`` from stdin, answers each with a frame
of ``("returned", value)`` or ``("raised", exception)`` on stdout, and ends
at the end of its input (the relay stopped it, or the relay is gone).
Ctrl-C reaches the whole process group; the relay stops its child itself,
so the child ignores it rather than print a traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import cast

from relay.parse_pool import read_frame, write_frame


def _read_exactly(size: int) -> bytes:
    data = sys.stdin.buffer.read(size)
    if len(data) < size:
        raise EOFError
    return data


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout.buffer
    while True:
        try:
            frame = read_frame(_read_exactly)
        except EOFError:
            return
        function, body = cast("tuple[Callable[[bytes], object], bytes]", frame)
        try:
            answer: tuple[str, object] = ("returned", function(body))
        except Exception as exc:
            answer = ("raised", exc)
        write_frame(out, answer)
        out.flush()


if __name__ == "__main__":
    main()

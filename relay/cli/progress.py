"""A one-line progress indicator for ``dfos-relay`` commands, drawn on
stderr only when stderr is a terminal (logs and pipes stay clean)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

REDRAW_INTERVAL_S = 0.1


class Progress:
    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.count = 0
        self._stream = stream or sys.stderr
        self.enabled = self._stream.isatty()
        self._started = time.monotonic()
        self._drawn = 0.0

    def add(self, n: int) -> None:
        self.count += n
        now = time.monotonic()
        if self.enabled and now - self._drawn >= REDRAW_INTERVAL_S:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.count / max(now - self._started, 1e-9)
        if self.total:
            done = min(self.count / self.total, 1.0)
            bar = "#" * int(done * 30)
            text = f"{self.label} [{bar:<30}] {self.count}/{self.total} {rate:,.0f}/s"
        else:
            text = f"{self.label} {self.count:,} {rate:,.0f}/s"
        self._stream.write("\r" + text)
        self._stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()

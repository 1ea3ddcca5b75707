"""Standard output for ``dfos-relay`` commands: a write that fails (a full
disk behind ``> file``, ``/dev/full``, a descriptor closed with ``>&-``)
becomes ``OutputError``, which the command reports in one line. A reader
that went away (``| head -1``) stays a ``BrokenPipeError``: that is a quiet
end, not a failure."""

from __future__ import annotations

from typing import Any, TextIO, cast


class OutputError(Exception):
    """Standard output cannot be written; ``str()`` says why."""


class _GuardedOutput:
    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def _call(self, name: str, *args: Any) -> Any:
        if self._stream is None:  # Python sets sys.stdout to None when fd 1 is closed
            raise OutputError("it is closed")
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as exc:  # ValueError: write to a closed file
            raise OutputError(getattr(exc, "strerror", None) or str(exc)) from None

    def write(self, text: str) -> int:
        return int(self._call("write", text))

    def writelines(self, lines: Any) -> None:
        self._call("writelines", lines)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno, ...
        return getattr(self._stream, name)


def guarded(stream: TextIO | None) -> TextIO:
    """``stream`` (``sys.stdout``, possibly None) whose write failures are
    ``OutputError``."""
    return cast(TextIO, _GuardedOutput(stream))

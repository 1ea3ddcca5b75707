"""Reading text that comes from outside (requests, peers, settings) without
the surprises of Python's permissive parsers.

- ``ascii_decimal``: ``str.isdigit`` is true for "²" (which ``int`` refuses)
  and for "٣" (which ``int`` reads as 3); a number on our wire or command
  line is ASCII digits only. And ``int`` raises ``ValueError`` for a
  numeral of more than 4300 digits (``sys.get_int_max_str_digits``), so a
  numeral that long (leading zeros aside) is not a number we read either.
- ``is_text``: JSON's ``"\\ud800"`` escape decodes to a lone surrogate, a
  ``str`` that no UTF-8 encoder takes (so no store, answer or CID either).
- ``json_value``: ``json.loads`` raises ``RecursionError``, not ``ValueError``,
  for arrays nested deeper than its recursion limit; here anything that is
  not JSON is a ``ValueError`` (``UnicodeDecodeError`` is one already).
- ``nests_too_deep``: how deep JSON may nest is ours to say (``MAX_JSON_DEPTH``),
  decided on the raw text before any parser or encoder recurses; otherwise
  it is how much stack the caller left, and the verdict changes by call path.
"""

from __future__ import annotations

import json
import re

# Far beyond any number of ours, and below the lowest digit limit Python lets
# a process set for ``int`` (640): nothing under it can raise.
MAX_NUMERAL_DIGITS = 600
# Arrays and objects nest at most this deep in what we parse and hash (JWS
# headers and payloads, content-plane documents). Without a limit of its own,
# how deep a value could nest was how much recursion was left to the parser
# and the dag-cbor encoder: the same token was malformed sent alone and
# accepted in a batch checked on worker threads (shallower stacks), and a
# relay's verdict was its call path's. Well below Python's recursion limit
# (1000), with room for the deepest caller.
MAX_JSON_DEPTH = 512
# a string, or an unterminated one running to the end: every match attempt
# succeeds, so the scan stays linear whatever the text
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def ascii_decimal(text: str) -> int | None:
    """The value of ``text`` when it is a numeral of ASCII digits (at most
    ``MAX_NUMERAL_DIGITS`` of them after leading zeros), else None."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0") or "0"
    if len(significant) > MAX_NUMERAL_DIGITS:
        return None
    return int(significant)


def is_text(text: str) -> bool:
    """``text`` is Unicode text: it holds no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_value(data: str | bytes) -> object:
    """``data`` parsed as JSON; ``ValueError`` for anything that is not."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def nests_too_deep(raw: bytes) -> bool:
    """``raw`` opens more than ``MAX_JSON_DEPTH`` arrays or objects at once
    (brackets inside strings aside); decided before any parser recurses, in
    time linear in ``raw``. Not checked: that ``raw`` is JSON at all."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the usual case: too few brackets to nest that deep
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b"", raw)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False

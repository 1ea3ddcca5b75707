"""Epochs of a log's seq domain (the changes feed's progress tokens compare
only within one epoch): random, short, and free of the token separator."""

from __future__ import annotations

import secrets


def new_epoch() -> str:
    return secrets.token_hex(8)

"""README: every subcommand "takes its options in any order". That holds
for the nested ``feed reset-epoch`` too: ``--store`` before or after
``reset-epoch`` names the same store."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_command_lines import run


@pytest.mark.parametrize(
    "order",
    [["feed", "reset-epoch", "--store", "{url}"],
     ["feed", "--store", "{url}", "reset-epoch"],
     ["feed", "--store=sqlite:///elsewhere.db", "reset-epoch", "--store", "{url}"]],
    ids=["after", "before", "after-wins"],
)  # fmt: skip
def test_feed_reset_epoch_takes_store_before_or_after(order: list[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'feed.db'}"
    done = run(*[a.format(url=url) for a in order], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"the changes feed of {url} is now epoch ")
    assert (tmp_path / "feed.db").is_file() and not (tmp_path / "elsewhere.db").exists()
    assert not (tmp_path / "dfos-relay.db").exists()  # not the default store

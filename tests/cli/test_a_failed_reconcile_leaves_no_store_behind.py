"""``dfos-relay reconcile`` against a peer that is down or is not a relay
fails in one line without creating a store: the default database
(``./dfos-relay.db``) or the SQLite file ``--store`` names is not left
behind, empty, where the command ran. The peer is reached before the
store is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.testing.server import free_port

from .test_a_failed_reconcile_prints_no_summary import not_a_relay  # noqa: F401 (a fixture)
from .test_command_lines import assert_one_line_failure, run


@pytest.mark.parametrize("store", ["default", "--store"])
@pytest.mark.parametrize("kind", ["unreachable", "not-a-relay"])
def test_a_failed_reconcile_leaves_no_store_behind(
    kind: str,
    store: str,
    not_a_relay: str,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    peer = f"http://127.0.0.1:{free_port()}" if kind == "unreachable" else not_a_relay
    work = tmp_path / "work"
    work.mkdir()
    args = ["--store", f"sqlite:///{work / 'named.db'}"] if store == "--store" else []
    done = run("reconcile", peer, *args, cwd=work, timeout=60)
    line = assert_one_line_failure(done, "reconcile")
    assert done.returncode == 1 and line.count(peer) == 1, line
    assert sorted(p.name for p in work.iterdir()) == []

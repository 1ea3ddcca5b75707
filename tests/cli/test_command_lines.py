"""Every documented command line works as written: options in any order,
``--help`` on every subcommand with metavars that say what they take, and
failures as one line with a non-zero status, never a traceback."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from relay import create_relay
from relay.dumplog import dump_log
from relay.testing.workload import WorkloadBuilder, mixed_workload
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client

from .conftest import DFOS_RELAY, clean_env

SUBCOMMANDS = ["serve", "dump-log", "import", "converge", "follow", "feed", "verify-store"]


def run(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, *args], env=clean_env(), cwd=cwd, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def assert_one_line_failure(done: subprocess.CompletedProcess[str], command: str) -> str:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"dfos-relay {command}: error: "), line
    assert "stores.base" not in line and "Error:" not in line.split("error: ", 1)[1]
    return line


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_with_meaningful_metavars(command: str) -> None:
    done = run(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: dfos-relay {command}")
    assert "VALUE" not in done.stdout


def test_serve_help_names_what_each_flag_takes() -> None:
    usage = run("serve", "--help").stdout
    for shown in (
        "--peer URL[#behaviours]", "--store URL", "--port PORT", "--workers N",
        "--admin-did DID", "--write-policy MODULE:FUNCTION", "--deny-kind KIND",
    ):  # fmt: skip
        assert shown in usage


async def _dump_of(tokens: list[str], path: Path) -> None:
    relay = create_relay(MemoryStore())
    async with relay.running():
        await relay.ingest(tokens)
        async with asgi_client(relay.app, base_url="http://r") as client:
            await dump_log(client, "http://r", path, resume=False)


@pytest.mark.spark
async def test_converge_takes_options_in_any_order(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    tokens = mixed_workload(40, seed=31)
    await _dump_of(tokens, tmp_path / "a.jsonl")
    # the same relay dumped twice: it agrees with itself
    (tmp_path / "b.jsonl").write_bytes((tmp_path / "a.jsonl").read_bytes())
    # exactly as README shows it, options first
    readme = run(
        "converge", "--master", "local[2]", "--verify", "--out", "report.json",
        "a.jsonl", "b=b.jsonl", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert readme.returncode == 0, readme.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["converged"] is True
    # options between and after the dumps
    mixed = run(
        "converge", "a.jsonl", "--master", "local[2]", "b=b.jsonl", "--quiet",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr[-2000:]


def test_converge_without_pyspark_is_one_line(tmp_path: Path) -> None:
    program = (
        "import sys; sys.modules['pyspark'] = None\n"
        "from relay.cli import main\n"
        "sys.exit(main(['converge', 'a.jsonl']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], env=clean_env(), capture_output=True, text=True,
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    line = assert_one_line_failure(done, "converge")
    assert "pyspark is not installed" in line


def test_unknown_option_is_one_line_usage_error() -> None:
    done = run("import", "x.jsonl", "--nope")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--nope" in done.stderr


def test_import_of_a_file_that_is_not_gzip(tmp_path: Path) -> None:
    fake = tmp_path / "dump.jsonl.gz"
    fake.write_text('{"cid": "x", "jwsToken": "y"}\n')
    line = assert_one_line_failure(run("import", str(fake), "--store", "memory://"), "import")
    assert str(fake) in line and "gzip" in line.lower()


def test_import_of_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "dump.jsonl"
    bad.write_bytes(b'{"cid": "x", "jwsToken": "\xff\xfe"}\n')
    line = assert_one_line_failure(run("import", "--store", "memory://", str(bad)), "import")
    assert f"{bad}:1: not UTF-8" in line


def test_import_into_an_unreachable_postgres(tmp_path: Path) -> None:
    dump = tmp_path / "d.jsonl"
    dump.write_text("")
    done = run("import", str(dump), "--store", "postgresql://postgres@127.0.0.1:1/test")
    line = assert_one_line_failure(done, "import")
    assert "cannot reach Postgres at 127.0.0.1:1" in line


def _dump_lines(tokens: list[str]) -> str:
    return "".join(json.dumps({"jwsToken": t}) + "\n" for t in tokens)


def test_import_separates_rejected_from_still_waiting(tmp_path: Path) -> None:
    b = WorkloadBuilder(seed=33)
    alice, _ = b.identity(), b.identity()
    b.content_create(alice)
    genesis_alice, genesis_bob, content = b.tokens
    forged = genesis_bob[:-4] + ("AAAA" if not genesis_bob.endswith("AAAA") else "BBBB")
    # a waiting op only: exit 0, reported as waiting
    waiting = tmp_path / "waiting.jsonl"
    waiting.write_text(_dump_lines([content]))
    done = run("import", str(waiting), "--store", "memory://")
    assert done.returncode == 0, done.stderr
    assert "rejected 0" in done.stdout and "still waiting for dependencies 1" in done.stdout
    # a forged op: rejected for good, exit 1
    rejected = tmp_path / "rejected.jsonl.gz"
    with gzip.open(rejected, "wt", encoding="utf-8") as fh:
        fh.write(_dump_lines([genesis_alice, forged]))
    done = run("import", str(rejected), "--store", "memory://")
    assert done.returncode == 1
    assert "sequenced 1" in done.stdout and "rejected 1" in done.stdout
    assert "still waiting for dependencies 0" in done.stdout
    assert "Traceback" not in done.stderr


def test_dump_log_into_a_missing_directory_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "dir" / "x.jsonl"
    line = assert_one_line_failure(
        run("dump-log", "http://127.0.0.1:9", "-o", str(target)), "dump-log"
    )
    assert str(target.parent) in line and not target.exists()


def test_a_failed_dump_leaves_no_empty_file(tmp_path: Path) -> None:
    target = tmp_path / "x.jsonl"
    assert_one_line_failure(run("dump-log", "-o", str(target), "http://127.0.0.1:9"), "dump-log")
    assert not target.exists()

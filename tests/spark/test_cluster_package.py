"""The cluster path of README: ``python -m spark.package`` builds the zip the
executors need, and ``spark-submit --py-files`` runs the job from that zip
alone, on ``local[2]``, with a Python that cannot see this checkout or its
editable install (only the third-party libraries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from relay.testing.workload import mixed_workload
from tests.cli.test_command_lines import _dump_of

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def isolated_python(tmp_path: Path) -> Path:
    """A venv whose only extra path is our site-packages directory: its
    ``.pth`` files (the editable install) are not processed from there."""
    venv = tmp_path / "isolated"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.spark
async def test_spark_submit_runs_the_job_from_the_built_zip(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "spark.package", "-o", str(tmp_path / "dist")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    archive = tmp_path / "dist" / "dfos-relay-spark.zip"
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"spark/convergence.py", "relay/protocol/jws.py", "relay/rules/__init__.py"} <= names

    python = isolated_python(tmp_path)
    # not the PYTHONPATH the session's Spark fixture sets, if a test used it before
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    probe = subprocess.run(
        [str(python), "-c", "import relay"], capture_output=True, cwd=tmp_path, env=env
    )
    assert probe.returncode != 0  # the checkout is invisible: only the zip can serve it

    await _dump_of(mixed_workload(30, seed=41), tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_bytes((tmp_path / "a.jsonl").read_bytes())
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    done = subprocess.run(
        [
            str(BIN / "spark-submit"), "--master", "local[2]",
            "--py-files", "dist/dfos-relay-spark.zip", "dist/convergence.py",
            "--verify", "--out", "report.json", "a.jsonl", "b=b.jsonl",
        ],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["converged"] is True and report.get("verified", True) is True

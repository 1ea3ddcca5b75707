"""One local Spark session (local[2]) shared by the whole test run."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

# py4j logs at INFO from __del__ at interpreter exit, after pytest closed the
# streams; keep it quiet so the run ends on pytest's own summary line.
logging.getLogger("py4j").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from spark.convergence import configure

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    session = (
        SparkSession.builder.master("local[2]")
        .appName("dfos-convergence-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    configure(session, 4)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()

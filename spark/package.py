"""Build what a Spark cluster's executors need: ``python -m spark.package``.

Writes ``dist/dfos-relay-spark.zip`` (the project's pure-Python packages,
for ``spark-submit --py-files``) and ``dist/convergence.py`` (the job's entry
script). The executors' Python also needs the run-time libraries of the
protocol core (pynacl, cbor2, multiformats): install ``dfos-relay`` on the
nodes, or ship a packed environment with ``--archives``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("relay", "stores", "peer", "spark")
ZIP_NAME = "dfos-relay-spark.zip"
ENTRY = "convergence.py"


def build(out_dir: Path) -> Path:
    """Write the zip and the entry script into ``out_dir``; return the zip."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / ZIP_NAME
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                if "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(ROOT).as_posix())
    shutil.copyfile(ROOT / "spark" / ENTRY, out_dir / ENTRY)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark.package", description=__doc__)
    parser.add_argument(
        "-o", "--out-dir", default="dist", metavar="DIR", help="where to write (default dist)"
    )
    args = parser.parse_args(argv)
    try:
        target = build(Path(args.out_dir))
    except OSError as exc:
        print(f"spark.package: error: {exc.strerror or exc}: {args.out_dir}", file=sys.stderr)
        return 1
    print(f"wrote {target} and {Path(args.out_dir) / ENTRY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

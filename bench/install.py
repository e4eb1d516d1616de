"""Time a fresh install of one lock by uv (what bin/setup runs) beside pip (what it ran before), same lock, same run.

    .venv/bin/python bench/install.py                       # requirements/dev-embeddings.txt, bin/test's profile
    .venv/bin/python bench/install.py --lock requirements/runtime.txt

Each installer gets a new virtualenv in a temporary folder and installs the lock with --require-hashes, its
cache as the machine has it (warm after any earlier bin/setup: the case of CI and of a second checkout), then
once more with a cache of its own, empty (a new machine; packages come from the index over the network).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV = ROOT / ".venv" / "bin" / "uv"


def _venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", default="requirements/dev-embeddings.txt")
    parser.add_argument("--skip-cold", action="store_true", help="only the warm-cache runs")
    args = parser.parse_args()
    lock = str(ROOT / args.lock)
    links = ["--find-links", os.environ.get("TORCH_WHEELS", "/opt/wheels")]
    rows = []
    for cache in ["machine's"] + ([] if args.skip_cold else ["empty"]):
        for installer in ("pip", "uv"):
            with tempfile.TemporaryDirectory() as scratch:
                python = _venv(Path(scratch) / "venv")
                env = dict(os.environ)
                if cache == "empty":
                    env["PIP_CACHE_DIR" if installer == "pip" else "UV_CACHE_DIR"] = str(Path(scratch) / "cache")
                if installer == "pip":
                    command = [str(python), "-m", "pip", "install", "-q", "--require-hashes", *links, "-r", lock]
                else:
                    command = [str(UV), "pip", "install", "-q", "--python", str(python), "--require-hashes"]
                    command += [*links, "-r", lock]
                seconds = _time(command, env)
                rows.append((cache, installer, seconds))
                print(f"  {installer:>3} with the {cache} cache: {seconds:.1f} s", flush=True)
    print(f"\nFresh install of {args.lock}\n")
    print("| cache | pip (reference) s | uv (bin/setup) s | pip / uv |")
    print("| --- | ---: | ---: | ---: |")
    for cache in dict.fromkeys(row[0] for row in rows):
        pip = next(s for c, i, s in rows if c == cache and i == "pip")
        uv = next(s for c, i, s in rows if c == cache and i == "uv")
        print(f"| {cache} | {pip:.1f} | {uv:.1f} | {pip / uv:.1f}x |")


if __name__ == "__main__":
    main()

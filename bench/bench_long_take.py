"""A long mocap take: ``retarget`` against ``bake-pack`` of the same file, measured side by side in one run.

Run on demand: ``python -m bench.bench_long_take [--frames 20000] [--runs 3]`` (files
from ``tests/data``). The take is the CMU walk ``12_03`` (120 fps) played back and forth without a
seam for ``--frames`` frames (200,000 is a 28-minute take); the target is the Quaternius
character (FBX). Each command runs in its own process, as a user runs it; wall time and peak
resident memory (the largest process of the run, workers included) are the medians of ``--runs`` runs, alternating the
two commands so both see the same load (the machine may be shared).

Goal: ``retarget`` at most 1.5 GB and within 2x the ``bake-pack`` time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.long_clips import CMU_WALK, QUATERNIUS, write_ping_pong_bvh

REPO_PARENT = Path(__file__).resolve().parents[2]


def _run(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident memory (GB) of ``python -m marionette ARGS`` in a child
    process: the largest resident set of the process and of any worker it started (what
    ``/usr/bin/time -v`` reports)."""
    t0 = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "marionette", *args], cwd=REPO_PARENT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"marionette {' '.join(args)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_maxrss * 1024 / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000, help="frames of the take (200000: a 28-minute take)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (medians are printed)")
    args = parser.parse_args()
    if not QUATERNIUS.exists() or not CMU_WALK.exists():
        raise SystemExit(f"needs {QUATERNIUS} and {CMU_WALK} (tests/data)")
    with tempfile.TemporaryDirectory() as tmp:
        pack = Path(tmp) / "pack"
        pack.mkdir()
        take = write_ping_pong_bvh(CMU_WALK, args.frames, pack / "take.bvh")
        size = os.path.getsize(take) / 1e6
        retarget, bake = [], []
        for k in range(args.runs):
            retarget.append(_run(["retarget", str(take), str(QUATERNIUS), "-o", str(Path(tmp) / f"r{k}.blend")]))
            bake.append(_run(["bake-pack", str(pack), str(QUATERNIUS), "-o", str(Path(tmp) / f"p{k}.blend")]))
    r_time, r_mem = (statistics.median(x) for x in zip(*retarget, strict=True))
    b_time, b_mem = (statistics.median(x) for x in zip(*bake, strict=True))
    print(f"take: {args.frames} frames at 120 fps ({args.frames / 120 / 60:.1f} min, {size:.0f} MB) onto {QUATERNIUS.name}, scene at 24 fps")
    print(f"medians of {args.runs} runs each, alternated (machine shared: retarget {min(t for t, _ in retarget):.1f}-{max(t for t, _ in retarget):.1f} s)")
    print(f"  retarget:   {r_time:7.1f} s   peak {r_mem:5.2f} GB")
    print(f"  bake-pack:  {b_time:7.1f} s   peak {b_mem:5.2f} GB")
    print(f"  retarget / bake-pack: time {r_time / b_time:4.2f} x (goal <= 2), memory {r_mem / b_mem:4.2f} x (goal: <= 1.5 GB)")


if __name__ == "__main__":
    main()

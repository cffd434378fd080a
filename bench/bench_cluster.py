"""bake-pack on a Dask cluster against the local worker pool, in the same run.

The pack is ``--clips`` copies of two CMU clips of ``tests/data`` (566 and 299 frames at 120 fps)
onto the 56-bone male base mesh, as in :mod:`bench.bench_batch_bake`. Each configuration runs
``python -m marionette bake-pack`` in its own process, ``--rounds`` times in turn (the machine's
other load changes over time), and the best round counts:

* ``--jobs 2`` (the local worker pool) and ``--cluster local:2`` (a Dask ``LocalCluster`` of two
  single-thread worker processes, started by the command): wall time from the command's start to
  its end, clips per second, and the ratio (goal: the cluster within 15 % of ``--jobs 2``).
* The per-clip overhead the cluster adds: for each run, the time two workers had
  (2 x the run's wall time after the start) less the time they spent on files (the report's
  per-file seconds), per clip; the cluster's less the local pool's is what scheduling, sending the
  results and the slower start cost per clip. The cluster's fixed start (a scheduler and two
  worker processes) is printed apart.
* Files read ahead: BVH files a worker read while the main process loaded Blender and the target
  (their reading is not in the per-file time).
* The figures the README's projection for many machines uses: worker seconds per clip, and the
  main process's seconds per clip (it writes every Action, on one machine, whatever the number of
  workers).

Run: ``python -m bench.bench_cluster [--clips 200] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_files import DATA

CLIPS = ("bvh/cmu/12_03_motionbuilder.bvh", "bvh/cmu/02_02_daz.bvh")
TARGET = "gltf/male_base_mesh_apose.glb"
MAIN_STAGES = ("write", "save", "finish", "start", "part")  # the main process's own work


def _run(pack: Path, out: Path, how: list[str]) -> dict:
    report = out.with_suffix(".json")
    for stale in out.parent.glob(out.stem + "*"):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "marionette", "bake-pack", str(pack), str(DATA / TARGET), "-o", str(out), "--report", str(report), *how],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bake-pack {' '.join(how)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    r = json.loads(report.read_text())
    clips = sum(len(f["clips"]) for f in r["files"])
    worked = sum(float(f.get("seconds", 0.0)) for f in r["files"])
    run_wall = float(r["timings"]["wall"])  # from the open of the target to the end
    main = sum(float(r["timings"].get(k, 0.0)) for k in MAIN_STAGES)
    return {
        "wall": wall,
        "clips": clips,
        "rate": clips / wall,
        "run_wall": run_wall,
        "start": wall - run_wall,
        "idle_per_clip": (2 * run_wall - worked) / clips,
        "worker_per_clip": worked / clips,
        "main_per_clip": main / clips,
        "read_ahead": int(r.get("counters", {}).get("files_read_ahead", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as tmp:
        root = Path(tmp)
        pack = root / "pack"
        pack.mkdir()
        for k in range(args.clips):
            src = DATA / CLIPS[k % 2]
            shutil.copy(src, pack / f"{k:05d}_{src.name}")
        configs = {"--jobs 2": ["--jobs", "2"], "--cluster local:2": ["--cluster", "local:2"]}
        best: dict[str, dict] = {}
        for rnd in range(args.rounds):
            for name, how in configs.items():
                m = _run(pack, root / f"out_{rnd}.blend", how)
                print(f"round {rnd + 1} {name:18s} {m['wall']:6.2f} s  {m['rate']:6.1f} clips/s  {m['read_ahead']:4d} files read ahead")
                if name not in best or m["wall"] < best[name]["wall"]:
                    best[name] = m
        local, cluster = best["--jobs 2"], best["--cluster local:2"]
        ratio = cluster["rate"] / local["rate"]
        print(f"\n{args.clips} clips, best of {args.rounds} rounds")
        print(f"{'':18s} {'wall s':>7s} {'clips/s':>8s} {'start s':>8s} {'idle ms/clip':>13s} {'worker ms/clip':>15s} {'main ms/clip':>13s} {'read ahead':>11s}")
        for name, m in best.items():
            print(
                f"{name:18s} {m['wall']:7.2f} {m['rate']:8.1f} {m['start']:8.2f} {1000 * m['idle_per_clip']:13.2f} "
                f"{1000 * m['worker_per_clip']:15.2f} {1000 * m['main_per_clip']:13.2f} {m['read_ahead']:11d}"
            )
        print(f"cluster / local throughput: {ratio:.3f} (goal >= 0.85: {'met' if ratio >= 0.85 else 'NOT met'})")
        print(f"per-clip overhead the cluster adds (idle worker time per clip, cluster - local): {1000 * (cluster['idle_per_clip'] - local['idle_per_clip']):.2f} ms")
        print(f"cluster start (command start to target open) over the local pool's: {cluster['start'] - local['start']:+.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Batch bake speed: a pack of BVH clips onto a ~60-bone character, end to end, against Blender's
usual recipe measured in the same run.

The pack is ``--clips`` copies of two CMU clips of ``tests/data`` (12_03: 566 frames, 02_02: 299 frames, both
120 fps, so 114 and 60 frames on the 24 fps scene); the target is the 56-bone male base mesh
(A-pose, Rigify-style names). Each configuration runs ``python -m marionette bake-pack`` in its own
process, which reports its own peak memory and its workers' (largest) peak.

* ``--jobs 1`` and ``--jobs 2``: wall time (read, map, bind, retarget, write, save: everything),
  clips per second, milliseconds per clip per core, CPU seconds of the main process and of the
  workers, per-stage sums from the report (worker-side stages summed over workers), peak memory
  (workers report their own).
* Memory: the main process's peak (the kernel's high-water mark) with a quarter of the pack
  against the whole pack, in one output file (what grows is the baked Actions themselves, what
  opening the output costs) and in volumes of ``--volume-clips`` clips (``--max-clips-per-file``:
  the main process holds one volume's Actions at a time, so its peak should not grow).
* Blender's recipe, on ``--recipe-clips`` clips of the same pack: ``import_anim.bvh`` (timing kept
  on the scene rate), Copy Rotation constraints (world space) on every mapped target bone plus
  Copy Location on the hips, ``nla.bake`` with visual keying, source removed, one save at the end.

Run: ``python -m bench.bench_batch_bake [--clips 200] [--recipe-clips 20]``. Goals: <= 60 ms per
clip per core, ``--jobs 2`` >= 1.7x faster than ``--jobs 1`` on a two-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_files import DATA

CLIPS = ("bvh/cmu/12_03_motionbuilder.bvh", "bvh/cmu/02_02_daz.bvh")
TARGET = "gltf/male_base_mesh_apose.glb"

# Runs the command line in this process and prints the peak memory of it and of its workers.
_MEASURED_RUN = r"""
import json, resource, sys
from marionette.cli.main import main
status = main(sys.argv[1:])
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print("PEAK " + json.dumps({
    "status": status,
    "main_mb": me.ru_maxrss / 1024,
    "main_cpu": me.ru_utime + me.ru_stime,
    "workers_cpu": kids.ru_utime + kids.ru_stime,
}))
"""

_RECIPE = r"""
import json, os, sys, time
import bpy
from marionette.core.mapping.auto_map import auto_map_skeleton
from marionette.bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from marionette.bridge.file_import import load_file

target_path, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
bpy.ops.wm.read_factory_settings(use_empty=True)
target = load_file(target_path).armatures[0]
tmap = auto_map_skeleton(skeleton_from_armature(target), rest_heads_tails(target)[1]).bones()
times = {"import": 0.0, "constraints": 0.0, "bake": 0.0, "cleanup": 0.0}
view_layer = bpy.context.view_layer
for path in files:
    t0 = time.perf_counter()
    bpy.ops.import_anim.bvh(filepath=path, use_fps_scale=True, update_scene_duration=False, rotate_mode="NATIVE")
    source = bpy.context.active_object
    frames = int(max(fc.range()[1] for fc in _curves) if (_curves := list(source.animation_data.action.layers[0].strips[0].channelbags[0].fcurves)) else 1)
    t1 = time.perf_counter()
    smap = auto_map_skeleton(skeleton_from_armature(source), rest_heads_tails(source)[1]).bones()
    for slot, bone in tmap.items():
        if slot not in smap:
            continue
        c = target.pose.bones[bone].constraints.new("COPY_ROTATION")
        c.target, c.subtarget = source, smap[slot]
        if slot == "hips":
            c = target.pose.bones[bone].constraints.new("COPY_LOCATION")
            c.target, c.subtarget = source, smap[slot]
    for o in view_layer.objects:
        o.select_set(False)
    target.select_set(True)
    view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="POSE")
    t2 = time.perf_counter()
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=False, visual_keying=True, clear_constraints=True, bake_types={"POSE"})
    t3 = time.perf_counter()
    bpy.ops.object.mode_set(mode="OBJECT")
    target.animation_data.action.use_fake_user = True
    target.animation_data.action = None
    arm, act = source.data, source.animation_data.action
    bpy.data.objects.remove(source)
    bpy.data.armatures.remove(arm)
    bpy.data.actions.remove(act)
    t4 = time.perf_counter()
    for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
        times[k] += v
t5 = time.perf_counter()
bpy.ops.wm.save_as_mainfile(filepath=out, copy=True, compress=True)
times["save"] = time.perf_counter() - t5
print("RECIPE " + json.dumps({"clips": len(files), "times": times}))
"""


def _busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot (Linux; 0 elsewhere)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _run(code: str, args: list[str]) -> tuple[float, str]:
    t0, busy0 = time.perf_counter(), _busy_seconds()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = (kids.ru_utime + kids.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    # CPU the rest of the machine took while this ran (other processes share these cores).
    _run.foreign = max(0.0, _busy_seconds() - busy0 - ours)  # type: ignore[attr-defined]
    if proc.returncode not in (0,):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"run failed with status {proc.returncode}")
    return wall, proc.stdout


def _tagged(text: str, tag: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith(tag + " "))
    return json.loads(line[len(tag) + 1 :])


def _bake(pack: Path, out: Path, jobs: int, *extra: str) -> dict:
    report = out.with_suffix(".json")
    args = ["bake-pack", str(pack), str(DATA / TARGET), "-o", str(out), "--jobs", str(jobs), "--report", str(report), *extra]
    wall, text = _run(_MEASURED_RUN, args)
    peak = _tagged(text, "PEAK")
    if peak["status"] != 0:
        raise SystemExit(f"bake-pack --jobs {jobs} exited with {peak['status']}")
    r = json.loads(report.read_text())
    clips = r["clips_by_status"].get("baked", 0)
    foreign = float(getattr(_run, "foreign", 0.0))
    return {"wall": wall, "clips": clips, "peak": peak, "report": r, "size_mb": out.stat().st_size / 2**20, "foreign": foreign}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument("--recipe-clips", type=int, default=20)
    parser.add_argument("--volume-clips", type=int, default=25, help="clips per output file for the memory runs in volumes")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run --jobs 1 and --jobs 2 this many times (alternating); the pair least disturbed by other processes counts"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="marionette_bench_"))
    try:
        pack = tmp / "pack"
        pack.mkdir()
        for k in range(args.clips):
            shutil.copy(DATA / CLIPS[k % 2], pack / f"clip{k:04d}.bvh")
        quarter = tmp / "quarter"
        quarter.mkdir()
        for k in range(max(1, args.clips // 4)):  # a folder with nothing to bake is refused
            shutil.copy(DATA / CLIPS[k % 2], quarter / f"clip{k:04d}.bvh")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"pack: {args.clips} BVH clips (CMU 566 and 299 frames at 120 fps -> 114 and 60 frames at 24 fps)")
        print(f"target: {TARGET} (56 bones); machine: {cores} cores")

        load = os.getloadavg()
        tries: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(max(1, args.repeat)):
            for jobs in (1, 2):
                tries[jobs].append(_bake(pack, tmp / f"jobs{jobs}.blend", jobs))
        # Other work on the machine (and on the host under it, which no counter here shows: it
        # only makes our own CPU seconds grow) slows runs down, never speeds them up: the fastest
        # run of each kind counts, as timeit takes the minimum.
        runs = {jobs: min(t, key=lambda r: r["wall"]) for jobs, t in tries.items()}
        small = _bake(quarter, tmp / "quarter.blend", 2)
        vol = str(args.volume_clips)
        split = {n: _bake(p, tmp / f"split{n}.blend", 2, "--max-clips-per-file", vol) for n, p in ((len(list(quarter.iterdir())), quarter), (args.clips, pack))}
        files = sorted(str(p) for p in pack.iterdir())[: args.recipe_clips]
        rwall, rtext = _run(_RECIPE, [str(DATA / TARGET), str(tmp / "recipe.blend"), *files])
        recipe = _tagged(rtext, "RECIPE")

        print()
        print(f"load average before the runs: {load[0]:.2f} (other processes share these cores)")
        print(
            f"{'run':10s} {'wall s':>7s} {'clips/s':>8s} {'ms/clip/core':>13s} {'CPU s main':>11s} {'CPU s workers':>14s} "
            f"{'main peak MB':>13s} {'worker peak MB':>15s} {'output MB':>10s}"
        )
        for jobs, r in runs.items():
            per_core = 1e3 * r["wall"] * jobs / r["clips"]
            p = r["peak"]
            print(
                f"--jobs {jobs:<3d} {r['wall']:7.2f} {r['clips'] / r['wall']:8.1f} {per_core:13.1f} {p['main_cpu']:11.2f} "
                f"{p['workers_cpu']:14.2f} {p['main_mb']:13.0f} {r['report'].get('worker_peak_mb', 0.0):15.0f} {r['size_mb']:10.1f}"
            )
        speedup = runs[1]["wall"] / runs[2]["wall"]
        print(f"speed-up --jobs 2 over --jobs 1: {speedup:.2f}x (goal >= 1.7x on 2 cores; fastest of {len(tries[1])} runs each)")
        print(f"  CPU seconds other processes took during those two runs: {runs[1]['foreign']:.2f} and {runs[2]['foreign']:.2f}")
        if args.repeat > 1:
            ratios = [a["wall"] / b["wall"] for a, b in zip(tries[1], tries[2], strict=True)]
            pairs = ", ".join(
                f"{a['wall']:.2f}/{b['wall']:.2f} s = {r:.2f}x (others {a['foreign'] + b['foreign']:.1f} CPU s)"
                for a, b, r in zip(tries[1], tries[2], ratios, strict=True)
            )
            print(f"  every pair (--jobs 1 / --jobs 2, run one after the other): {pairs}; median {sorted(ratios)[len(ratios) // 2]:.2f}x")
        print(f"  files read ahead by the workers while the main process started: {runs[2]['report']['counters'].get('files_read_ahead', 0)}")
        goal = min(1e3 * r["wall"] * j / r["clips"] for j, r in runs.items())
        print(f"best ms per clip per core: {goal:.1f} (goal <= 60)")
        for jobs, r in runs.items():
            t = r["report"]["timings"]
            stages = ["open", "workers_start", "read", "map", "bind", "retarget", "part", "write", "finish", "save"]
            print(f"stages --jobs {jobs} (s, summed over processes): " + ", ".join(f"{s} {t.get(s, 0.0):.2f}" for s in stages))
            print(f"  binding cache: {r['report']['binding_cache']}")
        grow = (runs[2]["peak"]["main_mb"] - small["peak"]["main_mb"]) / (runs[2]["clips"] - small["clips"])
        print(
            f"memory, one output file: main peak {small['peak']['main_mb']:.0f} MB with {small['clips']} clips, {runs[2]['peak']['main_mb']:.0f} MB with "
            f"{runs[2]['clips']}: {grow:.2f} MB per baked clip (the Actions the output holds, "
            f"{small['report']['actions_held_max']} and {runs[2]['report']['actions_held_max']} at once); worker peak "
            f"{small['report'].get('worker_peak_mb', 0.0):.0f} MB and {runs[2]['report'].get('worker_peak_mb', 0.0):.0f} MB"
        )
        lo, hi = sorted(split)
        sgrow = (split[hi]["peak"]["main_mb"] - split[lo]["peak"]["main_mb"]) / (split[hi]["clips"] - split[lo]["clips"])
        print(
            f"memory, volumes of {vol} clips: main peak {split[lo]['peak']['main_mb']:.0f} MB with {split[lo]['clips']} clips "
            f"({len(split[lo]['report']['outputs'])} files), {split[hi]['peak']['main_mb']:.0f} MB with {split[hi]['clips']} "
            f"({len(split[hi]['report']['outputs'])} files): {sgrow:.3f} MB per clip, {split[hi]['report']['actions_held_max']} Actions "
            f"held at most; {split[hi]['wall']:.2f} s for the pack ({runs[2]['wall']:.2f} s in one file)"
        )
        cpu = {j: r["peak"]["main_cpu"] + r["peak"]["workers_cpu"] for j, r in runs.items()}
        print(
            f"CPU: --jobs 1 {cpu[1]:.2f} s, --jobs 2 {cpu[2]:.2f} s in all; with two free cores --jobs 2 would take about "
            f"{max(runs[2]['peak']['main_cpu'], cpu[2] / 2):.2f} s ({runs[1]['wall'] / max(runs[2]['peak']['main_cpu'], cpu[2] / 2):.2f}x)"
        )
        rt = recipe["times"]
        n = recipe["clips"]
        per = {k: 1e3 * v / n for k, v in rt.items() if k != "save"}
        recipe_clip = sum(per.values()) + 1e3 * rt["save"] / n
        print(
            f"Blender recipe on {n} clips (import_anim.bvh + Copy Rotation/Location + nla.bake): {recipe_clip:.0f} ms per clip "
            f"(" + ", ".join(f"{k} {v:.0f}" for k, v in per.items()) + f", save {1e3 * rt['save'] / n:.0f}); process wall {rwall:.1f} s"
        )
        for jobs, r in runs.items():
            ours = 1e3 * r["wall"] / r["clips"]
            print(f"  --jobs {jobs}: {ours:.1f} ms per clip end to end, {recipe_clip / ours:.1f}x faster than the recipe")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

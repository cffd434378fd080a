"""Export speed: ``bake-pack --export-dir``'s export step writing a pack of clips for an engine,
against the time of Blender's exporter calls within it, measured in the same run.

The pack is ``--clips`` copies of two CMU clips of ``tests/data`` (12_03: 566 frames, 02_02: 299
frames at 120 fps, so 114 and 60 frames on the 24 fps scene), baked once onto the 56-bone male base
mesh (A-pose, one skinned mesh) by ``python -m marionette bake-pack``. Then, per configuration (one
file per clip as FBX for Unity and as GLB for Godot; with ``--export-single`` one file holding every
clip, FBX or GLB), a process of its own runs the export step of ``bake-pack --export-dir`` on the
saved output (``export_pack`` in ``usecases/export_pack.py``, as ``bake_pack`` calls it after the
bake): everything it does, the output opened and listed, the character made ready, every file
written whole and moved into place; each exporter call it makes is timed where it is made.

Per clip it prints Marionette's total, the exporter calls' time, the overhead (total minus
exporter) and the ratio total / exporter. Goal (issue [game-export]): exporting adds at most the
time of Blender's exporter itself, a ratio of at most 2.

``--by-hand`` adds a cross-check, in the same process after the export step: the output opened
once, the character selected, and for each clip only what the exporter needs (the clip made the
active Action over the scene's frames; for one file, every clip on an NLA track) and the timed
``bpy.ops.export_scene.fbx`` / ``.gltf`` call with the same preset options, into a scratch folder
("alone", and the ratio total / alone; the two exporter times differ by what else shares the
machine and by the session each runs in). It doubles the time.

Run: ``python -m bench.bench_export_pack [--clips 200] [--configs fbx,glb,fbx-single,glb-single] [--by-hand]``
(default ``fbx,glb``: one file per clip, what the goal is about; 4-5 minutes for 200 clips on two
shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_files import DATA

CLIPS = ("bvh/cmu/12_03_motionbuilder.bvh", "bvh/cmu/02_02_daz.bvh")
TARGET = "gltf/male_base_mesh_apose.glb"

#: Configuration name -> (format, engine, one file).
CONFIGS = {
    "fbx": ("fbx", "unity", False),
    "glb": ("glb", "godot", False),
    "fbx-single": ("fbx", "unity", True),
    "glb-single": ("glb", "godot", True),
}

# Marionette's export step, then (by_hand "1") Blender's exporter alone, on a saved output: argv =
# output .blend, report .json, format, engine, single, engine folder, scratch folder, by_hand.
_MEASURED = r"""
import json, sys, time
from types import SimpleNamespace
import bpy
from marionette.bridge import nla_stack
from marionette.bridge.compat import action_slot_for, assign_action, enable_importers
from marionette.bridge.export_files import skinned_meshes
from marionette.core.export.presets import preset_for
from marionette.usecases.export_pack import PackExport, export_pack

blend, report, fmt, engine, single, folder, scratch, by_hand = sys.argv[1:9]
r = json.load(open(report))
enable_importers(("io_scene_fbx", "io_scene_gltf2"))
# What export_pack reads of the run's BatchReport: its clips in pack order and its saved volumes.
files = [SimpleNamespace(clips=[SimpleNamespace(status=c["status"], action=c.get("action")) for c in f["clips"]]) for f in r["files"]]
run = SimpleNamespace(files=files, info={"outputs": r["outputs"], "output": r["output"]})
request = PackExport(folder, fmt, engine, single="out" if single == "1" else None)
# The exporter calls Marionette makes, timed where they are made (Blender's operator call wrapper).
op_class = type(bpy.ops.export_scene.fbx)
call = op_class.__call__
inside = [0.0]


def timed_call(self, *args, **kw):
    if not self.idname_py().startswith("export_scene."):
        return call(self, *args, **kw)
    t = time.perf_counter()
    try:
        return call(self, *args, **kw)
    finally:
        inside[0] += time.perf_counter() - t


op_class.__call__ = timed_call
t0 = time.perf_counter()
entries = export_pack(run, r["target"]["armature"], request)
total = time.perf_counter() - t0
op_class.__call__ = call
failed = [e for e in entries if "error" in e]
if failed:
    raise SystemExit(f"export failed: {failed[:3]}")
if by_hand != "1":
    print("MEASURED " + json.dumps({"clips": len(entries) if single != "1" else len(entries[0]["clips"]), "total": total, "exporter": inside[0], "alone": None}))
    raise SystemExit(0)

clips = [c["action"] for f in r["files"] for c in f["clips"] if c.get("action")]
bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
preset = preset_for(fmt, engine)
arm = bpy.data.objects[r["target"]["armature"]]
for o in bpy.context.view_layer.objects:
    o.select_set(False)
for o in [arm, *skinned_meshes(arm)]:
    o.select_set(True)
bpy.context.view_layer.objects.active = arm
export = bpy.ops.export_scene.fbx if preset.family == "fbx" else bpy.ops.export_scene.gltf
scene = bpy.context.scene
seconds = 0.0
if single == "1":
    for track in list(arm.animation_data.nla_tracks):
        arm.animation_data.nla_tracks.remove(track)
    assign_action(arm, None, None)
    for name in clips:
        nla_stack.push_action(arm, bpy.data.actions[name]).mute = False
    options = dict(preset.options)
    if preset.family == "fbx":
        options.update(bake_anim_use_nla_strips=True, bake_anim_use_all_actions=False)
    else:
        options.update(export_animation_mode="NLA_TRACKS", export_reset_pose_bones=False)
    t0 = time.perf_counter()
    export(filepath=f"{scratch}/all.{fmt}", check_existing=False, **options)
    seconds = time.perf_counter() - t0
else:
    for k, name in enumerate(clips):
        action = bpy.data.actions[name]
        assign_action(arm, action, action_slot_for(action, arm))
        scene.frame_start, scene.frame_end = int(action.frame_range[0]), int(action.frame_range[1])
        options = dict(preset.options)
        if preset.family == "gltf":
            options["export_nla_strips_merged_animation_name"] = name
        t0 = time.perf_counter()
        export(filepath=f"{scratch}/{k:04d}.{fmt}", check_existing=False, **options)
        seconds += time.perf_counter() - t0
print("MEASURED " + json.dumps({"clips": len(clips), "total": total, "exporter": inside[0], "alone": seconds}))
"""


def _run(args: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"{' '.join(args[:3])}... failed with status {proc.returncode}")
    return wall, proc.stdout


def _tagged(text: str, tag: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith(tag + " "))
    return json.loads(line[len(tag) + 1 :])


def _measure(tmp: Path, out: Path, report: Path, name: str, keep: bool, by_hand: bool) -> dict:
    fmt, engine, single = CONFIGS[name]
    run = tmp / name
    scratch = run / "scratch"
    scratch.mkdir(parents=True)
    engine_dir = run / "engine"
    args = [str(out), str(report), fmt, engine, "1" if single else "0", str(engine_dir), str(scratch), "1" if by_hand else "0"]
    wall, text = _run(["-c", _MEASURED, *args])
    measured = _tagged(text, "MEASURED")
    files_mb = sum(p.stat().st_size for p in engine_dir.rglob("*") if p.is_file()) / 2**20
    if not keep:  # 200 engine files each: free the disk before the next
        shutil.rmtree(run, ignore_errors=True)
    return {"name": name, **measured, "files_mb": files_mb, "wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument(
        "--configs", default="fbx,glb",
        help=f"comma-separated, of {', '.join(CONFIGS)} (default: %(default)s, one file per clip, the issue's goal; 4-5 minutes "
        "for 200 clips on two shared cores)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="bake-pack workers (the bake is not what is measured)")
    parser.add_argument(
        "--by-hand", action="store_true",
        help="also time the same exporter calls made by hand on the same output, after (a cross-check; doubles the time)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)} (choose from {', '.join(CONFIGS)})")

    tmp = Path(tempfile.mkdtemp(prefix="marionette_bench_"))
    try:
        pack = tmp / "pack"
        pack.mkdir()
        for k in range(args.clips):
            shutil.copy(DATA / CLIPS[k % 2], pack / f"clip{k:04d}.bvh")
        print(f"pack: {args.clips} BVH clips (CMU 566 and 299 frames at 120 fps -> 114 and 60 frames at 24 fps)")
        print(f"target: {TARGET} (56 bones, one skinned mesh)")
        out, report = tmp / "out.blend", tmp / "r.json"
        bake, _ = _run(["-m", "marionette", "bake-pack", str(pack), str(DATA / TARGET), "-o", str(out), "--jobs", str(args.jobs), "--report", str(report)])
        print(f"baked once in {bake:.1f} s (not measured); load average {os.getloadavg()[0]:.2f} (other processes share these cores)")
        rows = [_measure(tmp, out, report, n, args.keep, args.by_hand) for n in names]
        print()
        print("per clip, ms: total = Marionette's whole export step; exporter = the exporter calls it makes, timed around "
              "each call; overhead = total - exporter; alone (--by-hand) = the same exporter calls made by hand on the same output, after")
        print(f"{'config':11s} {'clips':>5s} {'total':>8s} {'exporter':>9s} {'overhead':>9s} {'total/exporter':>15s} "
              f"{'alone':>7s} {'total/alone':>12s} {'files MB':>9s} {'process s':>10s}")
        for r in rows:
            n = max(1, r["clips"])
            total, exporter = 1e3 * r["total"] / n, 1e3 * r["exporter"] / n
            alone = f"{1e3 * r['alone'] / n:7.1f} {r['total'] / r['alone']:12.2f}" if r["alone"] else f"{'-':>7s} {'-':>12s}"
            print(f"{r['name']:11s} {r['clips']:5d} {total:8.1f} {exporter:9.1f} {total - exporter:9.1f} {total / exporter:15.2f} "
                  f"{alone} {r['files_mb']:9.1f} {r['wall']:10.1f}")
        worst = max(r["total"] / r["exporter"] for r in rows)
        print(f"goal: total/exporter <= 2 (exporting adds at most the exporter's own time); worst here {worst:.2f}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

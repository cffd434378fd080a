"""Shared by the Batch Bake tests: the target and clips of tests/data, the bake-pack command line,
its report and journal, the Actions it saved, waiting on worker processes, and long BVH files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tests.helpers.data import shared_file

TARGET = "gltf/male_base_mesh_apose.glb"  # 56 bones, A-pose, Rigify-style names
CMU = "bvh/cmu/12_03_motionbuilder.bvh"
DAZ = "bvh/cmu/02_02_daz.bvh"


def _bake_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "marionette", "bake-pack", *args]


def _bake(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_bake_command(*args), capture_output=True, text=True, timeout=timeout)


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def _statuses(report: dict) -> dict[str, str]:
    return {f["label"]: f["status"] for f in report["files"]}


def _read_output(bpy, path: Path) -> dict[str, tuple[str, str, dict]]:
    """Action name -> (source file, clip id, {(slot, data path, index): key bytes}) of every
    Action a batch bake wrote into ``path``."""
    from marionette.bridge import compat

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    out = {}
    for a in bpy.data.actions:
        src = a.get("marionette_batch_source")
        if src is None:
            continue
        curves = {}
        for slot in a.slots:
            for fc in compat.action_fcurves(a, slot):
                buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
                fc.keyframe_points.foreach_get("co", buf)
                curves[(slot.identifier, fc.data_path, fc.array_index)] = buf.tobytes()
        out[a.name] = (src, a["marionette_batch_clip"], curves)
    return out


def _journal(parts: Path) -> list[dict]:
    try:
        text = (parts / "journal.jsonl").read_text()
    except OSError:
        return []
    return [json.loads(ln) for ln in text.splitlines() if ln.endswith("}")]


def _wait_for(predicate, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _big_bvh(path: Path, repeat: int = 40) -> None:
    """A long clip (the CMU walk 40 times over: 22640 frames) that keeps a worker busy for about a second."""
    text = shared_file(CMU).read_text()
    i = text.index("Frames:")
    lines = text[i:].splitlines()
    frames = [ln for ln in lines[2:] if ln.strip()]
    path.write_text(text[:i] + f"Frames: {len(frames) * repeat}\n{lines[1]}\n" + "\n".join(frames * repeat) + "\n")

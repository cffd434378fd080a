"""``retarget --push-to-nla``: the saved .blend holds the new clip on a muted NLA track of the
target, which keeps the Action its file gave it; the report's figures are the clip's, the same as
without the option."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tiny_bvh import bvh_text

pytestmark = pytest.mark.bpy


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_push_to_nla_saves_the_clip_on_a_muted_track_and_the_same_figures(blender, tmp_path: Path) -> None:
    bpy = blender
    from marionette.bridge.file_import import load_file

    (tmp_path / "clip.bvh").write_text(bvh_text(12))
    (tmp_path / "char.bvh").write_text(bvh_text(6))
    reports = {}
    for name, extra in (("plain", []), ("pushed", ["--push-to-nla"])):
        res = run(["retarget", "clip.bvh", "char.bvh", "-o", f"{name}.blend", "--report", f"{name}.json", *extra], tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        reports[name] = json.loads((tmp_path / f"{name}.json").read_text())
    plain, pushed = reports["plain"]["summary"], reports["pushed"]["summary"]
    numeric = [k for k, v in plain.items() if isinstance(v, float)]
    assert len(numeric) >= 5
    for key in numeric:
        assert abs(pushed[key] - plain[key]) <= 1e-6, (key, pushed[key], plain[key])
    # What the character file gives its armature: Blender's BVH importer keys it with its own motion.
    own = load_file(str(tmp_path / "char.bvh")).armatures[0].animation_data.action
    own_name, own_range = own.name, tuple(own.frame_range)
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "pushed.blend"), load_ui=False)
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    ad = arm.animation_data
    assert ad.action is not None and ad.action.name == own_name and tuple(ad.action.frame_range) == own_range
    assert [t.name for t in ad.nla_tracks] == [reports["pushed"]["nla"]["track"]]
    track = ad.nla_tracks[0]
    assert track.mute and len(track.strips) == 1
    clip = track.strips[0].action
    assert clip is not None and clip.name == track.name and clip.name.startswith("clip")
    assert (track.strips[0].frame_start, track.strips[0].frame_end) == tuple(clip.frame_range)


@pytest.mark.slow
def test_a_resumed_pack_rebaking_a_clip_leaves_one_live_strip_per_clip(blender, tmp_path: Path) -> None:
    """``bake-pack --push-to-nla --resume`` with other settings bakes the clips again: each clip's
    track then holds its new Action, never a strip whose Action was replaced (an empty strip)."""
    bpy = blender
    for k in range(2):
        (tmp_path / f"clip{k}.bvh").write_text(bvh_text(10 + k))
    (tmp_path / "char.bvh").write_text(bvh_text(6))
    base = ["bake-pack", "clip0.bvh", "clip1.bvh", "char.bvh", "-o", "out.blend", "--jobs", "1", "--push-to-nla"]
    for extra in ([], ["--resume", "--method", "rest-space"]):
        res = run([*base, *extra], tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"), load_ui=False)
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    strips = [(t.name, s.action.name if s.action else None) for t in arm.animation_data.nla_tracks for s in t.strips]
    assert all(action is not None for _, action in strips), strips
    assert len(strips) == 2 and len({a for _, a in strips}) == 2, strips

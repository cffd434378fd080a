"""``bake-pack --export-dir DIR --export-format fbx|glb --export-single``, in its own process: one file
``DIR/<OUT>.<ext>`` holding every baked clip, named exactly after its Action (no ``Armature|``
prefix), in pack order, also when the output is saved in volumes; listed in the report and the
printed summary. Re-imported with Blender's own importer in a fresh session, every clip plays as the
baked Action does in OUT.blend: every mapped bone's world turn from rest within 0.05 degrees, the
hips (and every mapped joint) within 0.1 % of hip height.

Name clashes: an export file that exists already is kept (its bytes unchanged, reported as kept,
exit status 1: not every file asked for was written) unless ``--replace``, for the one file and for
the files of single clips."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.test_bake_pack_export import CLIPS, _bake, _played
from tests.helpers.export_round_trip import _angle, _turns, glb_json
from tests.helpers.fbx_file import read_fbx, take_names

pytestmark = [pytest.mark.bpy, pytest.mark.data, pytest.mark.slow]

MAX_DEG = 0.05
MAX_HIPS = 0.001


def _clip_names_in_file(path) -> list[str]:
    """The clips the file itself names, in its order."""
    if path.suffix == ".fbx":
        return take_names(read_fbx(path))
    return [a["name"] for a in glb_json(path)["animations"]]


def _reference(bpy, volumes: list[str], clip: str) -> dict:
    """``clip`` as the baked Action plays it in the volume holding it: mapped bones' rest and world
    matrices (metres) over its frames, the hips bone and its height above the lowest joint."""
    from marionette.bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
    from marionette.core.mapping.auto_map import auto_map_skeleton

    for volume in volumes:
        bpy.ops.wm.open_mainfile(filepath=volume, load_ui=False)
        if clip in bpy.data.actions:
            break
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    arm.animation_data.action = bpy.data.actions[clip]
    bones = auto_map_skeleton(skeleton_from_armature(arm), rest_heads_tails(arm)[1]).bones()
    names = sorted(set(bones.values()))
    first, last = (int(round(f)) for f in bpy.data.actions[clip].frame_range)
    frames = np.arange(first, last + 1)
    rest, world = _played(bpy, arm, names, frames)
    all_rest, _ = _played(bpy, arm, [b.name for b in arm.data.bones], frames[:1])
    hips = names.index(bones["hips"])
    return {
        "names": names, "frames": frames, "rest": rest, "world": world, "hips": hips,
        "hip_height": float(rest[hips, 2, 3] - all_rest[:, 2, 3].min()),
    }


def _compare_single(bpy, path, volumes: list[str]) -> dict[str, tuple[float, float, float, float]]:
    """Each clip of the re-imported ``path`` against its baked Action: the largest mapped-bone turn
    difference (degrees), hips and joint distances (fractions of hip height), and the largest turn
    from rest the clip plays."""
    from marionette.bridge import compat
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session

    refs = {clip: _reference(bpy, volumes, clip) for clip in CLIPS}
    fresh_session()
    loaded = load_file(str(path))
    assert len(loaded.armatures) == 1
    back = loaded.armatures[0]
    # Blender's FBX importer names each take's Action "<object>|<take>"; the glTF importer after the animation.
    imported = {a.name.removeprefix(f"{back.name}|"): a for a in bpy.data.actions}
    assert sorted(imported) == sorted(CLIPS), f"clips re-imported: {sorted(imported)}"
    back.animation_data.use_nla = False  # the glTF importer stacks every animation on NLA tracks
    out = {}
    for clip, ref in refs.items():
        action = imported[clip]
        compat.assign_action(back, action, compat.action_slot_for(action, back))
        shift = int(round(action.frame_range[0])) - int(ref["frames"][0])
        rest_b, world_b = _played(bpy, back, ref["names"], ref["frames"] + shift)
        turn_a, turn_b = _turns(ref["world"], ref["rest"]), _turns(world_b, rest_b)
        h = ref["hips"]
        out[clip] = (
            float(_angle(turn_a, turn_b).max()),
            float(np.linalg.norm(ref["world"][:, h, :3, 3] - world_b[:, h, :3, 3], axis=-1).max() / ref["hip_height"]),
            float(np.linalg.norm(ref["world"][..., :3, 3] - world_b[..., :3, 3], axis=-1).max() / ref["hip_height"]),
            float(_angle(turn_a, np.broadcast_to(np.eye(3), turn_a.shape)).max()),
        )
    return out


@pytest.mark.parametrize("fmt, engine, volumes", [("glb", "godot", 1), ("fbx", "unity", 2)])
def test_one_file_holds_every_clip_in_pack_order_and_plays_as_the_baked_actions(blender, tmp_path, fmt, engine, volumes):
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    per_volume = ["--max-clips-per-file", "1"] if volumes > 1 else []
    out, res = _bake(
        tmp_path, *per_volume, "--export-dir", str(ex), "--export-format", fmt, "--engine", engine, "--export-single", "--report", str(report),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(report.read_text())
    assert len(data["outputs"]) == volumes
    single = ex / f"out.{fmt}"
    assert data["exports"] == [{
        "format": fmt, "engine": engine, "clips": CLIPS, "metres_per_unit": 1.0, "up": "Y",
        "forward": "-Z" if fmt == "fbx" else "Z", "files": [str(single)],
    }]
    assert [p.name for p in ex.iterdir()] == [single.name]  # no work folder left
    lines = res.stdout.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("exported 2 clips in one file"))
    assert f"({fmt} for {engine})" in lines[at]
    assert [line.strip() for line in lines[at + 1 : at + 4]] == [single.name, *CLIPS]
    assert _clip_names_in_file(single) == CLIPS  # exactly the Actions' names, in pack order
    for clip, (angle, hips, joints, moved) in _compare_single(blender, single, data["outputs"]).items():
        print(f"{clip} in {single.name}: {angle:.5f} deg, hips {100 * hips:.5f} %, joints {100 * joints:.5f} % of hip height, "
              f"clip moves {moved:.1f} deg")
        assert moved > 20, "the compared clip barely moves"
        assert angle < MAX_DEG, f"{clip}: mapped bones {angle:.4f} deg off after the round trip"
        assert hips < MAX_HIPS, f"{clip}: hips {100 * hips:.4f} % of hip height off"
        assert joints < MAX_HIPS, f"{clip}: a mapped joint {100 * joints:.4f} % of hip height off"


def test_an_existing_single_file_is_kept_unless_replace(tmp_path):
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    ex.mkdir()
    single = ex / "out.glb"
    single.write_bytes(b"old")
    args = ["--export-dir", str(ex), "--export-format", "glb", "--export-single", "--report", str(report)]
    out, res = _bake(tmp_path, *args)
    assert res.returncode == 1, res.stderr[-2000:]
    assert out.is_file() and single.read_bytes() == b"old" and [p.name for p in ex.iterdir()] == ["out.glb"]
    assert json.loads(report.read_text())["exports"] == [{"clips": CLIPS, "kept": str(single)}]
    assert "kept 2 clips in one file" in res.stdout and "out.glb: exists already; kept (--replace replaces it)" in res.stdout
    out, res = _bake(tmp_path, *args, "--replace")
    assert res.returncode == 0, res.stderr[-2000:]
    assert _clip_names_in_file(single) == CLIPS
    assert json.loads(report.read_text())["exports"][0]["files"] == [str(single)]


def test_existing_clip_files_are_kept_and_the_others_written_unless_replace(tmp_path):
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    ex.mkdir()
    old = ex / f"{CLIPS[0]}.fbx"
    old.write_bytes(b"old")
    args = ["--export-dir", str(ex), "--export-format", "fbx", "--report", str(report)]
    out, res = _bake(tmp_path, *args)
    assert res.returncode == 1, res.stderr[-2000:]
    assert old.read_bytes() == b"old"
    exports = json.loads(report.read_text())["exports"]
    assert exports[0] == {"clip": CLIPS[0], "kept": str(old)}
    assert exports[1]["files"] == [str(ex / f"{CLIPS[1]}.fbx")]
    assert take_names(read_fbx(ex / f"{CLIPS[1]}.fbx")) == [CLIPS[1]]
    assert "exported 1 of 2 clips" in res.stdout and "1 kept, existing already (--replace replaces them)" in res.stdout
    assert f"{old.name}: exists already; kept (--replace replaces it)" in res.stdout
    out, res = _bake(tmp_path, *args, "--replace")
    assert res.returncode == 0, res.stderr[-2000:]
    assert [e["files"] for e in json.loads(report.read_text())["exports"]] == [[str(ex / f"{c}.fbx")] for c in CLIPS]
    assert take_names(read_fbx(old)) == [CLIPS[0]]
    assert "exported 2 of 2 clips" in res.stdout and "kept" not in res.stdout

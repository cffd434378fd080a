"""``bake-pack --export-dir DIR --export-format fbx|glb``, in its own process: one file per baked clip,
named after it, in pack order, listed in the report and the printed summary; each file re-imported
in a fresh session plays its one clip as the baked Action in OUT.blend does (every bone's world turn
from rest within 0.05 degrees, each deforming bone's head within 0.1 % of the character's height); an unwritable DIR
is refused before any work, with exit status 1 and nothing written."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from tests.cli.test_cli import run
from tests.helpers.data import shared_file
from tests.helpers.export_round_trip import _angle, _rest_world, _turns, _world, glb_json
from tests.helpers.fbx_file import read_fbx, take_names

pytestmark = [pytest.mark.bpy, pytest.mark.data, pytest.mark.slow]

PACK = ["bvh/cmu/02_02_daz.bvh", "bvh/makehuman/walk1_zup.bvh"]
CLIPS = ["02_02_daz", "walk1_zup"]
CHARACTER = "fbx/quaternius_male_casual.fbx"

MAX_DEG = 0.05
MAX_PLACE = 0.001

def _bake(tmp_path, *more: str):
    out = tmp_path / "out.blend"
    pack = [str(shared_file(p)) for p in PACK]
    res = run("bake-pack", *pack, str(shared_file(CHARACTER)), "-o", str(out), "--jobs", "1", *more)
    return out, res


def _played(bpy, obj, names: list[str], frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``obj``'s bones' rest and played world matrices over ``frames``, in metres."""
    metres = float(bpy.context.scene.unit_settings.scale_length)
    rest, world = _rest_world(obj, names), _world(obj, names, frames)
    for m in (rest, world):
        m[..., :3, 3] *= metres
    return rest, world


def _compare(bpy, out, clip: str, path) -> tuple[float, float, float]:
    """The re-imported file ``path`` against ``clip`` played on the character in ``out``: the
    largest bone turn difference (degrees), head distance (fraction of the character's height) and
    the largest turn from rest the clip plays."""
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session

    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    arm.animation_data.action = bpy.data.actions[clip]
    names = [b.name for b in arm.data.bones]
    first, last = (int(round(f)) for f in bpy.data.actions[clip].frame_range)
    frames = np.arange(first, last + 1)
    rest, world = _played(bpy, arm, names, frames)
    height = float(np.ptp(rest[:, 2, 3]))

    fresh_session()
    loaded = load_file(str(path))
    assert len(loaded.armatures) == 1
    back = loaded.armatures[0]
    played = back.animation_data.action if back.animation_data else None
    assert played is not None, f"{path.name}: the re-imported armature plays no action"
    assert [a.name for a in bpy.data.actions] == [played.name], "the file holds one clip"
    assert sorted(b.name for b in back.data.bones) == sorted(names), "bones added or lost"
    shift = int(round(played.frame_range[0])) - first
    rest_b, world_b = _played(bpy, back, names, frames + shift)
    turn_a, turn_b = _turns(world, rest), _turns(world_b, rest_b)
    angle = float(_angle(turn_a, turn_b).max())
    place = float(np.linalg.norm(world[..., :3, 3] - world_b[..., :3, 3], axis=-1).max() / height)
    moved = float(_angle(turn_a, np.broadcast_to(np.eye(3), turn_a.shape)).max())
    return angle, place, moved


@pytest.mark.parametrize("fmt, engine", [("glb", "godot"), ("fbx", "unity"), ("fbx", "unreal")])
def test_one_file_per_clip_in_pack_order_plays_as_the_baked_action(blender, tmp_path, fmt, engine):
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    out, res = _bake(tmp_path, "--export-dir", str(ex), "--export-format", fmt, "--engine", engine, "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(report.read_text())
    expected = [str(ex / f"{c}.{fmt}") for c in CLIPS]
    assert [e["files"] for e in data["exports"]] == [[p] for p in expected]
    assert [(e["clip"], e["format"], e["engine"]) for e in data["exports"]] == [(c, fmt, engine) for c in CLIPS]
    assert sorted(p.name for p in ex.iterdir()) == [f"{c}.{fmt}" for c in CLIPS]  # no work folder left
    lines = res.stdout.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("exported 2 of 2 clips"))
    assert f"({fmt} for {engine})" in lines[at]
    assert [line.strip() for line in lines[at + 1 : at + 3]] == [f"{c}.{fmt}" for c in CLIPS]
    for clip, path in zip(CLIPS, expected, strict=True):
        angle, place, moved = _compare(blender, out, clip, ex / os.path.basename(path))
        print(f"{clip}.{fmt}: {angle:.5f} deg, heads {100 * place:.5f} % of height, clip moves {moved:.1f} deg")
        assert moved > 20, "the compared clip barely moves"
        assert angle < MAX_DEG, f"{clip}: bones {angle:.4f} deg off after the round trip"
        assert place < MAX_PLACE, f"{clip}: a bone head {100 * place:.4f} % of height off"


def test_unwritable_export_dir_is_refused_before_any_work(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write a read-only folder (root)")
        out, res = _bake(tmp_path, "--export-dir", str(locked / "engine"), "--export-format", "fbx")
    finally:
        locked.chmod(stat.S_IRWXU)
    assert res.returncode == 1, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("marionette: error:")]
    assert len(errors) == 1 and "--export-dir" in errors[0], res.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["locked"]


def test_export_dir_that_is_a_file_is_refused_before_any_work(tmp_path):
    taken = tmp_path / "engine"
    taken.write_bytes(b"kept")
    out, res = _bake(tmp_path, "--export-dir", str(taken), "--export-format", "glb")
    assert res.returncode == 1, res.stderr[-2000:]
    assert "--export-dir" in res.stderr and "not a folder" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine"] and taken.read_bytes() == b"kept"


def test_export_dir_under_a_file_is_refused_before_any_work(tmp_path):
    """A folder that cannot be made (a file where its parent should be), as any user, root too."""
    taken = tmp_path / "taken"
    taken.write_bytes(b"kept")
    out, res = _bake(tmp_path, "--export-dir", str(taken / "engine"), "--export-format", "fbx", "--report", str(tmp_path / "r.json"))
    assert res.returncode == 1, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("marionette: error:")]
    assert len(errors) == 1 and "--export-dir" in errors[0] and "cannot be written" in errors[0], res.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"] and taken.read_bytes() == b"kept"


def test_a_clip_whose_export_fails_is_reported_and_the_others_go_on(tmp_path):
    """The first clip's file name taken by a folder: its export fails (nothing of it left), the second is written."""
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    (ex / "02_02_daz.glb").mkdir(parents=True)
    out, res = _bake(tmp_path, "--export-dir", str(ex), "--export-format", "glb", "--report", str(report))
    assert res.returncode == 1, res.stderr[-2000:]
    exports = json.loads(report.read_text())["exports"]
    assert [e["clip"] for e in exports] == CLIPS
    assert "error" in exports[0] and "02_02_daz" in exports[0]["error"]
    assert exports[1]["files"] == [str(ex / "walk1_zup.glb")]
    assert [a["name"] for a in glb_json(ex / "walk1_zup.glb")["animations"]] == ["walk1_zup"]
    assert sorted(p.name for p in ex.iterdir()) == ["02_02_daz.glb", "walk1_zup.glb"]  # no work folder left
    assert not any((ex / "02_02_daz.glb").iterdir())
    assert "exported 1 of 2 clips" in res.stdout and "export failed: 02_02_daz" in res.stdout
    assert out.is_file()


@pytest.mark.parametrize(
    "more, said",
    [
        (["--export-format", "fbx", "--engine", "unity"], "--export-format and --engine: only with --export-dir DIR"),
        (["--export-single", "--replace"], "--export-single and --replace: only with --export-dir DIR"),
        (["--export-dir", "ENGINE"], "give --export-format fbx, glb or gltf"),
        (["--export-dir", "ENGINE", "--export-format", "glb", "--engine", "unreal"], "unreal"),
    ],
)
def test_wrong_export_options_are_refused_before_any_work(tmp_path, more, said):
    more = [str(tmp_path / "engine") if m == "ENGINE" else m for m in more]
    out, res = _bake(tmp_path, *more)
    assert res.returncode == 2, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("marionette: error:")]
    assert len(errors) == 1 and said in errors[0], res.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_clips_saved_in_several_volumes_are_each_exported_from_their_volume(tmp_path):
    ex, report = tmp_path / "engine", tmp_path / "r.json"
    out, res = _bake(tmp_path, "--max-clips-per-file", "1", "--export-dir", str(ex), "--export-format", "fbx", "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(report.read_text())
    assert len(data["outputs"]) == 2
    assert [e["files"] for e in data["exports"]] == [[str(ex / f"{c}.fbx")] for c in CLIPS]
    for clip in CLIPS:
        assert take_names(read_fbx(ex / f"{clip}.fbx")) == [clip]

"""VRM Animation written through Blender's glTF exporter and read back with Blender's glTF importer
in a fresh session: every humanoid node's rotation per frame (relative to the normalised T-pose,
which has no rest rotation) is the clip's as it was carried onto that T-pose, within 0.05°; the
hips' travel within 0.1 % of the hips' height; the extension's JSON as the schema has it; nothing
left in the scene and the source's Action unchanged. On the CMU and MakeHuman BVH clips and on the
VRM Add-on's A-pose character playing a clip retargeted onto it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marionette.core.formats.vrma import BONE_REST, EXTENSION, REQUIRED, read_glb, schema_problems
from marionette.core.rig.clip import Clip
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy

BVH_CLIPS = ["bvh/cmu/02_02_daz.bvh", "bvh/cmu/12_03_motionbuilder.bvh", "bvh/makehuman/walk1_zup.bvh"]
#: Frames read back per clip (evenly spread, first and last included).
READ_FRAMES = 40


def angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle of the rotation between 3x3 rotation matrices ``a`` and ``b`` (any leading shape)."""
    r = np.swapaxes(a, -1, -2) @ b
    cos = np.clip((np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    sin = np.linalg.norm(np.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]], -1), axis=-1) / 2.0
    return np.degrees(np.arctan2(sin, cos))


def expected_nodes(skeleton: Skeleton, clip: Clip, picks: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each humanoid node's rotation relative to its parent node, in Blender's axes, when the
    T-pose has no rest rotation: ``D_parent^T D`` with ``D`` the bone's rotation since its rest in
    the armature's space; and the hips' position. From the clip on the normalised skeleton."""
    cols = [clip.names.index(n) for n in skeleton.names]
    world = skeleton.forward_kinematics(clip.rotations[picks][:, cols], clip.translations[picks][:, cols])
    since_rest = world[..., :3, :3] @ BONE_REST.T
    out = {}
    for i, name in enumerate(skeleton.names):
        p = int(skeleton.parents[i])
        out[name] = since_rest[:, i] if p < 0 else np.swapaxes(since_rest[:, p], -1, -2) @ since_rest[:, i]
    return out, world[:, skeleton.index("hips"), :3, 3]


def read_back(path: Path, names: tuple[str, ...], picks: np.ndarray, fps: float = 24.0) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """The .vrma imported by Blender's glTF importer in a fresh session at ``fps``: each named
    node's local rotation and the hips' location at the frames ``picks`` (the clip starts at frame
    0) as the scene plays them, and each node's world rotation."""
    import bpy

    from marionette.bridge.session import fresh_session

    fresh_session()
    bpy.context.scene.render.fps, bpy.context.scene.render.fps_base = int(fps), 1.0
    bpy.ops.import_scene.gltf(filepath=str(path))
    objects = {o.name: o for o in bpy.data.objects}
    assert set(names) <= set(objects), sorted(set(names) - set(objects))
    local = {n: np.empty((len(picks), 3, 3)) for n in names}
    world = {n: np.empty((len(picks), 3, 3)) for n in names}
    hips = np.empty((len(picks), 3))
    scene = bpy.context.scene
    for k, f in enumerate(picks):
        scene.frame_set(int(f))
        for n in names:
            local[n][k] = np.array(objects[n].matrix_basis)[:3, :3]
            world[n][k] = np.array(objects[n].matrix_world)[:3, :3]
        hips[k] = np.array(objects["hips"].matrix_basis)[:3, 3]
    return local, hips, world


def check_file(path: Path, bones: tuple[str, ...], frames: int | None = None, fps: float = 24.0) -> dict:
    gltf, binary = read_glb(path.read_bytes())
    assert binary is not None
    assert schema_problems(gltf) == []
    human = gltf["extensions"][EXTENSION]["humanoid"]["humanBones"]
    assert set(human) == set(bones) and set(REQUIRED) <= set(human)
    nodes = gltf["nodes"]
    for bone, ref in human.items():
        node = nodes[ref["node"]]
        assert node["name"] == bone
        # No rest rotation, no scale: the normalised T-pose.
        assert np.allclose(node.get("rotation", [0, 0, 0, 1]), [0, 0, 0, 1], atol=1e-6), (bone, node.get("rotation"))
        assert np.allclose(node.get("scale", [1, 1, 1]), 1.0)
    animated = {(c["target"]["node"], c["target"]["path"]) for a in gltf["animations"] for c in a["channels"]}
    # Only what a player plays: every humanoid node's rotation and the hips' translation (three-vrm's
    # loader throws on a scale channel and ignores translations below the hips).
    assert animated == {(ref["node"], "rotation") for ref in human.values()} | {(human["hips"]["node"], "translation")}
    assert sum(len(a["channels"]) for a in gltf["animations"]) == len(animated) == len(gltf["animations"][0]["samplers"])
    assert len(gltf["animations"]) == 1 and "skins" not in gltf and "meshes" not in gltf
    if frames is not None:  # the clip starts at 0 s, one key a frame
        times = {gltf["animations"][0]["samplers"][c["sampler"]]["input"] for c in gltf["animations"][0]["channels"]}
        for t in times:
            acc = gltf["accessors"][t]
            assert acc["count"] == frames and acc["min"][0] == 0.0 and acc["max"][0] == pytest.approx((frames - 1) / fps, abs=1e-6)
    return gltf


def round_trip(outcome) -> dict[str, float]:
    """Compare the file as Blender's importer reads it with the clip on the normalised T-pose."""
    clip, skeleton = outcome.clip, outcome.rig.skeleton
    picks = np.unique(np.linspace(0, clip.frame_count - 1, min(clip.frame_count, READ_FRAMES)).astype(int))
    want, want_hips = expected_nodes(skeleton, clip, picks)
    got, got_hips, _ = read_back(outcome.path, outcome.bones, picks, outcome.report["clip"]["fps"])
    errors = np.array([angle_deg(want[n], got[n]).max() for n in outcome.bones])
    hips_height = outcome.report["rest"]["hips_height_m"]
    travel = float(np.linalg.norm(want_hips - got_hips, axis=1).max()) / hips_height
    return {"max_deg": float(errors.max()), "hips_travel_frac": travel, "frames": len(picks), "bones": len(outcome.bones)}


@pytest.mark.parametrize("clip_file", BVH_CLIPS)
def test_bvh_clip_round_trips_through_blenders_gltf_importer(blender, tmp_path, clip_file):
    from marionette.bridge.file_import import FPS_PROPERTY, load_file
    from marionette.bridge.session import fresh_session
    from marionette.usecases.vrma import export_vrma_file

    src = shared_file(clip_file)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    # The source as Blender plays it, at the times of the file's frames (24 a second).
    fresh_session()
    loaded = load_file(str(src))
    source, action = loaded.armatures[0], loaded.actions[0]
    source.animation_data.action = action
    per_frame = float(action[FPS_PROPERTY]) / 24.0
    start = action.frame_range[0]
    outcome = export_vrma_file(str(src), str(tmp_path / "clip.vrma"))
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.vrma"]  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert outcome.path.stat().st_mode & 0o777 == 0o666 & ~mask  # as any file written there, not private
    check_file(outcome.path, outcome.bones, outcome.clip.frame_count)
    figures = round_trip(outcome)
    picks = np.unique(np.linspace(0, outcome.clip.frame_count - 1, min(outcome.clip.frame_count, READ_FRAMES)).astype(int))
    fresh_session()
    loaded = load_file(str(src))
    source, action = loaded.armatures[0], loaded.actions[0]
    source.animation_data.action = action
    bone_of = {slot: m["bone"] for slot, m in outcome.report["mapping"]["slots"].items()}
    on_source = {vrm: bone_of[slot] for slot, vrm in outcome.rig.slots.items()}
    # A bone whose next bone along it hangs below an unmapped one in the source (CMU 12_03's Neck,
    # then Neck1, then Head) is aimed along the whole stretch, not turned as its own first part.
    sk, ends = outcome.rig.skeleton, np.asarray(outcome.rig.ends)
    heads = sk.rest_placements()[:, :3, 3]
    between = {
        sk.names[p] for i, p in enumerate(sk.parents) if p >= 0
        and np.allclose(ends[p], heads[i])
        and source.data.bones[on_source[sk.names[i]]].parent.name != on_source[sk.names[p]]
    }
    played = played_world(source, on_source, start + picks * per_frame)
    _, _, world = read_back(outcome.path, outcome.bones, picks)
    since_first = turned_alike({n: r for n, r in played.items() if n not in between}, world)
    print(clip_file, figures, "world rotation since the first frame vs the source's:", since_first, "aimed past unmapped bones:", sorted(between))
    assert figures["max_deg"] < 0.05
    assert figures["hips_travel_frac"] < 1e-3
    assert since_first["max_deg"] < 0.05


def test_vrm_character_playing_a_retargeted_clip(blender, tmp_path):
    """The VRM Add-on's A-pose character (rest 44.5° off a T-pose, rolled bones) playing a CMU clip
    retargeted onto it: the file recovers the clip carried onto the T-pose within 0.05°, each bone
    turns in the world as the character's bone turns since the first frame, and the export leaves
    the scene and the character's Action as they were."""
    import bpy

    from marionette.bridge.file_import import load_file, scene_fps
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.vrma import export_vrma

    character = [o for o in load_file(str(shared_file("blend/vrm_addon_apose_rest.blend"))).armatures][0]
    loaded = load_file(str(shared_file("bvh/cmu/02_02_daz.bvh")))
    source = loaded.armatures[0]
    fps = scene_fps()
    done = retarget_action(source, loaded.actions[0], character, scene_fps=fps, options=RetargetOptions(plant_feet=False), judge=False)
    action = done.action
    character.animation_data.action = action
    before = state(bpy, action)
    bpy.context.view_layer.objects.active = source
    source.select_set(True)
    selected = sorted(o.name for o in bpy.context.view_layer.objects if o.select_get())

    outcome = export_vrma(character, action, tmp_path / "vrm.vrma", fps=fps, source_mapping=done.target_mapping)

    assert state(bpy, action) == before
    assert bpy.context.view_layer.objects.active == source
    assert sorted(o.name for o in bpy.context.view_layer.objects if o.select_get()) == selected
    check_file(outcome.path, outcome.bones, outcome.clip.frame_count)
    # The character's bones as Blender plays them: world rotation since the first frame.
    start = action.frame_range[0]
    picks = np.unique(np.linspace(0, outcome.clip.frame_count - 1, min(outcome.clip.frame_count, READ_FRAMES)).astype(int))
    slots = {vrm: slot for slot, vrm in outcome.rig.slots.items()}
    bone_of = {slot: mb.bone for slot, mb in done.target_mapping.slots.items()}
    played = {n: np.empty((len(picks), 3, 3)) for n in outcome.bones}
    for k, f in enumerate(picks):
        bpy.context.scene.frame_set(int(start + f))
        for n in outcome.bones:
            m = np.array(character.matrix_world) @ np.array(character.pose.bones[bone_of[slots[n]]].matrix)
            played[n][k] = m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0)
    figures = round_trip(outcome)
    _, _, world = read_back(outcome.path, outcome.bones, picks)
    turned = {n: angle_deg(played[n] @ np.swapaxes(played[n][:1], -1, -2), world[n] @ np.swapaxes(world[n][:1], -1, -2)) for n in outcome.bones}
    body = list(outcome.bones)
    since_first = {"mean_deg": float(np.mean([turned[n].mean() for n in body])), "max_deg": float(max(turned[n].max() for n in body))}
    print("vrm character", figures, "world rotation since the first frame vs the character's, every humanoid bone:", since_first)
    assert figures["max_deg"] < 0.05
    assert figures["hips_travel_frac"] < 1e-3
    assert since_first["max_deg"] < 0.05


def state(bpy, action) -> tuple:
    keys = []
    for bag in action.layers[0].strips[0].channelbags:
        for fc in bag.fcurves:
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            keys.append((fc.data_path, fc.array_index, hashlib.sha256(co.tobytes()).hexdigest()))
    return (
        sorted(o.name for o in bpy.data.objects),
        sorted(a.name for a in bpy.data.armatures),
        sorted(a.name for a in bpy.data.actions),
        (bpy.context.scene.render.fps, bpy.context.scene.render.fps_base, bpy.context.scene.frame_current),
        sorted(keys),
    )


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_command_line_writes_a_vrma_and_refuses_bad_output_or_input(tmp_path):
    src = shared_file("bvh/makehuman/walk1_zup.bvh")
    ok = run(["export-vrma", str(src), "-o", "walk.vrma", "--report", "r.json"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"wrote {(tmp_path / 'walk.vrma').resolve()} (clip 'walk1_zup', 14 frames at 24 fps, 52 humanoid bones)")
    gltf, _ = read_glb((tmp_path / "walk.vrma").read_bytes())
    assert schema_problems(gltf) == []
    wrong = run(["export-vrma", str(src), "-o", "walk.glb"], tmp_path)
    assert wrong.returncode == 2 and "writes .vrma files only" in wrong.stderr and not (tmp_path / "walk.glb").exists()
    rate = run(["export-vrma", str(src), "-o", "walk2.vrma", "--fps", "0"], tmp_path)
    assert rate.returncode == 2 and "'0' is not a frame rate" in rate.stderr
    dog = run(["export-vrma", str(shared_file("fbx/quaternius_dog_quadruped.fbx")), "-o", "dog.vrma"], tmp_path)
    assert dog.returncode == 1 and len(dog.stderr.strip().splitlines()) == 1 and "not a humanoid" in dog.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "walk.vrma"]


def played_world(obj, bones: dict[str, str], frames: np.ndarray) -> dict[str, np.ndarray]:
    """World rotation of each bone (``bones``: humanoid bone -> the armature's bone) as Blender
    plays ``obj`` at ``frames`` (fractions played as subframes)."""
    import bpy

    out = {n: np.empty((len(frames), 3, 3)) for n in bones}
    for k, f in enumerate(frames):
        bpy.context.scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
        for n, b in bones.items():
            m = (np.array(obj.matrix_world) @ np.array(obj.pose.bones[b].matrix))[:3, :3]
            out[n][k] = m / np.linalg.norm(m, axis=0)
    return out


def turned_alike(played: dict[str, np.ndarray], world: dict[str, np.ndarray]) -> dict[str, float]:
    """How far each bone's world rotation since the first frame is from the played one's (degrees)."""
    turned = [angle_deg(played[n] @ np.swapaxes(played[n][:1], -1, -2), world[n] @ np.swapaxes(world[n][:1], -1, -2)) for n in played]
    worst = max(zip((t.max() for t in turned), played, strict=True), key=lambda p: p[0])
    return {"mean_deg": float(np.mean([t.mean() for t in turned])), "max_deg": float(worst[0]), "worst_bone": worst[1]}


def test_without_fingers_at_30_fps_the_file_names_no_finger_keeps_the_timing_and_round_trips(blender, tmp_path):
    from marionette.usecases.vrma import export_vrma_file

    outcome = export_vrma_file(str(shared_file("bvh/makehuman/walk1_zup.bvh")), str(tmp_path / "walk.vrma"), fingers=False, fps=30.0)
    fingers = ("Thumb", "Index", "Middle", "Ring", "Little")
    assert len(outcome.bones) == 22 and not any(f in b for b in outcome.bones for f in fingers)
    # 14 frames at 24 fps (13/24 s) are 17 at 30 fps, the last at 16/30 s.
    assert outcome.clip.frame_count == 17
    gltf = check_file(outcome.path, outcome.bones, 17, 30.0)
    assert not any(f in n.get("name", "") for n in gltf["nodes"] for f in fingers)
    figures = round_trip(outcome)
    assert figures["max_deg"] < 0.05 and figures["hips_travel_frac"] < 1e-3


def test_a_folder_that_does_not_exist_is_refused_and_nothing_is_left(blender, tmp_path):
    import bpy

    from marionette.core.errors import MarionetteError
    from marionette.usecases.vrma import export_vrma_file

    with pytest.raises(MarionetteError, match="cannot write there"):
        export_vrma_file(str(shared_file("bvh/makehuman/walk1_zup.bvh")), str(tmp_path / "missing" / "walk.vrma"))
    assert not (tmp_path / "missing").exists()
    assert [o.name for o in bpy.data.objects if o.type == "ARMATURE"] == ["walk1_zup"]
    assert len(bpy.data.armatures) == 1 and [a.name for a in bpy.data.actions] == ["walk1_zup"]


def test_a_long_take_read_without_blender_writes_the_same_motion(blender, tmp_path, monkeypatch):
    """A BVH take long enough to be read without Blender's importer (here: the threshold lowered
    to the 14 frames of MakeHuman walk1) gives the file the importer's path gives, within 0.05°."""
    from marionette.bridge import clip_source
    from marionette.usecases.vrma import export_vrma_file

    src = str(shared_file("bvh/makehuman/walk1_zup.bvh"))
    imported = export_vrma_file(src, str(tmp_path / "imported.vrma"))
    monkeypatch.setattr(clip_source, "LONG_TAKE_FRAMES", 10)
    assert clip_source.is_long_bvh_take(src)
    read = export_vrma_file(src, str(tmp_path / "read.vrma"))
    assert read.bones == imported.bones and read.clip.frame_count == imported.clip.frame_count
    check_file(read.path, read.bones, read.clip.frame_count)
    figures = round_trip(read)
    assert figures["max_deg"] < 0.05 and figures["hips_travel_frac"] < 1e-3
    picks = np.arange(read.clip.frame_count)
    a, a_hips = expected_nodes(read.rig.skeleton, read.clip, picks)
    b, b_hips = expected_nodes(imported.rig.skeleton, imported.clip, picks)
    between = max(float(angle_deg(a[n], b[n]).max()) for n in read.bones)
    print("long take vs imported:", between, "deg;", figures)
    assert between < 0.05
    assert np.abs(a_hips - b_hips).max() < 1e-3 * read.report["rest"]["hips_height_m"]


def test_a_failure_after_the_export_leaves_no_file_and_nothing_in_the_scene(blender, tmp_path):
    """The glTF written, the extension cannot name a bone's node: refused naming it, no .vrma and no
    temporary file, the temporary armature, its data and Action gone, the scene's rate restored."""
    import bpy

    from marionette.bridge.vrma_export import write_vrma
    from marionette.core.errors import MarionetteError
    from marionette.usecases.vrma import export_vrma_file

    good = export_vrma_file(str(shared_file("bvh/makehuman/walk1_zup.bvh")), str(tmp_path / "good.vrma"))
    before = (sorted(o.name for o in bpy.data.objects), sorted(a.name for a in bpy.data.armatures), sorted(a.name for a in bpy.data.actions))
    rate = (bpy.context.scene.render.fps, bpy.context.scene.render.fps_base)
    with pytest.raises(MarionetteError, match="no node for the humanoid bone 'jaw'"):
        write_vrma(good.rig, good.clip, tmp_path / "bad.vrma", "walk", 30.0, [*good.bones, "jaw"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.vrma"]
    assert (sorted(o.name for o in bpy.data.objects), sorted(a.name for a in bpy.data.armatures), sorted(a.name for a in bpy.data.actions)) == before
    assert (bpy.context.scene.render.fps, bpy.context.scene.render.fps_base) == rate

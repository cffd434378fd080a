"""The shared quadrupeds, the Fox (glTF) and the Dog (FBX), mapped by shape and retargeted onto
each other as a user does it (Retarget Clip's use case), judged on what Blender plays
(docs/pipeline.md#quadrupeds).

The expected mappings below were read off the rigs by hand: every bone's rest head and tail
printed in armature space (``bridge.skeleton_read.rest_heads_tails``). The Dog stands Z-up facing
+X (its head bones reach x = 2.8, its tail x = -2.7), so its left is +Y: ``Bone.017``-``019`` hang
from the spine bone ``Bone.001`` at y = +0.72 down to the ground (z = 0.10), ``Bone.008``-``010``
hang from the pelvis ``Bone`` at y = +0.60; ``Bone.002`` rises from the front of the spine to
``Bone.003``, which runs forward; ``Bone.004``-``007`` leave the pelvis backwards. Its
``IKFront*``/``IKBack*`` bones are loose roots on the ground, no body part. The Fox stands Z-up
facing -Y (head at y = -49, tail tip at y = +88), so its left is +X, which its ``Left`` names agree
with; its hind legs have four bones (``Leg01``, ``Leg02``, ``Foot01``, ``Foot02``), its front legs
three, its spine two (``b_Spine01_02``, ``b_Spine02_03``) between the pelvis ``b_Hip_01`` and the
bone carrying the front legs.

Besides the retarget's own figures, two checks stand on facts written here by hand: the way each
animal faces in the world (the Dog +X, the Fox -Y: its paws, front against hind, point there), and
for chains of equal bone counts (front legs, neck, head) each played bone's direction against the
source bone's turned by the quarter turn between the two facings.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

DOG = "fbx/quaternius_dog_quadruped.fbx"
FOX = "gltf/khronos_fox_quadruped.glb"


def _legs(chain: str, bones: dict[str, list[str]]) -> dict[str, str]:
    return {f"{chain}_{k + 1}.{side}": b for side, names in bones.items() for k, b in enumerate(names)}


DOG_SLOTS = {
    "pelvis": "Bone", "spine_1": "Bone.001", "neck_1": "Bone.002", "head": "Bone.003",
    "tail_1": "Bone.004", "tail_2": "Bone.005", "tail_3": "Bone.006", "tail_4": "Bone.007",
    **_legs("front_leg", {"L": ["Bone.017", "Bone.018", "Bone.019"], "R": ["Bone.014", "Bone.015", "Bone.016"]}),
    **_legs("hind_leg", {"L": ["Bone.008", "Bone.009", "Bone.010"], "R": ["Bone.011", "Bone.012", "Bone.013"]}),
}
FOX_SLOTS = {
    "pelvis": "b_Hip_01", "spine_1": "b_Spine01_02", "spine_2": "b_Spine02_03", "neck_1": "b_Neck_04", "head": "b_Head_05",
    "tail_1": "b_Tail01_012", "tail_2": "b_Tail02_013", "tail_3": "b_Tail03_014",
    **_legs("front_leg", {"L": ["b_LeftUpperArm_09", "b_LeftForeArm_010", "b_LeftHand_011"],
                          "R": ["b_RightUpperArm_06", "b_RightForeArm_07", "b_RightHand_08"]}),
    **_legs("hind_leg", {"L": ["b_LeftLeg01_015", "b_LeftLeg02_016", "b_LeftFoot01_017", "b_LeftFoot02_018"],
                         "R": ["b_RightLeg01_019", "b_RightLeg02_020", "b_RightFoot01_021", "b_RightFoot02_022"]}),
}
#: Which way each animal faces in the world, read off the files (see the module doc).
WORLD_FORWARD = {DOG: np.array([1.0, 0.0, 0.0]), FOX: np.array([0.0, -1.0, 0.0])}


@pytest.fixture(scope="module")
def scene():
    import bpy

    from marionette.bridge.file_import import load_file

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.render.fps = 24
    loaded = {}
    for rel in (DOG, FOX):
        f = load_file(shared_file(rel))
        loaded[rel] = (f.armatures[0], f.actions)
    yield bpy, loaded
    bpy.ops.wm.read_factory_settings(use_empty=True)


def _copy(bpy, obj, rng: np.random.Generator, scramble: bool) -> tuple[object, dict[str, float]]:
    """A copy of ``obj`` with every bone rolled at random (and renamed ``j000``... when
    ``scramble``); returns it and each bone's turn about its own Y (radians, by the copy's names)."""
    new = obj.copy()
    new.data = obj.data.copy()
    new.animation_data_clear()
    bpy.context.scene.collection.objects.link(new)
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    new.select_set(True)
    bpy.context.view_layer.objects.active = new
    bpy.ops.object.mode_set(mode="EDIT")
    for eb in new.data.edit_bones:
        eb.roll += float(rng.uniform(-np.pi, np.pi))
    bpy.ops.object.mode_set(mode="OBJECT")
    if scramble:
        order = rng.permutation(len(new.data.bones))
        for b, k in zip(list(new.data.bones), order, strict=True):
            b.name = f"j{k:03d}"
    turns = {}
    for before, after in zip(obj.data.bones, new.data.bones, strict=True):
        rel = np.array(before.matrix_local)[:3, :3].T @ np.array(after.matrix_local)[:3, :3]
        turns[after.name] = float(np.arctan2(rel[0, 2], rel[0, 0]))
    return new, turns


@pytest.mark.parametrize(("rel", "expected"), [(DOG, DOG_SLOTS), (FOX, FOX_SLOTS)], ids=["dog", "fox"])
def test_the_shared_quadrupeds_and_their_rolled_renamed_copies_map_by_shape(scene, rel, expected):
    from marionette.usecases.rigs import quadruped_input, rig_input

    bpy, loaded = scene
    obj = loaded[rel][0]
    with pytest.raises(Exception, match="not a humanoid"):
        rig_input(obj)
    found = quadruped_input(obj)
    assert found is not None
    assert found[0].slots == expected
    assert found[1].conflicts == []
    names = [b.name for b in obj.data.bones]
    for seed in (1, 2):
        copy, _ = _copy(bpy, obj, np.random.default_rng(seed), scramble=True)
        try:
            got = quadruped_input(copy)
            assert got is not None
            copy_names = [b.name for b in copy.data.bones]
            assert {s: names[copy_names.index(b)] for s, b in got[0].slots.items()} == expected
        finally:
            bpy.data.objects.remove(copy, do_unlink=True)


def _retarget(scene, src_rel, clip_name, tgt_rel, source=None, target=None, action=None, plant=False):
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action

    bpy, loaded = scene
    src_obj, actions = loaded[src_rel]
    action = action or next(a for a in actions if a.name.split("|")[-1] == clip_name)
    outcome = retarget_action(
        source or src_obj, action, target or loaded[tgt_rel][0], scene_fps=24.0,
        options=RetargetOptions(plant_feet=plant), name=f"{clip_name} test",
    )
    return outcome


def _played(obj, outcome) -> tuple[np.ndarray, np.ndarray]:
    """World placements ``(T, B, 4, 4)`` Blender plays for the new action, and its frames."""
    from marionette.bridge.evaluated_pose import evaluated_world_matrices

    c = outcome.report["clip"]
    frames = np.arange(c["first_frame"], c["last_frame"] + 0.5)
    _play(obj, outcome.action)
    return evaluated_world_matrices(obj, frames, None), frames


PAIRS = [(FOX, "Run", DOG), (FOX, "Walk", DOG), (FOX, "Survey", DOG), (DOG, "Walking", FOX), (DOG, "Idle", FOX)]


@pytest.mark.parametrize(("src_rel", "clip_name", "tgt_rel"), PAIRS, ids=[f"{c} onto {'dog' if t == DOG else 'fox'}" for _, c, t in PAIRS])
def test_clips_onto_the_other_quadruped_carry_every_chain_and_face_right(scene, src_rel, clip_name, tgt_rel):
    from marionette.bridge.evaluated_pose import evaluated_world_matrices

    bpy, loaded = scene
    outcome = _retarget(scene, src_rel, clip_name, tgt_rel)
    report = outcome.report
    assert report["body_plan"] == "quadruped"
    chains = report["chains"]
    assert set(chains) == {"spine", "neck", "head", "tail", "front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"}
    for name, c in chains.items():
        assert c["mean_direction_error"] < 2.0, name
    assert report["summary"]["pelvis_orientation_error"] < 0.5
    assert report["summary"]["travel"]["largest_gap_hip_heights"] < 0.01
    assert report["summary"]["facing_error"]["mean"] < 2.0
    assert chains["hind_leg.L"]["bones"] != chains["hind_leg.L"]["source_bones"]  # 3 onto 4 or 4 onto 3

    # By hand: each animal faces its own way in the world (front paws ahead of hind paws).
    tgt = loaded[tgt_rel][0]
    world, frames = _played(tgt, outcome)
    src_obj = loaded[src_rel][0]
    action = next(a for a in loaded[src_rel][1] if a.name.split("|")[-1] == clip_name)
    _play(src_obj, action)
    from marionette.bridge.clip_read import action_fps

    src_frames = action.frame_range[0] + (frames - frames[0]) * action_fps(action) / 24.0  # the Fox's clips start at 0
    src_world = evaluated_world_matrices(src_obj, src_frames, None)
    for obj, pose, rel in ((tgt, world, tgt_rel), (src_obj, src_world, src_rel)):
        names = list(_skeleton(obj).names)  # the order evaluated poses come in
        slots = DOG_SLOTS if rel == DOG else FOX_SLOTS
        idx = {s: names.index(b) for s, b in slots.items()}
        front = pose[:, [idx["front_leg_1.L"], idx["front_leg_1.R"]], :3, 3].mean(axis=1)
        hind = pose[:, [idx["hind_leg_1.L"], idx["hind_leg_1.R"]], :3, 3].mean(axis=1)
        ahead = (front - hind)[:, :2] / np.linalg.norm((front - hind)[:, :2], axis=1, keepdims=True)
        assert np.degrees(np.arccos(ahead @ WORLD_FORWARD[rel][:2])).max() < 15.0, rel

    # By hand: equal chains' bones point where the source's do, turned a quarter about world up.
    quarter = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # -Y (fox) onto +X (dog)
    turn = quarter if tgt_rel == DOG else quarter.T
    s_names, t_names = list(_skeleton(src_obj).names), list(_skeleton(tgt).names)
    s_slots, t_slots = (FOX_SLOTS, DOG_SLOTS) if tgt_rel == DOG else (DOG_SLOTS, FOX_SLOTS)
    errors = []
    for slot in ("front_leg_1.L", "front_leg_2.L", "front_leg_1.R", "front_leg_2.R", "neck_1"):
        nxt = {"neck_1": "head"}.get(slot, slot.replace("_1.", "_2.").replace("_2.", "_3.") if "_2." in slot else slot.replace("_1.", "_2."))
        s = src_world[:, s_names.index(s_slots[nxt]), :3, 3] - src_world[:, s_names.index(s_slots[slot]), :3, 3]
        t = world[:, t_names.index(t_slots[nxt]), :3, 3] - world[:, t_names.index(t_slots[slot]), :3, 3]
        s = s @ turn.T
        cos = np.einsum("ti,ti->t", s, t) / np.linalg.norm(s, axis=1) / np.linalg.norm(t, axis=1)
        errors.append(np.degrees(np.arccos(np.clip(cos, -1, 1))))
    assert np.mean(errors) < 2.0


def test_root_motion_on_the_object_moves_the_dog_as_the_fox_runs(scene):
    from marionette.bridge import compat
    from marionette.bridge.evaluated_pose import evaluated_world_matrices
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action

    bpy, loaded = scene
    fox, actions = loaded[FOX]
    dog = loaded[DOG][0]
    run = next(a for a in actions if a.name == "Run")
    _play(fox, run)
    outcome = retarget_action(fox, run, dog, scene_fps=24.0, options=RetargetOptions(root_motion="OBJECT", plant_feet=False), name="Run on object")
    world, frames = _played(dog, outcome)
    names = list(_skeleton(dog).names)
    pelvis = world[:, names.index("Bone"), :3, 3]
    # By hand: the Fox's own pelvis (b_Hip_01) travels across the ground as Blender plays its run.
    src = _skeleton(fox)
    fox_world = evaluated_world_matrices(fox, run.frame_range[0] + (frames - frames[0]), None)
    hip = fox_world[:, list(src.names).index("b_Hip_01"), :3, 3]
    fox_travel = np.linalg.norm((hip[-1] - hip[0])[:2])
    dog_travel = np.linalg.norm((pelvis[-1] - pelvis[0])[:2])
    assert fox_travel > 0.5  # the Fox's units: its pelvis stands 45 above its paws
    # The Dog's pelvis moves with its object: as far as the Fox's, scaled by the two pelvis heights
    # (the binding's) and the Dog object's scale (x1.215, read off the file).
    scale = outcome.binding.horizontal_scale * dog.matrix_world.to_scale()[0]
    assert dog_travel == pytest.approx(fox_travel * scale, rel=0.02)
    keyed = compat.channelbag(outcome.action, compat.action_slot_for(outcome.action, dog)).fcurves
    assert "location" in {fc.data_path for fc in keyed}  # the object's own location keys
    outcome = retarget_action(fox, run, dog, scene_fps=24.0, options=RetargetOptions(root_motion="ROOT_BONE", plant_feet=False), name="Run on root")
    assert "the target's pelvis has no root bone above it; travel stays on the pelvis" in outcome.report["warnings"]


PLANTED = [(FOX, "Survey", DOG), (DOG, "Walking", FOX), (DOG, "Idle", FOX)]


@pytest.mark.parametrize(("src_rel", "clip_name", "tgt_rel"), PLANTED, ids=[f"{c} onto {'dog' if t == DOG else 'fox'}" for _, c, t in PLANTED])
def test_planted_paws_slide_no_more_than_the_sources_and_the_body_keeps_its_directions(scene, src_rel, clip_name, tgt_rel):
    outcome = _retarget(scene, src_rel, clip_name, tgt_rel, plant=True)
    report = outcome.report
    assert set(report["planted_feet"]) == {"front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"}
    assert report["paw_slide"]
    for leg, p in report["paw_slide"].items():
        assert p["contact_frames"] > 0, leg
        assert p["slide"] <= p["source_slide"] + 1e-3, leg
    for chain in ("spine", "neck", "head", "tail"):
        assert report["chains"][chain]["mean_direction_error"] < 0.01, chain
    for chain in ("front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"):  # bent to hold the paws
        assert report["chains"][chain]["mean_direction_error"] < 5.0, chain
    assert report["planted_hip_drop"]["max"] < 0.2


def test_rolled_copies_of_each_quadruped_reproduce_every_bone(scene):
    from marionette.bridge.action_write import write_action
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.evaluated_pose import evaluated_world_matrices
    from tests.helpers.quadruped_rigs import rolled_clip

    bpy, loaded = scene
    rng = np.random.default_rng(11)
    fox, dog = loaded[FOX][0], loaded[DOG][0]
    run = next(a for a in loaded[FOX][1] if a.name == "Run")
    _play(fox, run)  # the Fox's glTF clips are read from what it plays (its NLA stack): unkeyed bones at rest
    base = _retarget(scene, FOX, "Run", DOG)
    want, _ = _played(dog, base)
    fox_copy, fox_turns = _copy(bpy, fox, rng, scramble=False)
    dog_copy, dog_turns = _copy(bpy, dog, rng, scramble=False)
    try:
        clip = clip_from_action(fox, run)
        rolled = write_action(fox_copy, rolled_clip(clip, _skeleton(fox), fox_turns), "Run rolled", fps=clip.fps)
        rolled["marionette_fps"] = run["marionette_fps"] if "marionette_fps" in run else clip.fps
        # The rolled Fox plays the same motion (checked on what Blender plays).
        _play(fox, run)
        _play(fox_copy, rolled)
        a = evaluated_world_matrices(fox, [1.0, 5.0], None)
        b = evaluated_world_matrices(fox_copy, [1.0, 5.0], None)
        np.testing.assert_allclose(a[..., :3, 3], b[..., :3, 3], atol=1e-3)
        out = _retarget(scene, FOX, "Run", DOG, source=fox_copy, target=dog_copy, action=rolled)
        got, _ = _played(dog_copy, out)
        names = list(_skeleton(dog).names)
        assert list(_skeleton(dog_copy).names) == names
        worst = 0.0
        for i, name in enumerate(names):
            r = dog_turns[name]
            ry = np.array([[np.cos(r), 0.0, np.sin(r)], [0.0, 1.0, 0.0], [-np.sin(r), 0.0, np.cos(r)]])
            w = want[:, i, :3, :3] / np.linalg.norm(want[:, i, :3, :3], axis=-2, keepdims=True) @ ry
            g = got[:, i, :3, :3] / np.linalg.norm(got[:, i, :3, :3], axis=-2, keepdims=True)
            rel = np.swapaxes(w, -1, -2) @ g
            worst = max(worst, float(np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1))).max()))
        assert worst < 0.1
    finally:
        bpy.data.objects.remove(fox_copy, do_unlink=True)
        bpy.data.objects.remove(dog_copy, do_unlink=True)


def _play(obj, action) -> None:
    """``obj`` plays ``action`` (through its slot for ``obj``: Blender picks one only for an
    action's first user), bones the action does not key at rest (the Fox's clips leave its hind
    paws unkeyed, which would otherwise keep the pose an earlier action left)."""
    from mathutils import Matrix

    from marionette.bridge import compat

    for pb in obj.pose.bones:
        pb.matrix_basis = Matrix.Identity(4)
    compat.assign_action(obj, action, compat.action_slot_for(action, obj))


def _skeleton(obj):
    from marionette.bridge.skeleton_read import skeleton_from_armature

    return skeleton_from_armature(obj)


def test_a_quadruped_onto_a_humanoid_is_refused_naming_both_and_changing_nothing(scene):
    from marionette.core.errors import MappingError
    from marionette.usecases.retarget import retarget_action

    bpy, loaded = scene
    from marionette.bridge.file_import import load_file

    person = load_file(shared_file("gltf/male_base_mesh_apose.glb")).armatures[0]
    fox, actions = loaded[FOX]
    before = len(bpy.data.actions)
    with pytest.raises(MappingError, match="not a humanoid rig.*maps as a quadruped"):
        retarget_action(fox, actions[0], person, scene_fps=24.0)
    assert len(bpy.data.actions) == before


def test_birds_described_in_mapping_files_retarget_from_file_to_file(tmp_path):
    """Two made-up birds (other wing and leg lengths and bone counts) saved as .blend files, each
    body described as chains in a mapping file, retargeted as the ``retarget`` command does with
    ``--source-mapping`` and ``--mapping``, judged on what Blender plays."""
    import bpy

    from marionette.bridge.action_write import create_armature, write_action
    from marionette.bridge.session import fresh_session, save_blend
    from marionette.core.mapping.bone_mapping import BoneMapping
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_files
    from tests.helpers.quadruped_rigs import bend_clip, bird, bird_body

    rigs = {"small": (bird(1.0, 1.0, 3, 3), 3, 3), "large": (bird(1.7, 0.6, 2, 4), 2, 4)}
    for name, (rig, wings, legs) in rigs.items():
        fresh_session()
        obj = create_armature(rig.skeleton, f"{name} bird", rig.ends)
        if name == "small":
            rng = np.random.default_rng(4)
            bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in rig.skeleton.names}
            write_action(obj, bend_clip(rig.skeleton, bends, frames=8, travel=0.3), "Flap")
        save_blend(tmp_path / f"{name}.blend")
        BoneMapping(body=bird_body(rig, wings, legs)).save(tmp_path / f"{name}.json")
    outcome = retarget_files(
        str(tmp_path / "small.blend"), str(tmp_path / "large.blend"), str(tmp_path / "out.blend"),
        mapping=str(tmp_path / "large.json"), source_mapping=str(tmp_path / "small.json"),
        options=RetargetOptions(plant_feet=False),
    )
    report = outcome.report
    assert report["body_plan"] == "chains"
    assert set(report["chains"]) == {"spine", "neck", "head", "tail", "wing.L", "wing.R", "leg.L", "leg.R"}
    for chain, c in report["chains"].items():
        assert c["mean_direction_error"] < 0.01, chain
    assert report["chains"]["wing.L"]["bones"] == 2 and report["chains"]["wing.L"]["source_bones"] == 3
    assert report["summary"]["travel"]["largest_gap_hip_heights"] < 1e-3
    assert (tmp_path / "out.blend").is_file()
    bpy.ops.wm.read_factory_settings(use_empty=True)


def test_retarget_clip_in_the_sidebar_takes_two_quadrupeds_and_fills_the_chain_rows(addon):
    """The sidebar's Retarget Clip (its operator, as a click runs it) on the Fox and the Dog: the
    rows fill with the chain slots, a second click retargets through the rows, and the Quality
    panel's data holds the per-chain figures (tests/operators/test_quadruped_sidebar.py draws it)."""
    bpy = addon
    from marionette.bridge.file_import import load_file

    fox = load_file(shared_file(FOX)).armatures[0]
    dog = load_file(shared_file(DOG)).armatures[0]
    s = bpy.context.scene.marionette
    s.source, s.target = fox, dog
    s.plant_feet = False
    before = set(bpy.data.actions)
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    rows = {row.slot: (row.source_bone, row.target_bone) for row in s.mapping}
    assert rows["front_leg_1.L"] == ("b_LeftUpperArm_09", "Bone.017")
    assert rows["hind_leg_4.L"] == ("b_LeftFoot02_018", "")
    assert rows["pelvis"] == ("b_Hip_01", "Bone")
    assert json.loads(s.last_report)["body_plan"] == "quadruped"
    first = set(bpy.data.actions) - before
    assert len(first) == 1 and dog.animation_data.action in first
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}  # now through the rows
    assert len(set(bpy.data.actions) - before) == 2
    # Auto Scale off: the sidebar's own travel scales, the report saying which were used.
    auto = json.loads(s.last_report)
    s.auto_scale = False
    s.horizontal_scale, s.vertical_scale = 0.25, 4.0
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    report = json.loads(s.last_report)
    assert report["travel_scales"] == [0.25, 4.0] != auto["travel_scales"]
    assert report["travel_gap"] < 0.01  # the played pelvis follows the scaled source

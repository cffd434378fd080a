"""The general control-rig resolver on game rigs generated in Blender from a plain humanoid (the
shared VRM and Quaternius characters' skeletons): its bones become deform bones that follow controls (custom
shapes, other names, another hierarchy, random rolls and offsets) through a world Copy Transforms,
a Child Of with its inverse set, a one-bone Armature constraint, or drivers copying the control's
channels one to one (:func:`tests.helpers.control_rig_variants.game_rig`).

A CMU walk retargeted onto each must key controls only and play, on the evaluated deform bones,
what the same walk retargeted onto the plain skeleton plays: the same directions within 0.1 deg
and the same heads. A deform bone held by what the solve cannot key back (an IK, a Damped Track
to an object) is refused, naming the bone and the constraint, with no action written.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.control_rig_variants import game_rig
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

#: Plain humanoids the game rigs are made from: the VRM character (A-pose, fingers) and the
#: Quaternius character (importer leaf bones, IK pole bones, two-segment fingers).
BASES = ["blend/vrm_addon_apose_rest.blend", "fbx/quaternius_male_casual.fbx"]
CLIP = "bvh/cmu/02_02_daz.bvh"
SAMPLES = 16


def _spec(obj):
    """The base armature's bones: names, parent names, armature-space rests, lengths."""
    bones = list(obj.data.bones)
    return (
        [b.name for b in bones],
        [b.parent.name if b.parent else None for b in bones],
        np.array([np.array(b.matrix_local) for b in bones]),
        np.array([b.length for b in bones]),
    )


def _armature(bpy, name: str, bones):
    """An armature object built from ``bones`` ``(name, parent, rest, length, deform)``."""
    from mathutils import Matrix

    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    for n, _, rest, length, deform in bones:
        eb = arm.edit_bones.new(n)
        eb.head, eb.tail = (0.0, 0.0, 0.0), (0.0, 1.0, 0.0)
        eb.matrix = Matrix(rest.tolist())
        eb.length = length
        eb.use_deform = deform
    for n, parent, *_ in bones:
        if parent is not None:
            arm.edit_bones[n].parent = arm.edit_bones[parent]
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def _wire(bpy, obj, rig) -> None:
    """Custom shapes on the controls, and each deform bone made to follow its control."""
    widget = bpy.data.objects.new("WGT_ring", bpy.data.meshes.new("WGT_ring"))
    widget.data.from_pydata([(np.cos(a), np.sin(a), 0.0) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)], [(k, (k + 1) % 8) for k in range(8)], [])
    for n, _, _, _, deform in rig.bones:
        if not deform:
            obj.pose.bones[n].custom_shape = widget
    for deform, control in rig.control_of.items():
        pb = obj.pose.bones[deform]
        if rig.kind == "copy_transforms":
            c = pb.constraints.new("COPY_TRANSFORMS")
            c.target, c.subtarget = obj, control
        elif rig.kind == "child_of":
            c = pb.constraints.new("CHILD_OF")
            c.target, c.subtarget = obj, control
            c.inverse_matrix = (obj.matrix_world @ obj.data.bones[control].matrix_local).inverted()
        elif rig.kind == "armature":
            c = pb.constraints.new("ARMATURE")
            t = c.targets.new()
            t.target, t.subtarget, t.weight = obj, control, 1.0
        else:
            for prop, count in (("rotation_quaternion", 4), ("location", 3)):
                for i in range(count):
                    fc = pb.driver_add(prop, i)
                    fc.driver.type = "AVERAGE"
                    var = fc.driver.variables.new()
                    var.type = "SINGLE_PROP"
                    var.targets[0].id = obj
                    var.targets[0].data_path = f'pose.bones["{control}"].{prop}[{i}]'
    bpy.context.view_layer.update()


@pytest.fixture(scope="module", params=BASES, ids=lambda b: b.split("/")[-1].split(".")[0])
def scene(request):
    """The walk, the plain skeleton with the walk retargeted onto it (the reference), and the
    base skeleton's spec; built once for the module."""
    import bpy  # noqa: I001
    import addon_utils

    from marionette.bridge.file_import import load_file
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action

    bpy.ops.wm.read_factory_settings(use_empty=True)
    for module in ("io_anim_bvh", "io_scene_fbx", "io_scene_gltf2"):
        addon_utils.enable(module, default_set=True)
    bpy.context.scene.render.fps = 24
    base = max(load_file(shared_file(request.param)).armatures, key=lambda a: len(a.data.bones))
    spec = _spec(base)
    names, parents, rests, lengths = spec
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    loaded = load_file(shared_file(CLIP))
    source, action = loaded.armatures[0], loaded.actions[0]
    plain = _armature(bpy, "plain", [(n, p, r, ln, True) for n, p, r, ln in zip(names, parents, rests, lengths, strict=True)])
    options = RetargetOptions(plant_feet=False)
    reference = retarget_action(source, action, plain, scene_fps=24.0, name="walk", options=options)
    assert reference.report["control_rig"] is None
    frames = np.linspace(reference.report["clip"]["first_frame"], reference.report["clip"]["last_frame"], SAMPLES).round()
    mapped = sorted(set(reference.target_mapping.bones().values()))
    from marionette.bridge.control_rig import bone_placements

    played = bone_placements(plain, frames, mapped)
    moved = _moved_by_the_clip(bpy, plain, frames, mapped)
    assert len(moved) >= 15, moved  # the body and the limbs
    yield bpy, source, action, options, spec, reference, frames, mapped, played, moved, _hung_elsewhere(reference.target_mapping, plain)
    bpy.ops.wm.read_factory_settings(use_empty=True)


def _keyed_bones(obj, action) -> set[str]:
    from marionette.bridge import compat

    out = set()
    for fc in compat.action_fcurves(action, compat.action_slot_for(action, obj)):
        assert fc.data_path.startswith('pose.bones["'), fc.data_path
        out.add(fc.data_path[len('pose.bones["') :].split('"]', 1)[0])
    return out


def _angles(a, b):
    ya = a[..., :3, 1] / np.linalg.norm(a[..., :3, 1], axis=-1, keepdims=True)
    yb = b[..., :3, 1] / np.linalg.norm(b[..., :3, 1], axis=-1, keepdims=True)
    return np.degrees(np.arccos(np.clip(np.sum(ya * yb, axis=-1), -1.0, 1.0)))


VARIANTS = [
    pytest.param("copy_transforms", False, id="copy_transforms-aligned"),
    pytest.param("copy_transforms", True, id="copy_transforms-rolled"),
    pytest.param("child_of", True, id="child_of"),
    pytest.param("armature", True, id="armature"),
    pytest.param("drivers", True, id="drivers"),
]


def _hung_elsewhere(mapping, plain) -> set[str]:
    """Mapped bones whose parent in the plain skeleton is not the bone of their body parent (the
    nearest mapped slot above theirs): Quaternius hangs the right thumb from the index's
    metacarpal. A rig whose deform bones have no parents says nothing of that, so there the
    thumb hangs from the hand, and its head (and its next segment's) follows the hand rather than
    the metacarpal."""
    from marionette.core.mapping.humanoid import SLOT_PARENT

    bones = mapping.bones()
    body = {}
    for slot, bone in bones.items():
        up = SLOT_PARENT.get(slot)
        while up is not None and up not in bones:
            up = SLOT_PARENT.get(up)
        body[bone] = bones[up] if up is not None else None
    out = set()
    for bone, up in body.items():
        parent = plain.data.bones[bone].parent
        if up is not None and (parent is None or parent.name != up):
            out.add(bone)
    grown = True
    while grown:  # and the bones that hang from those
        more = {b for b, up in body.items() if up in out} - out
        out |= more
        grown = bool(more)
    return out


def _moved_by_the_clip(bpy, plain, frames, mapped) -> list[str]:
    """The mapped bones whose local rotation the plain retarget moves off the rest (the bones
    the clip drives; the others, fingers of a clip without fingers, hang from their parents)."""
    from marionette.bridge.control_rig import bone_placements

    names = [b.name for b in plain.data.bones]
    world = bone_placements(plain, frames, names)
    out = []
    for b in mapped:
        bone = plain.data.bones[b]
        rest = np.array(bone.matrix_local)
        if bone.parent is None:
            local, rest_local = world[:, names.index(b)], rest
        else:
            p = names.index(bone.parent.name)
            local = np.linalg.inv(world[:, p]) @ world[:, names.index(b)]
            rest_local = np.linalg.inv(np.array(bone.parent.matrix_local)) @ rest
        if _angles(local, rest_local[None]).max() > 0.01 or np.abs(local[:, :3, :3] - rest_local[:3, :3]).max() > 1e-4:
            out.append(b)
    return out


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind, rolled", VARIANTS)
def test_a_game_rig_is_keyed_on_its_controls_and_its_deform_bones_play_the_plain_retarget(scene, kind, rolled, seed, capsys):
    bpy, source, action, options, spec, reference, frames, mapped, played, moved, elsewhere = scene
    from marionette.bridge.control_rig import bone_placements
    from marionette.usecases.retarget import retarget_action

    rig = game_rig(*spec, kind=kind, seed=seed, rolled=rolled)
    obj = _armature(bpy, f"game_{kind}_{seed}", rig.bones)
    _wire(bpy, obj, rig)
    try:
        outcome = retarget_action(
            source, action, obj, scene_fps=24.0, name="walk", options=options, target_mapping=reference.target_mapping
        )
        described = outcome.report["control_rig"]
        assert described is not None and described["kind"] == "found", described
        keyed = _keyed_bones(obj, outcome.action)
        controls = set(rig.control_of.values())
        assert keyed and keyed <= controls, sorted(keyed - controls)
        # Every mapped bone's control, and those of the bones between mapped bones (placed too).
        assert {rig.control_of[b] for b in mapped} <= keyed
        pick = [mapped.index(b) for b in moved]
        got = bone_placements(obj, frames, moved)
        angle = _angles(got, played[:, pick])
        height = float(np.ptp(spec[2][:, :3, 3], axis=0).max())
        heads = np.linalg.norm(got[..., :3, 3] - played[:, pick][..., :3, 3], axis=-1) / height
        if kind in ("child_of", "armature"):  # no parents on the deform bones: heads hang from the body parent
            heads[:, [k for k, b in enumerate(moved) if b in elsewhere]] = 0.0
        worst = moved[int(np.argmax(angle.max(axis=0)))]
        summary = outcome.report["summary"]
        with capsys.disabled():
            print(f"\n{kind}{' rolled' if rolled else ''} seed {seed}: {len(keyed)} controls keyed; deform directions off the plain retarget by "
                  f"max {angle.max():.4f} deg ({worst}), heads by max {100 * heads.max():.4f} % of the height; its own summary: "
                  f"limb directions {summary['mean_limb_direction_error']:.3f} deg, hips height {100 * summary['hips_height_error']:.3f} %")
        assert angle.max() <= 0.1, (worst, angle.max())
        assert heads.max() <= 1e-3, " ".join(f"{m}={float(h):.4f}" for h, m in zip(heads.max(axis=0), moved, strict=True) if h > 1e-3)
        assert outcome.report["summary"]["mean_limb_direction_error"] <= 1.5
    finally:
        bpy.data.objects.remove(obj, do_unlink=True)


@pytest.mark.parametrize("held", ["IK", "DAMPED_TRACK"])
def test_a_deform_bone_held_by_what_no_control_keys_back_is_refused_and_nothing_is_written(scene, held):
    bpy, source, action, options, spec, reference, *_ = scene
    from marionette.core.errors import RigError
    from marionette.usecases.retarget import retarget_action

    rig = game_rig(*spec, kind="copy_transforms", seed=3)
    obj = _armature(bpy, f"game_{held}", rig.bones)
    _wire(bpy, obj, rig)
    bone = reference.target_mapping.bones()["forearm.L"]
    pb = obj.pose.bones[bone]
    empty = None
    if held == "IK":
        pb.constraints.remove(pb.constraints[0])
        c = pb.constraints.new("IK")
        c.target, c.subtarget, c.chain_count = obj, rig.control_of[reference.target_mapping.bones()["hand.L"]], 2
        words = rf"'{bone}' \(Ik 'IK'\)"
    else:
        empty = bpy.data.objects.new("aim", None)
        bpy.context.scene.collection.objects.link(empty)
        c = pb.constraints.new("DAMPED_TRACK")
        c.target = empty
        words = rf"'{bone}' \(Damped Track 'Damped Track'\)"
    before = {a.name: a.users for a in bpy.data.actions}
    try:
        with pytest.raises(RigError, match=words) as got:
            retarget_action(source, action, obj, scene_fps=24.0, name="walk", options=options, target_mapping=reference.target_mapping)
        assert "nothing was written" in str(got.value)
        assert {a.name: a.users for a in bpy.data.actions} == before
        assert obj.animation_data is None or obj.animation_data.action is None
    finally:
        bpy.data.objects.remove(obj, do_unlink=True)
        if empty is not None:
            bpy.data.objects.remove(empty, do_unlink=True)


@pytest.mark.parametrize("scene", BASES[:1], indirect=True, ids=["vrm"])
@pytest.mark.parametrize(
    "kind, rolled",
    [
        pytest.param("copy_transforms", False, id="copy_transforms-aligned"),
        pytest.param("drivers", True, id="drivers"),
        pytest.param("child_of", True, id="child_of"),
        pytest.param("armature", True, id="armature"),
    ],
)
def test_mapped_bones_the_clip_does_not_move_follow_their_body_parent_as_on_the_plain_skeleton(scene, kind, rolled):
    """Fingers of a clip without fingers: on the plain skeleton they hang from the hand; on a rig
    whose deform bones have no parents (Child Of, Armature) they must too, not stay as at rest."""
    bpy, source, action, options, spec, reference, frames, mapped, played, moved, _ = scene
    from marionette.bridge.control_rig import bone_placements
    from marionette.usecases.retarget import retarget_action

    still = [b for b in mapped if b not in moved]
    assert still, "the clip moves every mapped bone"
    rig = game_rig(*spec, kind=kind, seed=1, rolled=rolled)
    obj = _armature(bpy, f"game_still_{kind}", rig.bones)
    _wire(bpy, obj, rig)
    try:
        retarget_action(source, action, obj, scene_fps=24.0, name="walk", options=options, target_mapping=reference.target_mapping)
        pick = [mapped.index(b) for b in still]
        angle = _angles(bone_placements(obj, frames, still), played[:, pick])
        assert angle.max() <= 0.1, (still[int(np.argmax(angle.max(axis=0)))], angle.max())
    finally:
        bpy.data.objects.remove(obj, do_unlink=True)

"""Auto-mapping on every real rig in ``tests/data`` and on Rigify's metarigs (docs/mapping.md).

Each expected mapping below was written by hand from the rig's own bone hierarchy (dumped from
the imported armature: names, parents, head and tail positions), applying the profile's rules:

* hips: the bone that carries both legs and the spine;
* spine / chest / upper chest: the bones from the hips up to the bone the clavicles hang from
  (with more than three, the first, the middle and the last; with a convention's own names,
  those names);
* neck: the first bone above the clavicles' parent; head: the top of that chain;
* clavicle: the bone between the spine and the long upper-arm bone; hand: the end of the
  forearm; foot: where the leg turns forward; toes: the one bone continuing the foot forward;
* helpers (CMU ``LHipJoint``, MakeHuman ``__`` joints, ``pelvis.L``, heels, palms, end markers,
  IK poles) and intermediate spine/neck segments fill no slot.

Files are loaded the way the add-on loads them (:func:`marionette.bridge.file_import.load_file`).
"""

from __future__ import annotations

import pytest

from marionette.core.errors import FileFormatError, MappingError
from marionette.core.mapping.humanoid import FINGERS, FRAME_SLOTS, MINIMUM_SLOTS, finger_slot
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


def sides(**parts):
    """``part=("left name", "right name")`` -> {"part.L": left, "part.R": right}."""
    out = {}
    for part, (left, right) in parts.items():
        out[f"{part}.L"] = left
        out[f"{part}.R"] = right
    return out


def fingers(pattern, words, segments=(1, 2, 3), side_words=("L", "R")):
    """Finger slots from a name pattern with ``{f}`` (finger word), ``{n}`` (segment) and ``{s}``."""
    out = {}
    for side, s in zip("LR", side_words, strict=True):
        for finger, word in zip(FINGERS, words, strict=True):
            if word is None:
                continue
            for k, n in enumerate(segments, start=1):
                out[finger_slot(finger, k, side)] = pattern.format(f=word, n=n, s=s)
    return out


CMU_MOTIONBUILDER = {
    "hips": "Hips", "spine": "LowerBack", "chest": "Spine", "upper_chest": "Spine1", "neck": "Neck", "head": "Head",
    **sides(
        shoulder=("LeftShoulder", "RightShoulder"), upper_arm=("LeftArm", "RightArm"),
        forearm=("LeftForeArm", "RightForeArm"), hand=("LeftHand", "RightHand"),
        thigh=("LeftUpLeg", "RightUpLeg"), shin=("LeftLeg", "RightLeg"), foot=("LeftFoot", "RightFoot"),
        toes=("LeftToeBase", "RightToeBase"),
    ),
    # One thumb bone and one index bone after the palm ("LeftFingerBase", unmapped).
    **sides(thumb_1=("LThumb", "RThumb"), index_1=("LeftHandIndex1", "RightHandIndex1")),
}  # fmt: skip

CMU_DAZ = {
    "hips": "hip", "spine": "abdomen", "chest": "chest", "neck": "neck", "head": "head",
    **sides(
        shoulder=("lCollar", "rCollar"), upper_arm=("lShldr", "rShldr"), forearm=("lForeArm", "rForeArm"),
        hand=("lHand", "rHand"), thigh=("lThigh", "rThigh"), shin=("lShin", "rShin"), foot=("lFoot", "rFoot"),
        eye=("leftEye", "rightEye"),
    ),
    # Two segments per finger; "lButtock" is a hip helper.
    **fingers("{s}{f}{n}", ("Thumb", "Index", "Mid", "Ring", "Pinky"), (1, 2), ("l", "r")),
}  # fmt: skip

MAKEHUMAN_WALK = {
    # "Root" carries both "Hips" (legs only) and "Spine1".
    "hips": "Root", "spine": "Spine1", "chest": "Spine2", "upper_chest": "Spine3", "neck": "Neck", "head": "Head",
    "jaw": "Jaw",
    **sides(
        shoulder=("Clavicle_L", "Clavicle_R"), upper_arm=("UpArm_L", "UpArm_R"), forearm=("LoArm_L", "LoArm_R"),
        hand=("Hand_L", "Hand_R"), thigh=("UpLeg_L", "UpLeg_R"), shin=("LoLeg_L", "LoLeg_R"),
        foot=("Foot_L", "Foot_R"), toes=("Toe_L", "Toe_R"), eye=("Eye_L", "Eye_R"),
    ),
    **fingers("{f}{n}_{s}", ("Thumb", "Index", "Middle", "Ring", "Pinky")),
}  # fmt: skip

MAKEHUMAN_TPOSE = {
    # Five spine bones from "root" to "spine01" (where the clavicles hang): first, middle, last.
    "hips": "root", "spine": "spine05", "chest": "spine03", "upper_chest": "spine01", "neck": "neck01",
    "head": "head", "jaw": "jaw",
    **sides(
        shoulder=("clavicle.L", "clavicle.R"), upper_arm=("upperarm01.L", "upperarm01.R"),
        upper_arm_twist=("upperarm02.L", "upperarm02.R"), forearm=("lowerarm01.L", "lowerarm01.R"),
        forearm_twist=("lowerarm02.L", "lowerarm02.R"), hand=("wrist.L", "wrist.R"),
        thigh=("upperleg01.L", "upperleg01.R"), thigh_twist=("upperleg02.L", "upperleg02.R"),
        shin=("lowerleg01.L", "lowerleg01.R"), shin_twist=("lowerleg02.L", "lowerleg02.R"),
        foot=("foot.L", "foot.R"), eye=("eye.L", "eye.R"),
    ),
    # finger1 is the thumb; the foot carries five toes, so no single toes bone.
    **fingers("finger{f}-{n}.{s}", ("1", "2", "3", "4", "5")),
}  # fmt: skip

QUATERNIUS = {
    # "Body" carries the legs and "Hips"; "Hips" carries only the spine. The feet hang from the
    # root bone (IK style), each starting where its shin ends.
    "hips": "Body", "spine": "Abdomen", "chest": "Torso", "neck": "Neck", "head": "Head",
    **sides(
        shoulder=("Shoulder.L", "Shoulder.R"), upper_arm=("UpperArm.L", "UpperArm.R"),
        forearm=("LowerArm.L", "LowerArm.R"), hand=("Palm.L", "Palm.R"), thigh=("UpperLeg.L", "UpperLeg.R"),
        shin=("LowerLeg.L", "LowerLeg.R"), foot=("Foot.L", "Foot.R"),
        thumb_1=("Thumb1.L", "Thumb1.R"), thumb_2=("Thumb2.L", "Thumb2.R"),
        # The four fingers are one mitten beside the thumb: the index, as by shape.
        index_1=("MiddleHand.L", "MiddleHand.R"), index_2=("Fingers.L", "Fingers.R"),
    ),
}  # fmt: skip

RIGIFY_BODY = {
    "hips": "spine", "spine": "spine.001", "chest": "spine.002", "upper_chest": "spine.003", "neck": "spine.004",
    "head": "spine.006",
    **sides(
        shoulder=("shoulder.L", "shoulder.R"), upper_arm=("upper_arm.L", "upper_arm.R"),
        forearm=("forearm.L", "forearm.R"), hand=("hand.L", "hand.R"), thigh=("thigh.L", "thigh.R"),
        shin=("shin.L", "shin.R"), foot=("foot.L", "foot.R"), toes=("toe.L", "toe.R"),
    ),
}  # fmt: skip
RIGIFY_FINGERS = fingers("{f}.0{n}.{s}", ("thumb", "f_index", "f_middle", "f_ring", "f_pinky"))

MALE_BASE = {
    **RIGIFY_BODY,
    # Rigify names, but the neck chain stops at spine.005, which is the head here.
    "head": "spine.005",
    **RIGIFY_FINGERS,
}

VRM = {
    "hips": "hips", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head",
    **sides(
        shoulder=("shoulder.L", "shoulder.R"), upper_arm=("upper_arm.L", "upper_arm.R"),
        forearm=("lower_arm.L", "lower_arm.R"), hand=("hand.L", "hand.R"), thigh=("upper_leg.L", "upper_leg.R"),
        shin=("lower_leg.L", "lower_leg.R"), foot=("foot.L", "foot.R"), toes=("toes.L", "toes.R"),
        eye=("eye.L", "eye.R"),
    ),
    **fingers("{f}.{n}.{s}", ("thumb", "index", "middle", "ring", "little"), ("proximal", "intermediate", "distal")),
}  # fmt: skip

RIGGED_FIGURE = {
    # No clavicles: the arm chains start at the shoulder joint. leg_joint_*_5 is the ball of the foot.
    "hips": "torso_joint_1", "spine": "torso_joint_2", "chest": "torso_joint_3", "neck": "neck_joint_1",
    "head": "neck_joint_2",
    **sides(
        upper_arm=("arm_joint_L_1", "arm_joint_R_1"), forearm=("arm_joint_L_2", "arm_joint_R_2"),
        hand=("arm_joint_L_3", "arm_joint_R_3"), thigh=("leg_joint_L_1", "leg_joint_R_1"),
        shin=("leg_joint_L_2", "leg_joint_R_2"), foot=("leg_joint_L_3", "leg_joint_R_3"),
        toes=("leg_joint_L_5", "leg_joint_R_5"),
    ),
}  # fmt: skip

CESIUM_MAN = {
    # The left arm's numbers run backwards (__4_ at the shoulder); the hierarchy decides.
    "hips": "Skeleton_torso_joint_1", "spine": "Skeleton_torso_joint_2", "chest": "torso_joint_3",
    "neck": "Skeleton_neck_joint_1", "head": "Skeleton_neck_joint_2",
    **sides(
        upper_arm=("Skeleton_arm_joint_L__4_", "Skeleton_arm_joint_R"),
        forearm=("Skeleton_arm_joint_L__3_", "Skeleton_arm_joint_R__2_"),
        hand=("Skeleton_arm_joint_L__2_", "Skeleton_arm_joint_R__3_"),
        thigh=("leg_joint_L_1", "leg_joint_R_1"), shin=("leg_joint_L_2", "leg_joint_R_2"),
        foot=("leg_joint_L_3", "leg_joint_R_3"), toes=("leg_joint_L_5", "leg_joint_R_5"),
    ),
}  # fmt: skip

# file, expected mapping, conflicts the mapper must report (substrings), convention
REAL_RIGS = {
    "cmu_motionbuilder": ("bvh/cmu/12_03_motionbuilder.bvh", CMU_MOTIONBUILDER, [], "cmu_motionbuilder"),
    "cmu_daz": ("bvh/cmu/02_02_daz.bvh", CMU_DAZ, [], "daz_poser"),
    "makehuman_walk_zup": ("bvh/makehuman/walk1_zup.bvh", MAKEHUMAN_WALK, [], "makehuman_game"),
    "makehuman_tpose_zup": ("bvh/makehuman/tpose_zup.bvh", MAKEHUMAN_TPOSE, [], "makehuman"),
    "quaternius": ("fbx/quaternius_male_casual.fbx", QUATERNIUS, [], "quaternius"),
    "male_base_apose": ("gltf/male_base_mesh_apose.glb", MALE_BASE, ["'spine.005'"], "rigify_metarig"),
    "vrm_apose": ("blend/vrm_addon_apose_rest.blend", VRM, [], "vrm"),
    "rigged_figure": ("gltf/khronos_rigged_figure.glb", RIGGED_FIGURE, [], None),
    "cesium_man": ("gltf/khronos_cesium_man.glb", CESIUM_MAN, [], None),
}


def _map_armature(obj):
    from marionette.bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
    from marionette.core.mapping.auto_map import auto_map_skeleton

    skeleton = skeleton_from_armature(obj)
    _, tails = rest_heads_tails(obj, skeleton)
    return auto_map_skeleton(skeleton, tails)


def _load_armature(relative):
    from marionette.bridge.file_import import load_file

    loaded = load_file(shared_file(relative))
    assert len(loaded.armatures) == 1, [a.name for a in loaded.armatures]
    return loaded.armatures[0]


def _compare(mapping, expected):
    got = mapping.bones()
    checked = set(MINIMUM_SLOTS) | set(FRAME_SLOTS) | set(expected)
    for slot in sorted(checked):
        assert got.get(slot) == expected.get(slot), f"{slot}: expected {expected.get(slot)!r}, got {got.get(slot)!r}"
    # Fingers only where the rig has them: no finger slot beyond the expected ones.
    extra = {s: b for s, b in got.items() if s not in expected and s.split("_")[0] in FINGERS}
    assert not extra, f"unexpected finger slots {extra}"


@pytest.mark.slow
@pytest.mark.parametrize("rig", sorted(REAL_RIGS))
def test_real_rig_maps_to_its_hand_written_anatomy(blender, rig):
    relative, expected, conflicts, convention = REAL_RIGS[rig]
    mapping = _map_armature(_load_armature(relative))
    _compare(mapping, expected)
    mapping.require_humanoid()
    assert mapping.convention == convention
    assert len(mapping.conflicts) == len(conflicts), mapping.conflicts
    for want, got in zip(conflicts, mapping.conflicts, strict=True):
        assert want in got
    for slot in MINIMUM_SLOTS:
        assert mapping.slots[slot].confidence >= 0.5, (slot, mapping.slots[slot])
        assert mapping.slots[slot].reason


@pytest.mark.parametrize(
    "adder, expected",
    [
        ("armature_basic_human_metarig_add", RIGIFY_BODY),
        (
            "armature_human_metarig_add",
            {**RIGIFY_BODY, **RIGIFY_FINGERS, "jaw": "jaw", **sides(eye=("eye.L", "eye.R"))},
        ),
    ],
)
def test_rigify_metarigs_map_to_their_anatomy(blender, adder, expected):
    getattr(blender.ops.object, adder)()
    mapping = _map_armature(blender.context.active_object)
    _compare(mapping, expected)
    assert mapping.convention == "rigify_metarig"
    assert mapping.conflicts == []


def test_a_zup_clip_imported_lying_on_its_back_maps_the_same(blender):
    # Blender's BVH importer without axis options turns this Z-up file onto its back.
    blender.ops.import_anim.bvh(filepath=str(shared_file("bvh/makehuman/walk1_zup.bvh")))
    obj = blender.context.active_object
    heads = [b.head_local for b in obj.data.bones]
    assert max(abs(h.y) for h in heads) > max(abs(h.z) for h in heads)  # really lying along Y
    _compare(_map_armature(obj), MAKEHUMAN_WALK)


def test_a_character_facing_plus_x_maps_the_same(blender):
    # The male base mesh faces +X in the world; baking the object's turn into the rest makes its
    # armature space face +X too.
    obj = _load_armature("gltf/male_base_mesh_apose.glb")
    blender.ops.object.select_all(action="DESELECT")
    obj.select_set(True)
    blender.context.view_layer.objects.active = obj
    blender.ops.object.transform_apply(location=False, rotation=True, scale=False)
    toe = obj.data.bones["toe.L"]
    assert toe.tail_local.x - obj.data.bones["foot.L"].head_local.x > 0.1  # toes point +X
    _compare(_map_armature(obj), MALE_BASE)


@pytest.mark.parametrize(
    "relative, words",
    [
        ("gltf/khronos_fox_quadruped.glb", ("quadruped", "upright spine from the hips to the head")),
        ("fbx/quaternius_dog_quadruped.fbx", ("quadruped", "upright spine from the hips to the head")),
    ],
)
def test_quadrupeds_are_refused(blender, relative, words):
    mapping = _map_armature(_load_armature(relative))
    with pytest.raises(MappingError) as err:
        mapping.require_humanoid()
    for w in words:
        assert w in str(err.value)


def test_a_two_bone_rig_is_refused_naming_the_missing_slots(blender):
    mapping = _map_armature(_load_armature("gltf/khronos_simple_skin.gltf"))
    with pytest.raises(MappingError) as err:
        mapping.require_humanoid()
    msg = str(err.value)
    for slot in MINIMUM_SLOTS:
        assert slot in msg


def test_a_file_without_armature_is_refused_by_the_loader(blender):
    from marionette.bridge.file_import import load_file

    with pytest.raises(FileFormatError, match="no armature"):
        load_file(shared_file("gltf/kenney_character_no_armature.glb"))

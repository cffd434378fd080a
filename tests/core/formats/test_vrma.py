"""The normalised VRM humanoid (VRM 1.0 ``tpose.md``) and the ``VRMC_vrm_animation`` JSON checked
against the published schema's fields (vrm-c/vrm-specification,
``specification/VRMC_vrm_animation-1.0/schema``), plus the glb container's round trip."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from marionette.core.errors import MarionetteError
from marionette.core.formats.vrma import (
    BLENDER_FROM_GLTF,
    BONE_REST,
    EXTENSION,
    HUMAN_BONES,
    REQUIRED,
    SCHEMA_BONES,
    add_extension,
    drop_unused_data,
    humanoid_channels_only,
    normalised_bones,
    normalised_rig,
    read_glb,
    schema_problems,
    vrma_extension,
    write_glb,
)
from marionette.core.mapping.humanoid import SLOTS

# The properties of VRMC_vrm_animation.humanoid.humanBones.schema.json, as the schema lists them.
SCHEMA_HUMAN_BONES = """
hips spine chest upperChest neck head jaw
leftUpperLeg leftLowerLeg leftFoot leftToes rightUpperLeg rightLowerLeg rightFoot rightToes
leftShoulder leftUpperArm leftLowerArm leftHand rightShoulder rightUpperArm rightLowerArm rightHand
leftThumbMetacarpal leftThumbProximal leftThumbDistal leftIndexProximal leftIndexIntermediate leftIndexDistal
leftMiddleProximal leftMiddleIntermediate leftMiddleDistal leftRingProximal leftRingIntermediate leftRingDistal
leftLittleProximal leftLittleIntermediate leftLittleDistal
rightThumbMetacarpal rightThumbProximal rightThumbDistal rightIndexProximal rightIndexIntermediate rightIndexDistal
rightMiddleProximal rightMiddleIntermediate rightMiddleDistal rightRingProximal rightRingIntermediate rightRingDistal
rightLittleProximal rightLittleIntermediate rightLittleDistal
""".split()

# VRM 1.0 humanoid.md: each bone's parent in the humanoid hierarchy (the nearest one present).
VRM_PARENTS = {
    "spine": "hips", "chest": "spine", "upperChest": "chest", "neck": "upperChest", "head": "neck",
    "leftUpperLeg": "hips", "leftLowerLeg": "leftUpperLeg", "leftFoot": "leftLowerLeg", "leftToes": "leftFoot",
    "leftShoulder": "upperChest", "leftUpperArm": "leftShoulder", "leftLowerArm": "leftUpperArm", "leftHand": "leftLowerArm",
    "leftThumbMetacarpal": "leftHand", "leftThumbProximal": "leftThumbMetacarpal", "leftThumbDistal": "leftThumbProximal",
    "leftIndexProximal": "leftHand", "leftIndexIntermediate": "leftIndexProximal", "leftIndexDistal": "leftIndexIntermediate",
    "leftLittleProximal": "leftHand", "leftLittleIntermediate": "leftLittleProximal", "leftLittleDistal": "leftLittleIntermediate",
}

BY_NAME = {b.name: b for b in HUMAN_BONES}


def direction(name: str) -> np.ndarray:
    b = BY_NAME[name]
    d = np.subtract(b.tail, b.head)
    return d / np.linalg.norm(d)


def test_bone_names_are_the_schemas_and_every_required_bone_is_there():
    assert SCHEMA_BONES == set(SCHEMA_HUMAN_BONES)
    names = [b.name for b in HUMAN_BONES]
    assert len(names) == len(set(names))
    assert set(names) <= set(SCHEMA_HUMAN_BONES)
    assert set(SCHEMA_HUMAN_BONES) - set(names) == {"jaw"}  # no clip of a body carries a jaw
    assert set(REQUIRED) <= set(names)
    assert {b.slot for b in HUMAN_BONES} <= set(SLOTS)


def test_hierarchy_is_vrms_and_parents_come_first():
    seen: set[str] = set()
    for b in HUMAN_BONES:
        assert b.parent is None or b.parent in seen, b.name
        seen.add(b.name)
    for child, parent in VRM_PARENTS.items():
        assert BY_NAME[child].parent == parent
        mirrored = child.replace("left", "right")
        assert BY_NAME[mirrored].parent == parent.replace("left", "right")
    assert BY_NAME["hips"].parent is None


def test_t_pose_as_vrm_defines_it():
    # Standing toward +Z, Y up: the character's left is up x forward = +X.
    assert np.allclose(np.cross([0, 1, 0], [0, 0, 1]), [1, 0, 0])
    for side, sign in (("left", 1.0), ("right", -1.0)):
        for part in ("UpperArm", "LowerArm", "Hand", *(f"{f}{s}" for f in ("Index", "Middle", "Ring", "Little") for s in ("Proximal", "Intermediate", "Distal"))):
            assert np.allclose(direction(side + part), [sign, 0, 0], atol=1e-12), side + part  # along ±X, level
        for part in ("ThumbMetacarpal", "ThumbProximal", "ThumbDistal"):  # 45° between ±X and +Z, level
            assert np.allclose(direction(side + part), np.array([sign, 0, 1]) / np.sqrt(2), atol=1e-12)
        for part in ("UpperLeg", "LowerLeg"):
            assert np.allclose(direction(side + part), [0, -1, 0], atol=1e-12)
        foot, toes = direction(side + "Foot"), direction(side + "Toes")
        assert foot[0] == 0 and foot[2] > 0 and foot[1] < 0  # ankle to the ball of the foot, forward and down
        assert np.allclose(toes, [0, 0, 1], atol=1e-12)
    for name in ("hips", "spine", "chest", "upperChest", "neck", "head"):
        assert np.allclose(direction(name), [0, 1, 0], atol=1e-12)
        assert BY_NAME[name].head[0] == 0.0
    # Symmetric about X = 0.
    for b in HUMAN_BONES:
        if b.name.startswith("left"):
            r = BY_NAME["right" + b.name[4:]]
            assert np.allclose(r.head, np.multiply(b.head, [-1, 1, 1])) and np.allclose(r.tail, np.multiply(b.tail, [-1, 1, 1]))
    # Grounded at Y = 0, nothing below; the head's top at the full height.
    points = np.array([p for b in HUMAN_BONES for p in (b.head, b.tail)])
    assert points[:, 1].min() >= 0.0 and points[:, 1].min() < 0.02
    assert points[:, 1].max() == pytest.approx(1.0)
    # Chains are continuous: a chain's child starts where its parent ends.
    for child, parent in (("spine", "hips"), ("neck", "upperChest"), ("leftLowerArm", "leftUpperArm"), ("leftHand", "leftLowerArm"),
                          ("leftLowerLeg", "leftUpperLeg"), ("leftToes", "leftFoot"), ("leftIndexDistal", "leftIndexIntermediate")):
        assert np.allclose(BY_NAME[child].head, BY_NAME[parent].tail)


def test_rig_in_blenders_axes_has_no_rest_rotation_in_gltfs():
    rig = normalised_rig(SLOTS, height=1.7)
    sk = rig.skeleton
    rest = sk.rest_placements()
    gltf_from_blender = BLENDER_FROM_GLTF.T
    # Blender's glTF exporter writes a root bone's rest as (glTF from Blender) @ matrix_local and a
    # child's relative to its parent: both are the identity when every rest rotation is BONE_REST.
    for i in range(len(sk)):
        assert np.allclose(gltf_from_blender @ rest[i, :3, :3], np.eye(3), atol=1e-12)
        assert np.allclose(sk.parent_frames[i, :3, :3], np.eye(3) if sk.parents[i] >= 0 else BONE_REST, atol=1e-12)
    # Blender's axes: up +Z, the character faces -Y, its left at +X; hips at 0.530 of 1.7 m.
    hips = rest[sk.index("hips"), :3, 3]
    assert hips == pytest.approx([0.0, 0.0, 0.530 * 1.7])
    toes = rest[sk.index("leftToes"), :3, 3] - rest[sk.index("leftFoot"), :3, 3]
    assert toes[1] < 0 and rest[sk.index("leftHand"), 0, 3] > 0
    assert rig.slots["forearm.L"] == "leftLowerArm" and rig.slots["thumb_1.R"] == "rightThumbMetacarpal"
    assert np.asarray(rig.ends).shape == (len(sk), 3)
    head = sk.index("head")
    assert np.asarray(rig.ends)[head] == pytest.approx([0.0, 0.0, 1.7])


def test_a_rig_with_fewer_bones_keeps_its_own_and_hangs_them_on_the_nearest_ancestor():
    slots = ["hips", "spine", "head", *(f"{p}.{s}" for s in "LR" for p in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot"))]
    bones = {b.name: b for b in normalised_bones(slots)}
    assert set(bones) == set(REQUIRED)
    assert bones["head"].parent == "spine"
    assert bones["leftUpperArm"].parent == "spine" and bones["rightUpperLeg"].parent == "hips"


def test_a_bone_vrm_allows_only_with_its_parent_is_left_out_without_it():
    # humanoid.md, "Needs Parent Bone": upperChest needs chest; a finger's later segments need the earlier.
    slots = [s for s in SLOTS if s not in ("chest", "index_1.L", "thumb_2.R")]
    names = {b.name for b in normalised_bones(slots)}
    assert "upperChest" not in names and "neck" in names and {"leftIndexIntermediate", "leftIndexDistal"}.isdisjoint(names)
    assert "rightThumbMetacarpal" in names and {"rightThumbProximal", "rightThumbDistal"}.isdisjoint(names)
    assert {"leftMiddleDistal", "rightIndexDistal", "leftThumbDistal"} <= names
    assert {b.name: b.parent for b in normalised_bones(slots)}["neck"] == "spine"


def test_a_rig_without_a_required_bone_is_refused_naming_it():
    slots = [s for s in SLOTS if s not in ("head", "foot.R")]
    with pytest.raises(MarionetteError, match="head, rightFoot"):
        normalised_bones(slots)


def test_extension_names_each_bone_by_its_node_and_passes_the_schema():
    nodes = ["Armature", "hips", "spine", "head", None, "leftUpperArm"]
    ext = vrma_extension(nodes, ["hips", "head", "leftUpperArm"])
    assert ext == {"specVersion": "1.0", "humanoid": {"humanBones": {"hips": {"node": 1}, "head": {"node": 3}, "leftUpperArm": {"node": 5}}}}
    gltf = {"nodes": [{"name": n} if n else {} for n in nodes], "extensionsUsed": [EXTENSION], "extensions": {EXTENSION: ext}}
    assert schema_problems(gltf) == []
    with pytest.raises(MarionetteError, match="'chest'"):
        vrma_extension(nodes, ["chest"])


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda g: g["extensions"].pop(EXTENSION), "no VRMC_vrm_animation extension"),
        (lambda g: g.pop("extensionsUsed"), "not in extensionsUsed"),
        (lambda g: g["extensions"][EXTENSION].update(specVersion="1.0-beta"), "specVersion is '1.0-beta'"),
        (lambda g: g["extensions"][EXTENSION].update(pose={}), "unknown property 'pose'"),
        (lambda g: g["extensions"][EXTENSION].pop("humanoid"), "humanoid.humanBones is missing"),
        (lambda g: g["extensions"][EXTENSION]["humanoid"]["humanBones"].update(leftEye={"node": 0}), "leftEye is not a humanoid bone"),
        (lambda g: g["extensions"][EXTENSION]["humanoid"]["humanBones"]["hips"].update(node=2), "hips.node is 2"),
        (lambda g: g["extensions"][EXTENSION]["humanoid"]["humanBones"]["hips"].update(node=True), "hips.node is True"),
        (lambda g: g["extensions"][EXTENSION]["humanoid"]["humanBones"]["spine"].update(node=0), "two humanBones name one node"),
    ],
)
def test_schema_problems_are_named(change, problem):
    gltf = {
        "nodes": [{"name": "hips"}, {"name": "spine"}],
        "extensionsUsed": [EXTENSION],
        "extensions": {EXTENSION: vrma_extension(["hips", "spine"], ["hips", "spine"])},
    }
    assert schema_problems(gltf) == []
    change(gltf)
    assert any(problem in p for p in schema_problems(gltf)), schema_problems(gltf)


def glb(text: bytes, binary: bytes) -> bytes:
    chunks = struct.pack("<II", len(text), 0x4E4F534A) + text + struct.pack("<II", len(binary), 0x004E4942) + binary
    return struct.pack("<III", 0x46546C67, 2, 12 + len(chunks)) + chunks


def test_glb_round_trip_keeps_the_binary_and_the_json():
    gltf = {"asset": {"version": "2.0"}, "nodes": [{"name": "hüfte"}], "buffers": [{"byteLength": 8}]}
    text = json.dumps(gltf).encode()
    text += b" " * (-len(text) % 4)
    data = glb(text, bytes(range(8)))
    back, binary = read_glb(data)
    assert back == gltf and binary == bytes(range(8))
    again = write_glb(back, binary)
    assert read_glb(again) == (gltf, bytes(range(8)))
    assert len(again) % 4 == 0 and struct.unpack_from("<I", again, 8)[0] == len(again)
    size = struct.unpack_from("<I", again, 12)[0]
    assert size % 4 == 0 and struct.unpack_from("<II", again, 20 + size) == (8, 0x004E4942)


def test_add_extension_keeps_every_other_field_and_the_binary():
    gltf = {"asset": {"version": "2.0"}, "nodes": [{"name": "Armature", "children": [1]}, {"name": "hips"}], "extensionsUsed": ["KHR_x"]}
    text = json.dumps(gltf).encode()
    text += b" " * (-len(text) % 4)
    out, binary = read_glb(add_extension(glb(text, b"\1\2\3\4"), ["hips"]))
    assert binary == b"\1\2\3\4"
    assert out["extensionsUsed"] == ["KHR_x", EXTENSION]
    assert out["extensions"][EXTENSION]["humanoid"]["humanBones"] == {"hips": {"node": 1}}
    assert {k: v for k, v in out.items() if k not in ("extensions", "extensionsUsed")} == {k: v for k, v in gltf.items() if k != "extensionsUsed"}
    assert schema_problems(out) == []


@pytest.mark.parametrize("data", [b"", b"glTF" + b"\0" * 16, struct.pack("<III", 0x46546C67, 1, 12)])
def test_not_a_glb_is_refused(data):
    with pytest.raises(MarionetteError, match="glb"):
        read_glb(data)


def test_only_the_channels_a_vrma_plays_are_kept():
    paths = ("translation", "rotation", "scale")
    # Nodes: 0 the armature, 1 hips, 2 spine, 3 a bone that is not humanoid; sampler k's output is accessor 100 + k.
    targets = [(node, path) for node in (1, 2, 3) for path in paths]
    gltf = {
        "animations": [{
            "channels": [{"sampler": k, "target": {"node": n, "path": p}} for k, (n, p) in enumerate(targets)],
            "samplers": [{"input": 0, "output": 100 + k, "interpolation": "LINEAR"} for k in range(len(targets))],
        }]
    }
    humanoid_channels_only(gltf, {"hips": 1, "spine": 2})
    animation = gltf["animations"][0]
    played = [(c["target"]["node"], c["target"]["path"], animation["samplers"][c["sampler"]]["output"]) for c in animation["channels"]]
    assert played == [(1, "translation", 100), (1, "rotation", 101), (2, "rotation", 104)]
    assert len(animation["samplers"]) == 3


def accessor_bytes(gltf: dict, binary: bytes, i: int) -> bytes:
    acc = gltf["accessors"][i]
    view = gltf["bufferViews"][acc["bufferView"]]
    start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    return binary[start : start + 4 * acc["count"]]


def test_data_no_channel_reads_is_removed_and_what_is_read_is_unchanged():
    # Views: 0 = 3 floats, 1 = 5 floats (unused), 2 = 2 accessors of 2 floats (the second at byte 8), 3 = 1 float.
    binary = bytes(range(1, 1 + 4 * (3 + 5 + 4 + 1)))
    views = [{"buffer": 0, "byteOffset": 0, "byteLength": 12}, {"buffer": 0, "byteOffset": 12, "byteLength": 20},
             {"buffer": 0, "byteOffset": 32, "byteLength": 16}, {"buffer": 0, "byteOffset": 48, "byteLength": 4}]
    accessors = [{"bufferView": 0, "count": 3}, {"bufferView": 1, "count": 5}, {"bufferView": 2, "count": 2},
                 {"bufferView": 2, "byteOffset": 8, "count": 2}, {"bufferView": 3, "count": 1}]
    gltf = {"buffers": [{"byteLength": len(binary)}], "bufferViews": views, "accessors": accessors,
            "animations": [{"samplers": [{"input": 0, "output": 3}, {"input": 0, "output": 4}], "channels": []}]}
    before = {k: accessor_bytes(gltf, binary, k) for k in (0, 3, 4)}
    out = drop_unused_data(gltf, binary)
    assert out is not None and len(out) == 12 + 16 + 4 and gltf["buffers"][0]["byteLength"] == len(out)
    assert len(gltf["accessors"]) == 3 and len(gltf["bufferViews"]) == 3
    samplers = gltf["animations"][0]["samplers"]
    assert [(smp["input"], smp["output"]) for smp in samplers] == [(0, 1), (0, 2)]
    assert [accessor_bytes(gltf, out, k) for k in (0, 1, 2)] == [before[0], before[3], before[4]]
    assert all(v["byteOffset"] % 4 == 0 for v in gltf["bufferViews"])


def test_a_gltf_with_meshes_keeps_its_data():
    gltf = {"meshes": [{}], "buffers": [{"byteLength": 4}], "accessors": [{"bufferView": 0, "count": 1}], "bufferViews": [{"byteLength": 4}]}
    assert drop_unused_data(gltf, b"abcd") == b"abcd" and len(gltf["accessors"]) == 1

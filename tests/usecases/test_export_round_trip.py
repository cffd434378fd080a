"""The retarget written for an engine (``retarget_files`` with an .fbx/.glb/.gltf output), re-imported
with Blender's own importer in a fresh session: the re-imported armature plays the baked Action
within 0.05 degrees on every mapped bone (world turns from rest) and 0.1 % of hip height on the hips,
and the file itself holds the preset's axes and units (glTF node transforms and accessor bounds;
FBX GlobalSettings and the models' transforms: no node scaled or turned), one clip named after the Action, no added leaf bones.

Two clips onto three characters for the main preset of each format (FBX for Unity, GLB for Godot);
one pair for the others (FBX for Unreal, .gltf for the web). About 2.5 s a test."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.retarget.geometric import RetargetOptions
from tests.helpers.data import shared_file
from tests.helpers.export_round_trip import RoundTrip, glb_json, round_trip
from tests.helpers.fbx_file import global_positions, global_settings, models, read_fbx, take_names

pytestmark = [pytest.mark.bpy, pytest.mark.data]

CLIPS = {"02_02_daz": ("bvh/cmu/02_02_daz.bvh", None), "Man_Walk": ("fbx/quaternius_male_casual.fbx", "Man_Walk")}
CHARACTERS = ["fbx/quaternius_male_casual.fbx", "gltf/khronos_cesium_man.glb", "gltf/male_base_mesh_apose.glb"]

MAX_DEG = 0.05
MAX_HIPS = 0.001

#: Blender's axes (X right of a character facing -Y, Y back, Z up) -> the file's, per preset:
#: glTF and Unity: Y up, the character's front along +Z; Unreal: Blender's own (Z up).
Y_UP = np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]])
Z_UP = np.eye(3)


def _check_round_trip(r: RoundTrip, clip: str) -> None:
    assert r.max_motion_deg > 20 and r.frames > 20, "the compared clip barely moves"
    assert r.max_angle_deg < MAX_DEG, f"mapped bones {r.max_angle_deg:.4f} deg off after the round trip"
    assert r.max_hips_fraction < MAX_HIPS, f"hips {100 * r.max_hips_fraction:.4f} % of hip height off"
    assert r.max_joint_fraction < MAX_HIPS, f"a mapped joint {100 * r.max_joint_fraction:.4f} % of hip height off"
    assert r.max_mesh_fraction < MAX_HIPS, f"skinned meshes {100 * r.max_mesh_fraction:.4f} % of hip height off"
    assert r.report["export"]["clip"] == clip


def _node_worlds(doc: dict) -> dict[str, np.ndarray]:
    """Every glTF node's rest world matrix, by name, from its translation/rotation/scale."""
    nodes = doc["nodes"]
    parent = {c: i for i, n in enumerate(nodes) for c in n.get("children", [])}

    def local(n: dict) -> np.ndarray:
        x, y, z, w = n.get("rotation", [0, 0, 0, 1])
        r = np.array([
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ])
        m = np.eye(4)
        m[:3, :3] = r * np.array(n.get("scale", [1, 1, 1]))[None]
        m[:3, 3] = n.get("translation", [0, 0, 0])
        return m

    def world(i: int) -> np.ndarray:
        return world(parent[i]) @ local(nodes[i]) if i in parent else local(nodes[i])

    return {n.get("name", str(i)): world(i) for i, n in enumerate(nodes)}


def _check_gltf_file(r: RoundTrip, path, clip: str) -> None:
    doc = glb_json(path)
    assert [a["name"] for a in doc["animations"]] == [clip]
    assert doc["asset"]["version"] == "2.0"
    worlds = _node_worlds(doc)
    joints = {doc["nodes"][j]["name"] for s in doc["skins"] for j in s["joints"]}
    assert joints <= set(r.armature_bones), f"joints not in the armature: {sorted(joints - set(r.armature_bones))[:5]}"
    # Y up, facing +Z, metres: every mapped joint's rest place is Blender's turned onto glTF's axes, unscaled.
    names = sorted(r.rest_places)
    np.testing.assert_allclose(
        [worlds[n][:3, 3] for n in names], [Y_UP @ r.rest_places[n] for n in names], atol=MAX_HIPS * r.hip_height,
    )
    # The meshes' vertex bounds (accessor min/max, metres) span the character: about its hip height twice.
    heights = [a["max"][1] - a["min"][1] for a in doc["accessors"] if a["type"] == "VEC3" and "max" in a and a.get("bufferView") is not None]
    assert 1.2 < max(heights) / r.hip_height < 3.0


def _check_fbx_file(r: RoundTrip, path, clip: str, engine: str) -> None:
    root = read_fbx(path)
    g = global_settings(root)
    axes = {k: g[k][0] for k in ("UpAxis", "UpAxisSign", "FrontAxis", "FrontAxisSign", "CoordAxis", "CoordAxisSign")}
    if engine == "unity":  # Y up (axis 1), metres (100 cm a unit)
        assert (axes["UpAxis"], axes["UpAxisSign"], axes["CoordAxis"], axes["CoordAxisSign"]) == (1, 1, 0, 1)
        assert g["UnitScaleFactor"][0] == pytest.approx(100.0, rel=1e-6)
        to_file, metres_per_unit = Y_UP, 1.0
    else:  # Unreal: Z up (axis 2), centimetres
        assert (axes["UpAxis"], axes["UpAxisSign"], axes["CoordAxis"], axes["CoordAxisSign"]) == (2, 1, 0, 1)
        assert g["UnitScaleFactor"][0] == pytest.approx(1.0, rel=1e-6)
        to_file, metres_per_unit = Z_UP, 0.01
    assert take_names(root) == [clip]
    kinds = models(root)
    limbs = {n for n, (kind, _) in kinds.items() if kind == "LimbNode"}
    assert limbs == set(r.armature_bones), f"bones added or lost: {sorted(limbs ^ set(r.armature_bones))[:5]}"
    for name, (kind, props) in kinds.items():  # no object scaled for units nor turned for axes: nothing to fix up
        if kind != "LimbNode":  # (a bone's own scale and turn are the clip's)
            assert np.allclose(props.get("Lcl Scaling", [1, 1, 1]), 1, atol=1e-6), f"{name} ({kind}) scaled {props.get('Lcl Scaling')}"
            assert np.allclose(props.get("Lcl Rotation", [0, 0, 0]), 0, atol=1e-4), f"{name} ({kind}) turned {props.get('Lcl Rotation')}"
    # Every mapped joint where the clip's first frame puts it, in the file's axes and units.
    places = global_positions(root)
    names = sorted(r.first_places)
    np.testing.assert_allclose(
        [places[n] * metres_per_unit for n in names], [to_file @ r.first_places[n] for n in names], atol=MAX_HIPS * r.hip_height,
    )


def _run(tmp_path, clip: str, character: str, fmt: str, engine: str, root_motion: str = "HIPS") -> RoundTrip:
    """An FBX export changes its session (the character's data put on the file's axes and units):
    its round trip is compared with the same retarget saved as a .blend, in a session of its own."""
    source, take = CLIPS[clip]
    out = tmp_path / f"{clip}.{fmt}"
    options = RetargetOptions(root_motion=root_motion)
    r = round_trip(str(shared_file(source)), str(shared_file(character)), out, engine, take, reference=fmt == "fbx", options=options)
    print(f"{clip} -> {character} {fmt}/{engine}: {r.max_angle_deg:.5f} deg, hips {100 * r.max_hips_fraction:.6f} %, "
          f"joints {100 * r.max_joint_fraction:.6f} %, meshes {100 * r.max_mesh_fraction:.6f} % of hip height, {r.frames} frames, {r.mapped} mapped bones")
    _check_round_trip(r, clip)
    if fmt == "fbx":
        _check_fbx_file(r, out, clip, engine)
    else:
        _check_gltf_file(r, out, clip)
    return r


@pytest.mark.parametrize("clip", sorted(CLIPS))
@pytest.mark.parametrize("character", CHARACTERS)
def test_glb_for_godot_round_trip(blender, tmp_path, clip, character):
    _run(tmp_path, clip, character, "glb", "godot")


@pytest.mark.parametrize("clip", sorted(CLIPS))
@pytest.mark.parametrize("character", CHARACTERS)
def test_fbx_for_unity_round_trip(blender, tmp_path, clip, character):
    _run(tmp_path, clip, character, "fbx", "unity")


def test_fbx_for_unreal_round_trip_in_centimetres(blender, tmp_path):
    _run(tmp_path, "02_02_daz", "gltf/khronos_cesium_man.glb", "fbx", "unreal")


def test_gltf_for_the_web_round_trip(blender, tmp_path):
    """A .gltf brings its .bin beside it and its images in a folder of their own (CesiumMan has one)."""
    r = _run(tmp_path, "Man_Walk", "gltf/khronos_cesium_man.glb", "gltf", "web")
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".blend")
    assert written == ["Man_Walk.bin", "Man_Walk.gltf", "Man_Walk_textures/Image_0.jpg"]
    assert sorted(r.report["export"]["files"]) == sorted(str(tmp_path / w) for w in written)


@pytest.mark.parametrize("fmt, engine, root_motion", [("fbx", "unreal", "ROOT_BONE"), ("fbx", "unity", "OBJECT"), ("glb", "godot", "OBJECT")])
def test_root_motion_on_a_root_bone_or_the_object_round_trips(blender, tmp_path, fmt, engine, root_motion):
    """Quaternius' man has a root bone above the hips: the travel there, or on the armature object, plays the same."""
    r = _run(tmp_path, "02_02_daz", "fbx/quaternius_male_casual.fbx", fmt, engine, root_motion)
    assert r.report["options"]["root_motion"] == root_motion
    assert r.hips_travel_fraction > 1, "the compared clip travels"

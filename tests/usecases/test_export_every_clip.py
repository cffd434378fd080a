"""Every shared humanoid clip, written for each engine preset onto three shared characters, and
re-imported with Blender's own importer: the round trip of :mod:`.test_export_round_trip` (mapped
bones within 0.05 degrees, hips and joints within 0.1 % of hip height, the file's axes, units and
clip name) on the whole set. One test per preset and character, looping over the 8 clips, printing
the worst figures per clip."""

from __future__ import annotations

import pytest

from tests.usecases.test_export_round_trip import CHARACTERS, MAX_DEG, MAX_HIPS, _check_fbx_file, _check_gltf_file
from tests.usecases.test_real_pairs import CLIPS

pytestmark = [pytest.mark.bpy, pytest.mark.data, pytest.mark.slow]

PRESETS = [("fbx", "unity"), ("fbx", "unreal"), ("glb", "godot"), ("gltf", "web")]


@pytest.mark.parametrize("fmt, engine", PRESETS)
@pytest.mark.parametrize("character", CHARACTERS)
def test_every_shared_clip_round_trips(blender, tmp_path, capsys, fmt, engine, character):
    from marionette.core.retarget.geometric import RetargetOptions
    from tests.helpers.data import shared_file
    from tests.helpers.export_round_trip import round_trip

    rows = []
    for k, (source, take) in enumerate(CLIPS):
        out = tmp_path / f"clip{k}.{fmt}"
        r = round_trip(
            str(shared_file(source)), str(shared_file(character)), out, engine, take,
            reference=fmt == "fbx", options=RetargetOptions(root_motion="HIPS"),
        )
        clip = r.report["export"]["clip"]
        rows.append((source.split("/")[-1] + (f"[{take}]" if take else ""), r.max_angle_deg, 100 * r.max_hips_fraction, 100 * r.max_joint_fraction))
        if not source.endswith("tpose_zup.bvh"):  # a held pose: nothing moves, the pose must still hold
            assert r.max_motion_deg > 20, (rows[-1], "the compared clip barely moves")
        assert r.max_angle_deg < MAX_DEG and r.max_hips_fraction < MAX_HIPS and r.max_joint_fraction < MAX_HIPS, rows[-1]
        assert r.max_mesh_fraction < MAX_HIPS, (rows[-1], f"meshes {100 * r.max_mesh_fraction:.4f} % off")
        if fmt == "fbx":
            _check_fbx_file(r, out, clip, engine)
        else:
            _check_gltf_file(r, out, clip)
    with capsys.disabled():
        print(f"\n{fmt}/{engine} onto {character}: | clip | bones (deg) | hips (% hip height) | joints (%) |")
        for label, a, h, j in rows:
            print(f"| {label} | {a:.5f} | {h:.5f} | {j:.5f} |")
    assert len(rows) == len(CLIPS)

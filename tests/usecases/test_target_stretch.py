"""The summary sees joints pulled off their bones on the pose Blender plays, which bone directions
alone do not: a target whose forearm a constraint of its own holds 30 % longer (Limit Scale) plays
its hand away from the elbow (keyed as any rig, ``--control-rig off``); the report's ``target_stretch`` says by how much and a
warning names it. Untouched, the same pair reads no stretch."""

from __future__ import annotations

import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


@pytest.mark.parametrize("longer", [0.0, 0.3])
def test_a_target_playing_its_joints_apart_is_warned_about(blender, tmp_path, longer):
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session, save_blend
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_files

    fresh_session()
    target = load_file(str(shared_file("fbx/quaternius_male_casual.fbx"))).armatures[0]
    if longer:
        c = target.pose.bones["LowerArm.L"].constraints.new("LIMIT_SCALE")
        c.use_min_y, c.min_y, c.owner_space = True, 1.0 + longer, "LOCAL"
    rig = tmp_path / "held.blend"
    save_blend(str(rig))
    outcome = retarget_files(
        str(shared_file("bvh/cmu/02_02_daz.bvh")), str(rig), str(tmp_path / "out.blend"), options=RetargetOptions(plant_feet=False),
        control_rig="off",
    )
    report = outcome.report
    stretched = [w for w in report.get("warnings", []) if "off their bones" in w]
    if not longer:
        assert report["target_stretch"] < 0.01 and stretched == []
    else:
        assert report["target_stretch"] == pytest.approx(longer, abs=0.005), report.get("warnings")
        assert len(stretched) == 1 and "30 %" in stretched[0]

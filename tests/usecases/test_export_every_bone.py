"""Every bone of an exported character, mapped or not, plays in the re-imported file where it plays
in Blender: a bone the clip does not key but whose pose sits off its rest (Quaternius' IK pole
targets) is a length too, and goes into the file's units with the rest (Unreal: centimetres)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marionette.core.retarget.geometric import RetargetOptions
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

#: A joint may move this far (metres) between Blender and the re-imported file.
MAX_METRES = 1e-4


def _heads(bpy, obj, names: list[str], frames: list[int]) -> np.ndarray:
    """World heads ``(F, B, 3)`` in metres of ``obj``'s bones ``names`` at ``frames``."""
    unit = float(bpy.context.scene.unit_settings.scale_length)
    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        mw = np.array(obj.matrix_world)
        out.append([(mw @ np.array(obj.pose.bones[n].matrix))[:3, 3] * unit for n in names])
    return np.array(out)


@pytest.mark.parametrize("engine", ["unreal", "unity"])
def test_unkeyed_bones_off_their_rest_keep_their_place(blender, tmp_path, engine):
    from marionette.bridge import compat
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session
    from marionette.usecases.retarget import retarget_files

    bpy = blender
    source, target = str(shared_file("bvh/cmu/02_02_daz.bvh")), str(shared_file("fbx/quaternius_male_casual.fbx"))
    out, options = Path(tmp_path / "walk.fbx"), RetargetOptions(root_motion="HIPS")
    outcome = retarget_files(source, target, str(out.with_suffix(".blend")), options=options)
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o.animation_data and o.animation_data.action == outcome.action)
    names = [b.name for b in arm.data.bones]
    pole = arm.pose.bones["PoleTarget.L"]
    assert np.linalg.norm(pole.location) > 0.1 and not any(
        '"PoleTarget.L"' in c.data_path for c in compat.action_fcurves(outcome.action, compat.action_slot_for(outcome.action, arm))
    )
    first, last = (int(round(f)) for f in outcome.action.frame_range)
    frames = list(range(first, last + 1, 7))
    played = _heads(bpy, arm, names, frames)

    retarget_files(source, target, str(out), options=options, engine=engine)
    fresh_session()
    back = load_file(str(out)).armatures[0]
    shift = int(round(back.animation_data.action.frame_range[0])) - first
    again = _heads(bpy, back, names, [f + shift for f in frames])
    off = np.linalg.norm(played - again, axis=-1).max(axis=0)
    worst = int(np.argmax(off))
    assert off[worst] < MAX_METRES, f"{names[worst]} {off[worst]:.4f} m off after the round trip"

"""A VMD motion played on a PMX rig: keys land where MMD puts them (worked out by hand in MMD's
own space, then converted as the PMX importer converts points), Bézier-eased in-between frames,
MMD's IK switches honoured, and the built-in standard skeleton playing the shared YYB motion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.errors import ClipError
from marionette.core.formats.mmd_standard import standard_model
from marionette.core.formats.pmx import parse_pmx
from marionette.core.formats.pmx_rig import build_rig
from marionette.core.formats.vmd import parse_vmd, read_vmd
from marionette.core.formats.vmd_pose import play
from tests.helpers.data import shared_file
from tests.helpers.pmx_files import humanoid_bones, write_pmx
from tests.helpers.vmd_files import LINEAR, Key, Motion, vmd_bytes


def _rig():
    return build_rig(parse_pmx(write_pmx(humanoid_bones())[0], "humanoid.pmx"))


def _heads(rig, played):
    world = rig.skeleton.forward_kinematics(played.clip.rotations, played.clip.translations)
    return {name: world[:, j, :3, 3] for j, name in enumerate(rig.skeleton.names)}


def _blender(p):
    """An MMD point in Blender space, written out here: 0.08 * (x, z, y)."""
    x, y, z = p
    return 0.08 * np.array([x, z, y])


def _about_z(deg: float) -> tuple[float, float, float, float]:
    h = math.radians(deg) / 2
    return (0.0, 0.0, math.sin(h), math.cos(h))


def test_a_90_degree_key_on_the_arm_turns_the_elbow_about_the_shoulder_joint():
    """In MMD's space, 90 degrees about +Z takes (x, y) to (-y, x): the elbow's offset from the
    arm's head (2.703, -1.893, 0) becomes (1.893, 2.703, 0)."""
    rig = _rig()
    motion = parse_vmd(vmd_bytes(Motion(keys=[Key("左腕", 0, rotation=_about_z(90.0))])), "arm.vmd")
    heads = _heads(rig, play(rig, motion))
    arm = (1.6, 15.0, 0.3)
    off = (3.3 * math.cos(math.radians(35)), -3.3 * math.sin(math.radians(35)))
    want = _blender((arm[0] - off[1], arm[1] + off[0], 0.3))
    assert np.abs(heads["左ひじ"][0] - want).max() < 1e-6
    # The right arm is not keyed: its elbow stays at rest.
    assert np.abs(heads["右ひじ"][0] - _blender((-1.6 - off[0], 15.0 + off[1], 0.3))).max() < 1e-6


def test_a_centre_position_key_moves_the_body_by_0_08_times_its_units_in_converted_axes():
    rig = _rig()
    motion = parse_vmd(vmd_bytes(Motion(keys=[Key("センター", 0, (1.0, -2.0, 3.0))])), "centre.vmd")
    played = play(rig, motion)
    heads = _heads(rig, played)
    rest = rig.skeleton.rest_placements()[:, :3, 3]
    for name in ("上半身", "頭", "左腕", "左手首", "左足", "右足"):
        moved = heads[name][0] - rest[rig.skeleton.index(name)]
        assert np.abs(moved - [0.08, 0.24, -0.16]).max() < 1e-6, name
    # The feet stay on their IK bones, which the centre does not carry.
    for side in ("左", "右"):
        assert np.abs(heads[side + "足首"][0] - rest[rig.skeleton.index(side + "足首")]).max() < 1e-3


def test_in_between_frames_follow_the_keys_bezier_curve():
    """A rotation eased by the curve (x1, y1, x2, y2) = (100, 10, 120, 40) / 127: at frame 15 of
    0..30 the turn is y(s) of 90 degrees where x(s) = 0.5 (the cubic solved here by its roots)."""
    curve = (100, 10, 120, 40)
    rig = _rig()
    keys = [Key("左腕", 0), Key("左腕", 30, rotation=_about_z(90.0), curves=[LINEAR, LINEAR, LINEAR, curve])]
    played = play(rig, parse_vmd(vmd_bytes(Motion(keys=keys)), "ease.vmd"))
    x1, y1, x2, y2 = (c / 127 for c in curve)
    # x(s) = (3 x1 - 3 x2 + 1) s^3 + (3 x2 - 6 x1) s^2 + 3 x1 s
    roots = np.roots([3 * x1 - 3 * x2 + 1, 3 * x2 - 6 * x1, 3 * x1, -0.5])
    s = float(next(r.real for r in roots if abs(r.imag) < 1e-12 and 0 <= r.real <= 1))
    y = 3 * (1 - s) ** 2 * s * y1 + 3 * (1 - s) * s**2 * y2 + s**3
    j = rig.skeleton.index("左腕")
    q = played.clip.rotations[15, j]
    angle = math.degrees(2 * math.atan2(np.linalg.norm(q[1:]), abs(q[0])))
    assert angle == pytest.approx(90.0 * y, abs=1e-4)
    assert y < 0.3  # the curve really eases: linear would give 45 degrees
    assert played.clip.fps == 30.0 and played.clip.first_frame == 1.0 and played.clip.frame_count == 31
    assert played.clip.times[15] == pytest.approx(0.5)


def _lifted_foot(properties):
    keys = [Key("左足ＩＫ", 0, (0.0, 3.0, -1.0)), Key("左足ＩＫ", 20, (0.0, 3.0, -1.0))]
    return parse_vmd(vmd_bytes(Motion(keys=keys, properties=properties)), "lift.vmd")


def test_the_leg_ik_drives_the_leg_and_the_knee_bends_forward():
    rig = _rig()
    heads = _heads(rig, play(rig, _lifted_foot([])))
    target = _blender((1.0, 4.0, -0.7))
    assert np.abs(heads["左足首"] - target).max(axis=1).max() < 2e-3
    rest = rig.skeleton.rest_placements()[:, :3, 3]
    knee = heads["左ひざ"][0] - rest[rig.skeleton.index("左ひざ")]
    assert knee[1] < -0.05  # forward is -Y in Blender: the knee comes forward
    # The right leg is untouched.
    assert np.abs(heads["右足首"][0] - rest[rig.skeleton.index("右足首")]).max() < 1e-6


def test_an_ik_switched_off_plays_its_keyed_fk():
    rig = _rig()
    played = play(rig, _lifted_foot([(0, True, {"左足ＩＫ": True}), (10, True, {"左足ＩＫ": False})]))
    heads = _heads(rig, played)
    rest = rig.skeleton.rest_placements()[:, :3, 3]
    ankle = heads["左足首"]
    target = _blender((1.0, 4.0, -0.7))
    assert np.abs(ankle[:10] - target).max() < 2e-3  # on: the foot on its IK bone
    assert np.abs(ankle[10:] - rest[rig.skeleton.index("左足首")]).max() < 1e-9  # off: the keyed FK (rest)
    assert played.ik_on["IK 左足ＩＫ"].tolist() == [True] * 10 + [False] * 11
    assert played.ik_on["IK 右足ＩＫ"].all()
    # The keyed pose kept beside the played one has the IK bone where the keys put it.
    assert np.allclose(played.keyed.translations[10:, rig.skeleton.index("左足ＩＫ")], played.keyed.translations[0, rig.skeleton.index("左足ＩＫ")])


def test_a_motion_naming_no_bone_of_the_model_is_refused():
    rig = _rig()
    with pytest.raises(ClipError, match="none of the motion's 1 bones"):
        play(rig, parse_vmd(vmd_bytes(Motion(keys=[Key("尻尾", 0)])), "tail.vmd"))


def test_the_standard_skeleton_is_symmetric_stands_1_7_m_and_plays_the_shared_motion():
    rig = build_rig(standard_model())
    assert rig.notes == ()
    sk = rig.skeleton
    heads = sk.rest_placements()[:, :3, 3]
    assert heads[sk.index("頭")][2] == pytest.approx(1.5583)
    for name in sk.names:
        if name.startswith("左"):
            mirror = heads[sk.index("右" + name[1:])] * [-1, 1, 1]
            assert np.allclose(heads[sk.index(name)], mirror), name
    assert {"IK 左足ＩＫ", "IK 右足ＩＫ", "IK 左つま先ＩＫ", "IK 右つま先ＩＫ"} <= {c.name for c in rig.stack.controls}
    motion = read_vmd(shared_file("vmd/babylon_mmd_physics_toggle_test_yyb10th.vmd"))
    played = play(rig, motion)
    assert played.clip.frame_count == motion.frame_range[1] - motion.frame_range[0] + 1
    assert "グルーブ" not in played.unmatched and "上半身" not in played.unmatched
    world = sk.forward_kinematics(played.clip.rotations, played.clip.translations)
    for side in ("左", "右"):
        # The leg IK holds each ankle on its IK bone on every frame.
        gap = np.linalg.norm(world[:, sk.index(side + "足首"), :3, 3] - world[:, sk.index(side + "足ＩＫ"), :3, 3], axis=1)
        assert gap.max() < 2e-3

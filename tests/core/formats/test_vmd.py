"""The VMD reader: the shared motion files (a YYB Miku motion from babylon-mmd's tests: Shift-JIS
names, morph keys, IK property keys, physics-off keys) and files written by the tests record by
record (:mod:`tests.helpers.vmd_files`), with MMD's Bézier interpolation measured against the
curve itself, and every truncation of a file refused with the section named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.errors import FileFormatError
from marionette.core.formats.vmd import bezier, parse_vmd, read_vmd
from tests.helpers.data import shared_file
from tests.helpers.vmd_files import LINEAR, Key, Motion, vmd_bytes

pytestmark = pytest.mark.data


def test_the_shared_motion_reads_whole():
    m = read_vmd(shared_file("vmd/babylon_mmd_physics_toggle_test_yyb10th.vmd"))
    assert m.model_name == "YYB式初音ミク_10th_v"
    assert sum(len(t.frames) for t in m.tracks.values()) == 454
    assert {"グルーブ", "上半身", "スカート_0_0"} <= set(m.tracks)
    assert sum(len(f) for f, _ in m.morphs.values()) == 100
    assert m.set_aside == {"camera": 0, "light": 0, "self-shadow": 0}
    (prop,) = m.properties
    assert prop.frame == 0 and prop.visible and prop.ik == {"右足ＩＫ": True, "右つま先ＩＫ": True, "左足ＩＫ": True, "左つま先ＩＫ": True}
    for t in m.tracks.values():
        assert np.all(np.diff(t.frames) > 0)
        assert np.allclose(np.linalg.norm(t.rotations, axis=1), 1.0, atol=1e-5)
    # Some keys turn their bone's physics off (bytes 2, 3 of the block are 99, 15), the rest leave it on.
    flags = np.concatenate([t.physics for t in m.tracks.values()])
    assert 0 < (~flags).sum() < flags.size


def test_physics_flags_of_the_small_shared_motion():
    m = read_vmd(shared_file("vmd/babylon_mmd_physics_toggle_test_v2_yyb10th.vmd"))
    (track,) = m.tracks.values()
    assert track.name == "D4" and len(track.frames) == 3
    assert set(track.physics.tolist()) == {True, False}
    assert m.set_aside == {"camera": 0, "light": 0, "self-shadow": 0} and m.properties == ()


def _motion() -> Motion:
    half = (0.0, 0.0, math.sin(math.radians(45)), math.cos(math.radians(45)))  # 90 degrees about Z
    return Motion(
        keys=[
            Key("センター", 10, (0.0, 2.0, 0.0), half, curves=[LINEAR, (0, 0, 127, 127), LINEAR, LINEAR]),
            Key("センター", 0),
            Key("右腕", 5, rotation=half, physics=False),
            Key("センター", 10, (1.0, 1.0, 1.0)),  # the same frame again: the later record wins
            Key("右腕", 0),
        ],
        morphs=[("あ", 3, 0.5), ("あ", 0, 0.0)],
        properties=[(20, True, {"左足ＩＫ": False}), (0, True, {"左足ＩＫ": True})],
    )


def test_a_written_motion_reads_back_key_for_key():
    m = parse_vmd(vmd_bytes(_motion()), "written.vmd")
    assert m.model_name == "テスト" and list(m.tracks) == ["センター", "右腕"]
    c = m.tracks["センター"]
    assert c.frames.tolist() == [0, 10]
    assert np.allclose(c.positions, [[0, 0, 0], [1, 1, 1]])
    assert np.allclose(c.curves[1], [[20 / 127, 20 / 127, 107 / 127, 107 / 127]] * 4)
    arm = m.tracks["右腕"]
    assert arm.frames.tolist() == [0, 5] and arm.physics.tolist() == [True, False]
    assert m.morphs["あ"][0].tolist() == [0, 3] and np.allclose(m.morphs["あ"][1], [0.0, 0.5])
    assert m.set_aside == {"camera": 1, "light": 1, "self-shadow": 0}
    assert [p.frame for p in m.properties] == [0, 20]
    assert m.ik_enabled("左足ＩＫ", 19.5) and not m.ik_enabled("左足ＩＫ", 20) and m.ik_enabled("右足ＩＫ", 30)
    assert m.frame_range == (0, 10)


def test_the_old_signature_and_a_file_ending_after_the_morphs():
    motion = _motion()
    motion.old, motion.full = True, False
    m = parse_vmd(vmd_bytes(motion), "old.vmd")
    assert m.model_name == "テスト" and m.properties == () and m.set_aside == {}
    assert m.tracks["センター"].frames.tolist() == [0, 10]


def test_each_channel_reads_its_own_curve():
    curves = [(10, 20, 30, 40), (50, 60, 70, 80), (90, 100, 110, 120), (1, 2, 3, 4)]
    m = parse_vmd(vmd_bytes(Motion(keys=[Key("a", 0), Key("a", 4, curves=curves, physics=False)])))
    got = np.rint(m.tracks["a"].curves[1] * 127).astype(int)
    assert got.tolist() == [list(c) for c in curves]  # the physics flag does not disturb channel X


@pytest.mark.parametrize("curve", [(20, 20, 107, 107), (0, 0, 127, 127), (64, 0, 64, 127), (127, 0, 0, 127), (10, 90, 40, 120)])
def test_bezier_lands_on_the_curve(curve):
    """For each t the curve's y where its x is t, against the curve traced densely and read back."""
    c = np.array(curve, dtype=np.float64) / 127.0
    s = np.linspace(0, 1, 200001)
    x = 3 * (1 - s) ** 2 * s * c[0] + 3 * (1 - s) * s**2 * c[2] + s**3
    y = 3 * (1 - s) ** 2 * s * c[1] + 3 * (1 - s) * s**2 * c[3] + s**3
    t = np.linspace(0, 1, 101)
    np.testing.assert_allclose(bezier(c, t), np.interp(t, x, y), atol=2e-5)
    if curve[0] == curve[1] and curve[2] == curve[3]:  # on the diagonal: no easing
        np.testing.assert_allclose(bezier(c, t), t, atol=1e-7)


def test_sampling_between_keys():
    m = parse_vmd(vmd_bytes(_motion()))
    c = m.tracks["センター"]
    pos, rot = c.sample([0, 5, 10, -3, 40])
    # Linear X: halfway at frame 5; rotation from rest to the key's (the later record's: rest) holds rest.
    assert np.allclose(pos[[0, 2, 3, 4]], [[0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1]])
    assert pos[1, 0] == pytest.approx(0.5, abs=1e-6)
    arm = m.tracks["右腕"]
    _, rot = arm.sample([0.0, 2.5, 5.0])
    angle = np.degrees(2 * np.arctan2(np.linalg.norm(rot[:, :3], axis=1), rot[:, 3]))
    assert angle[0] == pytest.approx(0, abs=1e-6) and angle[2] == pytest.approx(90, abs=1e-4)
    assert angle[1] == pytest.approx(45, abs=1e-4)  # linear curve, halfway: half the turn about one axis


def test_every_truncation_is_refused_naming_the_section():
    data = vmd_bytes(_motion())
    for end in range(len(data)):
        if end in _clean_ends(data):
            continue
        with pytest.raises(FileFormatError, match=r"^cut\.vmd: VMD (header|bone keys|morph keys|camera keys|light keys|self-shadow keys|property keys) section, byte \d+"):
            parse_vmd(data[:end], "cut.vmd")


def _clean_ends(data: bytes) -> set[int]:
    """Where a file may end: after the morphs or after the self-shadow keys (or whole)."""
    m = parse_vmd(data)
    bones = sum(len(t.frames) for t in m.tracks.values()) + 1  # the duplicate record is in the file too
    after_morphs = 50 + 4 + bones * 111 + 4 + 2 * 23
    after_shadow = after_morphs + 4 + 61 + 4 + 28 + 4
    return {after_morphs, after_shadow}


def test_bad_files_are_refused():
    good = vmd_bytes(_motion())
    with pytest.raises(FileFormatError, match="not a VMD file"):
        parse_vmd(b"PMX " + good[4:], "x.vmd")
    absurd = good[:50] + (10**8).to_bytes(4, "little") + good[54:]
    with pytest.raises(FileFormatError, match="bone keys section, byte 50: 100000000 bone keys need"):
        parse_vmd(absurd, "x.vmd")
    nan = Motion(keys=[Key("a", 0, rotation=(float("nan"), 0.0, 0.0, 1.0))])
    with pytest.raises(FileFormatError, match="not a number"):
        parse_vmd(vmd_bytes(nan), "x.vmd")
    with pytest.raises(FileFormatError, match="cannot read the file"):
        read_vmd("/nonexistent/motion.vmd")

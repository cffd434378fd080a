"""The pure-numpy BVH reader (core/formats/bvh.py): structure, channels, timing, maths, and refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

from marionette.core.errors import FileFormatError
from marionette.core.formats.bvh import BvhData, detect_up_axis, parse_bvh, read_bvh
from marionette.core.rig.rotations import matrix_from_quat
from tests.helpers.data import shared_file

# What the data README states about each file (joints, frames, rate), and its up axis.
SHARED_BVH = {
    "bvh/cmu/12_03_motionbuilder.bvh": (31, 566, 120.0, "Y"),
    "bvh/cmu/02_02_daz.bvh": (43, 299, 120.0, "Y"),
    "bvh/makehuman/walk1_zup.bvh": (75, 14, 24.0, "Z"),
    "bvh/makehuman/tpose_zup.bvh": (173, 1, 24.0, "Z"),
}


def _text_facts(text: str) -> tuple[list[str], int, int, int]:
    """Joint names, End Site count, channel total and MOTION row count, counted independently of
    the reader with plain text matching."""
    names = [m.group(2).strip() for m in re.finditer(r"^\s*(ROOT|JOINT)\s+(.+?)\s*$", text, re.M)]
    ends = len(re.findall(r"^\s*End\s+Site", text, re.M))
    channels = sum(int(m.group(1)) for m in re.finditer(r"^\s*CHANNELS\s+(\d+)", text, re.M))
    motion = text[re.search(r"^\s*Frame Time:.*$", text, re.M).end() :]
    rows = sum(1 for ln in motion.splitlines() if ln.strip())
    return names, ends, channels, rows


@pytest.mark.parametrize("relative", sorted(SHARED_BVH))
def test_shared_files_structure_and_timing(relative: str) -> None:
    path = shared_file(relative)
    joints, frames, fps, up = SHARED_BVH[relative]
    bvh = read_bvh(path)
    names, ends, channels, rows = _text_facts(path.read_text(encoding="utf-8", errors="replace"))

    assert bvh.joint_count == joints == len(names)
    assert list(bvh.names) == names
    assert bvh.frame_count == frames == rows == bvh.declared_frames
    assert bvh.fps == pytest.approx(fps, abs=1e-9)
    assert bvh.channel_count == channels == bvh.motion.shape[1]
    assert int(np.isfinite(bvh.end_sites).all(axis=1).sum()) == ends
    assert detect_up_axis(bvh) == up
    # Parents first, exactly one root, channel blocks contiguous in hierarchy order.
    assert bvh.parents[0] == -1 and np.all(bvh.parents[1:] < np.arange(1, joints)) and np.all(bvh.parents[1:] >= 0)
    sizes = np.array([len(c) for c in bvh.channels])
    assert np.array_equal(bvh.channel_starts, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
    assert np.all(np.isfinite(bvh.motion))


def test_cmu_first_frame_values_and_rotation_order() -> None:
    bvh = read_bvh(shared_file("bvh/cmu/12_03_motionbuilder.bvh"))
    # First MOTION row as written: root position then Z, Y, X rotation.
    assert np.allclose(bvh.motion[0, :6], [-1.4385, 16.4063, -26.0539, 0, 0, 0])
    assert bvh.channels[0] == ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
    assert bvh.rotation_order(0) == "XYZ"  # Z Y X in the file is X applied first
    assert bvh.channel_index(0, "Yposition") == 1
    assert bvh.channel_index(1, "Xposition") is None
    daz = read_bvh(shared_file("bvh/cmu/02_02_daz.bvh"))
    assert daz.channels[1] == ("Zrotation", "Xrotation", "Yrotation")
    assert daz.rotation_order(1) == "YXZ"


TINY = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Upper Arm
  {
    OFFSET 0 1 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 2 0
    }
  }
  JOINT Upper Arm
  {
    OFFSET 1 2 3
    CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  }
  JOINT OnlyY
  {
    OFFSET 7 8 9
    CHANNELS 1 Yposition
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 0 0 90 0 0   0 0 0   4 5 6 0 0 0   -1
1 2 3 30 40 50 10 20 30 4 5 6 0 0 0  -2
"""


def _rz(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])


def _rx(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])


def _ry(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def test_names_channels_and_semantics_of_a_small_file() -> None:
    bvh = parse_bvh(TINY, "tiny.bvh")
    # Spaces become underscores and a repeated name gets a suffix, as Blender's importer does.
    assert bvh.names == ("Hips", "Upper_Arm", "Upper_Arm.001", "OnlyY")
    assert list(bvh.parents) == [-1, 0, 0, 0]
    assert bvh.fps == pytest.approx(30.0)  # 1 / 0.0333333 snaps to 30
    assert np.allclose(bvh.end_sites[1], [0, 2, 0]) and np.all(np.isnan(bvh.end_sites[0]))

    # Rotation channels apply in file order, the first outermost: R = Rz @ Rx @ Ry.
    q = bvh.local_rotations()
    expected = _rz(30) @ _rx(40) @ _ry(50)
    assert np.allclose(matrix_from_quat(q[1, 0]), expected, atol=1e-12)
    assert np.allclose(matrix_from_quat(q[1, 1]), _rz(10) @ _rx(20) @ _ry(30), atol=1e-12)

    # Position channels replace the offset on the axes they carry; others keep the offset.
    tr = bvh.local_translations()
    assert np.allclose(tr[0, 2], [4, 5, 6])
    assert np.allclose(tr[0, 3], [7, -1, 9]) and np.allclose(tr[1, 3], [7, -2, 9])
    assert np.allclose(tr[0, 1], [0, 1, 0])  # no position channels: the offset


def test_forward_kinematics_of_the_core_skeleton() -> None:
    bvh = parse_bvh(TINY, "tiny.bvh")
    skel = bvh.skeleton()
    clip = bvh.clip()
    assert clip.fps == pytest.approx(30.0) and clip.first_frame == 1.0
    assert np.allclose(clip.frame_numbers(), [1.0, 2.0])
    world = skel.forward_kinematics(clip.rotations, clip.translations)
    # Frame 1: hips at the origin turned 90 degrees about Z, so the arm's (0, 1, 0) offset points -X.
    assert np.allclose(world[0, 1, :3, 3], [-1, 0, 0], atol=1e-12)
    # Frame 2: hips at (1, 2, 3) with R = Rz(30) Rx(40) Ry(50).
    r = _rz(30) @ _rx(40) @ _ry(50)
    assert np.allclose(world[1, 1, :3, 3], np.array([1, 2, 3]) + r @ [0, 1, 0], atol=1e-12)
    assert np.allclose(world[1, 2, :3, 3], np.array([1, 2, 3]) + r @ [4, 5, 6], atol=1e-12)
    # At rest (no motion) joints sit at their accumulated offsets.
    rest = skel.rest_placements()[:, :3, 3]
    assert np.allclose(rest, bvh.rest_positions())


def test_line_endings_do_not_matter() -> None:
    a = parse_bvh(TINY, "a.bvh")
    b = parse_bvh(TINY.replace("\n", "\r\n").encode(), "b.bvh")
    c = parse_bvh(TINY.replace("\n", "\r").encode(), "c.bvh")
    for other in (b, c):
        assert other.names == a.names and np.array_equal(other.motion, a.motion)


@pytest.mark.parametrize("fraction", [0.0002, 0.005, 0.03, 0.2, 0.5, 0.9, 0.999])
def test_truncated_file_is_refused_naming_the_line(fraction: float) -> None:
    raw = shared_file("bvh/cmu/12_03_motionbuilder.bvh").read_bytes()
    cut = raw[: int(len(raw) * fraction)]
    with pytest.raises(FileFormatError) as err:
        parse_bvh(cut, "cut.bvh")
    msg = str(err.value)
    assert msg.startswith("cut.bvh, line ")
    assert "truncated" in msg
    line = int(re.match(r"cut\.bvh, line (\d+)", msg).group(1))
    lines = cut.decode().splitlines()
    # The reported line is the last line of the cut file (or the last frame it holds).
    assert len(lines) - 1 <= line <= len(lines)


def test_whole_lines_missing_are_refused() -> None:
    text = shared_file("bvh/cmu/02_02_daz.bvh").read_text()
    lines = text.splitlines()
    with pytest.raises(
        FileFormatError, match=r"short\.bvh, line \d+: truncated: the file declares 299 frames but holds 200"
    ):
        parse_bvh("\n".join(lines[: len(lines) - 99]), "short.bvh")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("Frame Time: 0.0333333", "Frame Time: 0"), r"line 28: the frame time must be a positive"),
        (lambda t: t.replace("Frame Time: 0.0333333", "Fps: 30"), r"line 28: expected 'Frame Time: <seconds>'"),
        (lambda t: t.replace("1 2 3 30 40 50", "1 2 x 30 40 50"), r"line 30: 'x' is not a number"),
        (lambda t: t.replace("1 2 3 30 40 50", "1 2 nan 30 40 50"), r"line 30: the value nan is not finite"),
        (lambda t: t.replace("-2\n", "-2 7\n"), r"line 30: a frame has 17 values, the hierarchy needs 16"),
        (
            lambda t: t.replace("CHANNELS 1 Yposition", "CHANNELS 1 Wposition"),
            r"line 23: joint 'OnlyY': unknown channel 'Wposition'",
        ),
        (lambda t: t.replace("OFFSET 7 8 9", "OFFSET 7 8"), r"line 23: an OFFSET value must be a number"),
        (lambda t: t.replace("HIERARCHY", "HIERARCHIE"), r"line 1: not a BVH file"),
        (lambda t: t.replace("MOTION\n", ""), r"line 26: expected ROOT, found 'Frames:'"),
        (lambda t: t[: t.index("MOTION")], r"line 25: .*truncated"),
        (lambda t: "", r"empty file"),
    ],
)
def test_corrupt_content_is_refused_with_a_clear_message(edit, message: str) -> None:
    with pytest.raises(FileFormatError, match=message):
        parse_bvh(edit(TINY), "bad.bvh")


def test_missing_file_is_a_file_format_error(tmp_path) -> None:
    with pytest.raises(FileFormatError, match="nothing.bvh: cannot read the file"):
        read_bvh(tmp_path / "nothing.bvh")


def test_up_axis_follows_the_body_not_the_convention() -> None:
    bvh = read_bvh(shared_file("bvh/cmu/02_02_daz.bvh"))
    assert detect_up_axis(bvh) == "Y"
    # The same body with Y and Z swapped (a Z-up export) is detected as Z-up.
    swap = [0, 2, 1]
    turned = BvhData(
        path=bvh.path,
        names=bvh.names,
        parents=bvh.parents,
        offsets=bvh.offsets[:, swap],
        end_sites=bvh.end_sites[:, swap],
        channels=bvh.channels,
        channel_starts=bvh.channel_starts,
        frame_time=bvh.frame_time,
        motion=bvh.motion,
        declared_frames=bvh.declared_frames,
    )
    assert detect_up_axis(turned) == "Z"


def test_a_file_without_frames_reads_but_gives_no_clip() -> None:
    text = TINY[: TINY.index("Frames: 2")] + "Frames: 0\nFrame Time: 0.04\n"
    bvh = parse_bvh(text, "still.bvh")
    assert bvh.frame_count == 0 and bvh.motion.shape == (0, 16)
    with pytest.raises(FileFormatError, match="no frames"):
        bvh.clip()

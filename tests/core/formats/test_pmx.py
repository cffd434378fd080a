"""The PMX reader (core/formats/pmx.py) and its conversion into generic rig definitions (core/formats/pmx_rig.py).

Expected values for the three shared files were read from their bytes by hand (``xxd``), not
from the reader: each is written next to the offsets it came from. The synthetic files are
written by :mod:`pmx_files` from the format's layout, independently of the reader.
"""

from __future__ import annotations

import math
import re
import struct
import tracemalloc

import numpy as np
import pytest

from marionette.core.controls.joint_limits import EulerBoxLimit, HingeLimit, limit_violations
from marionette.core.controls.stack import FixedAxisControl, IKControl, InheritControl
from marionette.core.errors import FileFormatError
from marionette.core.formats.pmx import BoneFlag, parse_pmx, read_pmx
from marionette.core.formats.pmx_rig import (
    DEFAULT_SCALE,
    blender_euler_box,
    blender_points,
    blender_quaternions,
    build_rig,
    ik_target_positions,
    link_frame,
    mmd_euler_order,
)
from marionette.core.rig.rotations import (
    axis_angle_from_quat,
    matrix_from_quat,
    quat_angle,
    quat_from_euler,
    quat_from_matrix,
    quat_multiply,
)
from tests.helpers.data import shared_file
from tests.helpers.pmx_files import (
    ANKLE,
    APPEND_ROTATION,
    APPEND_TRANSLATION,
    ARM,
    CENTER,
    GROOVE,
    KNEE,
    LEG,
    LEG_D,
    LEG_IK,
    LOCAL_APPEND,
    ROTATABLE,
    TOE,
    TWIST,
    TWIST_1,
    VISIBLE,
    Bone,
    Link,
    leg_rig_bones,
    write_pmx,
)

# --- the shared files, read by hand ------------------------------------------------------------

# All three: "PMX " at 0, version 00 00 00 40 (2.0) at 4, 08 settings at 8: encoding 00 (UTF-16LE),
# 00 additional UVs, every index size 01; four empty texts (length 0) at 0x11..0x20.
SHARED = {
    "pmx/bone_flag_test.pmx": {
        # bone count 03 at 0x31. Bone 0 at 0x35: name "bb30 f330 bf30 fc30", English "center",
        # position 0, parent ff at 0x5d, flags 1e 00 at 0x62, tail offset 0.
        # Bone 1 at 0x70: "b065 8f89 dc30 fc30 f330 3200" (新規ボーン2), English empty, parent ff at
        # 0x90, flags 9a 03 at 0x95, tail offset 0, append source ff at 0xa3, ratio 00 00 80 3f.
        # Bone 2 at 0xa8: 新規ボーン1, parent ff at 0xc8, flags 1a 03 at 0xcd, append source ff at
        # 0xdb, ratio 1.0. Then morphs 0 at 0xe0, 2 display frames at 0xe4 (Root, 表情), no rigid
        # bodies at 0x11e, no joints at 0x122, end at 0x126 = 294 bytes.
        "names": ["センター", "新規ボーン2", "新規ボーン1"],
        "english": ["center", "", ""],
        "parents": [-1, -1, -1],
        "flags": [0x001E, 0x039A, 0x031A],
        "positions": [(0, 0, 0)] * 3,
        "tail_bones": [-1, -1, -1],
        "tail_offsets": [(0, 0, 0)] * 3,
        "append": [(-1, 0.0), (-1, 1.0), (-1, 1.0)],
        "counts": {"vertices": 0, "faces": 0, "textures": 0, "materials": 0, "morphs": 0, "display frames": 2, "rigid bodies": 0, "joints": 0},
    },
    "pmx/bone_hierarchy_test.pmx": {
        # 5 bones at 0x31. 0x35 "root"/"center", flags 1e 00, tail offset 0. 0x70 "bone1": position
        # (0, 10, 0) (00 00 20 41 at 0x86), parent 00 at 0x8e, flags 1b 00 at 0x93, tail bone ff.
        # 0x96 "bone2": (5, 10, 0), parent ff at 0xb4, flags 1b 00, tail bone 00 at 0xbb. 0xbc
        # "bone3": (-5, 10, 0) (00 00 a0 c0 at 0xce), parent 00 at 0xda, flags 1b 00, tail bone 00
        # at 0xe1. 0xe2 新規ボーン1: (10, 10, 0), parent ff at 0x102, flags 1a 00, tail offset 0.
        # Display frames 2 at 0x119; end at 0x15b = 347 bytes.
        "names": ["root", "bone1", "bone2", "bone3", "新規ボーン1"],
        "english": ["center", "", "", "", ""],
        "parents": [-1, 0, -1, 0, -1],
        "flags": [0x001E, 0x001B, 0x001B, 0x001B, 0x001A],
        "positions": [(0, 0, 0), (0, 10, 0), (5, 10, 0), (-5, 10, 0), (10, 10, 0)],
        "tail_bones": [-1, -1, 0, 0, -1],
        "tail_offsets": [(0, 0, 0)] * 5,
        "append": [(-1, 0.0)] * 5,
        "counts": {"vertices": 0, "faces": 0, "textures": 0, "materials": 0, "morphs": 0, "display frames": 2, "rigid bodies": 0, "joints": 0},
    },
    "pmx/constraint_test.pmx": {
        # 0x30 (48) vertices at 0x21, 38 bytes each (BDEF1, one-byte bone index) up to 0x745;
        # 0x48 (72) face indices; 0 textures at 0x791; 2 materials "Box" at 0x795 (face counts
        # 0x24 + 0x24 = 72). 2 bones at 0x851: センター/center, flags 1e 00 at 0x882, tail offset
        # (0, 5, 0) (00 00 a0 40 at 0x888); 新規ボーン1 at 0x890: position (0, 5, 0), parent 00 at
        # 0x8b0, flags 1a 00 at 0x8b5, tail offset (0, 5, 0). No morphs, 2 display frames at
        # 0x8c7, 2 rigid bodies at 0x901 (新規剛体1, 新規剛体2), 1 joint at 0x9a5 (新規Joint1),
        # end at 0xa24 = 2596 bytes.
        "names": ["センター", "新規ボーン1"],
        "english": ["center", ""],
        "parents": [-1, 0],
        "flags": [0x001E, 0x001A],
        "positions": [(0, 0, 0), (0, 5, 0)],
        "tail_bones": [-1, -1],
        "tail_offsets": [(0, 5, 0), (0, 5, 0)],
        "append": [(-1, 0.0)] * 2,
        "counts": {"vertices": 48, "faces": 72, "textures": 0, "materials": 2, "morphs": 0, "display frames": 2, "rigid bodies": 2, "joints": 1},
    },
}


@pytest.mark.data
@pytest.mark.parametrize("relative", sorted(SHARED))
def test_shared_files_read_exactly(relative: str) -> None:
    expected = SHARED[relative]
    model = read_pmx(shared_file(relative))
    assert model.version == 2.0 and model.encoding == "utf-16-le" and model.additional_uvs == 0
    assert set(model.index_sizes.values()) == {1}
    assert [b.name for b in model.bones] == expected["names"]
    assert [b.name_english for b in model.bones] == expected["english"]
    assert [b.parent for b in model.bones] == expected["parents"]
    assert [int(b.flags) for b in model.bones] == expected["flags"]
    assert [b.tail_bone for b in model.bones] == expected["tail_bones"]
    np.testing.assert_array_equal([b.position for b in model.bones], np.array(expected["positions"], dtype=float))
    np.testing.assert_array_equal([b.tail_offset for b in model.bones], np.array(expected["tail_offsets"], dtype=float))
    assert [(b.append_parent, b.append_ratio) for b in model.bones] == expected["append"]
    assert {k: model.counts[k] for k in expected["counts"]} == expected["counts"]
    assert model.counts["bones"] == len(expected["names"])
    assert "soft bodies" not in model.counts  # a 2.0 file has none
    # Every record was walked with its real size: the last section ends on the last byte.
    assert model.trailing_bytes == 0
    assert not any(b.ik for b in model.bones)


@pytest.mark.data
def test_bone_flag_file_has_two_append_bones_without_a_source() -> None:
    model = read_pmx(shared_file("pmx/bone_flag_test.pmx"))
    append = [i for i, b in enumerate(model.bones) if b.is_append]
    assert append == [1, 2]
    # 0x039A: rotatable, visible, enabled, local append, append rotation and translation.
    assert model.bones[1].flags == (
        BoneFlag.ROTATABLE | BoneFlag.VISIBLE | BoneFlag.ENABLED | BoneFlag.LOCAL_APPEND | BoneFlag.APPEND_ROTATION | BoneFlag.APPEND_TRANSLATION
    )
    assert not model.bones[2].flags & BoneFlag.LOCAL_APPEND
    assert all(model.bones[i].appends_rotation and model.bones[i].appends_translation for i in append)
    rig = build_rig(model)
    # Both name no source bone (ff): nothing to inherit, and the rig says so for each.
    assert not any(isinstance(c, InheritControl) for c in rig.stack.controls)
    assert sum("no source bone" in n for n in rig.notes) == 2


@pytest.mark.data
def test_shared_hierarchy_becomes_a_skeleton_with_the_files_parents() -> None:
    model = read_pmx(shared_file("pmx/bone_hierarchy_test.pmx"))
    rig = build_rig(model)
    sk = rig.skeleton
    assert sorted(sk.names) == sorted(b.name for b in model.bones)
    for j, name in enumerate(sk.names):
        assert name == model.bones[rig.pmx_index[j]].name
        p = model.bones[rig.pmx_index[j]].parent
        assert (sk.parents[j] < 0) if p < 0 else sk.names[sk.parents[j]] == model.bones[p].name
    heads = sk.rest_placements()[:, :3, 3]
    # bone2 at (5, 10, 0) in MMD units: x stays x, MMD's up becomes Blender's Z.
    np.testing.assert_allclose(heads[sk.index("bone2")], [5 * DEFAULT_SCALE, 0.0, 10 * DEFAULT_SCALE], atol=1e-12)


# --- synthetic files: every section, every record kind ------------------------------------------

LAYOUTS = [
    pytest.param(2.0, "utf-16-le", 1, 0, id="2.0-utf16-1byte"),
    pytest.param(2.1, "utf-8", 2, 4, id="2.1-utf8-2byte-4uv"),
    pytest.param(2.1, "utf-16-le", 4, 1, id="2.1-utf16-4byte"),
]


def _sizes(size: int) -> dict[str, int]:
    return dict.fromkeys(("vertex", "texture", "material", "bone", "morph", "rigid body"), size)


@pytest.mark.parametrize("version, encoding, size, uvs", LAYOUTS)
def test_written_files_read_back_exactly(version: float, encoding: str, size: int, uvs: int) -> None:
    bones = leg_rig_bones()
    data, _ = write_pmx(bones, version=version, encoding=encoding, sizes=_sizes(size), additional_uvs=uvs)
    model = parse_pmx(data, "leg.pmx")
    assert model.version == version and model.encoding == encoding and model.trailing_bytes == 0
    assert model.index_sizes == _sizes(size)
    assert model.counts["vertices"] == (5 if version >= 2.1 else 4)
    assert model.counts["morphs"] == (11 if version >= 2.1 else 9)
    assert model.counts["materials"] == 2 and model.counts["rigid bodies"] == 2 and model.counts["joints"] == 1
    assert model.counts.get("soft bodies") == (1 if version >= 2.1 else None)
    f32 = np.float32
    for got, want in zip(model.bones, bones, strict=True):
        assert (got.name, got.name_english, got.parent, got.layer) == (want.name, want.name_en, want.parent, want.layer)
        assert int(got.flags) == want.all_flags()
        np.testing.assert_array_equal(got.position, np.array(want.position, dtype=f32))
        assert got.tail_bone == (-1 if want.tail_bone is None else want.tail_bone)
        if want.append is not None:
            assert (got.append_parent, got.append_ratio) == (want.append[0], float(f32(want.append[1])))
        if want.fixed_axis is not None:
            np.testing.assert_array_equal(got.fixed_axis, np.array(want.fixed_axis, dtype=f32))
        if want.local_axes is not None:
            np.testing.assert_array_equal(got.local_x, np.array(want.local_axes[0], dtype=f32))
            np.testing.assert_array_equal(got.local_z, np.array(want.local_axes[1], dtype=f32))
    ik = model.bones[5].ik
    assert ik is not None and ik.target == 3 and ik.loop_count == 40 and ik.limit_angle == 2.0
    assert [link.bone for link in ik.links] == [2, 1]
    assert ik.links[0].limited and not ik.links[1].limited
    np.testing.assert_array_equal(ik.links[0].limit_max, np.array([math.radians(-0.5), 0, 0], dtype=f32))


# --- corrupt input ---------------------------------------------------------------------------


def _leg_file(version: float = 2.1) -> tuple[bytes, dict[str, int]]:
    return write_pmx(leg_rig_bones(), version=version, sizes=_sizes(2), additional_uvs=1)


@pytest.mark.parametrize("version", [2.0, 2.1])
def test_truncation_at_each_section_boundary_names_the_missing_section(version: float) -> None:
    data, starts = _leg_file(version)
    assert len(starts) == (11 if version >= 2.1 else 10)
    for section, start in starts.items():
        if section == "header":
            continue
        with pytest.raises(FileFormatError) as err:
            parse_pmx(data[:start], "cut.pmx")
        message = str(err.value)
        assert f"{section} section" in message and "cut.pmx" in message and "truncated" in message, message


def test_truncation_anywhere_is_refused_never_crashes() -> None:
    data, starts = _leg_file()
    for cut in range(len(data)):
        with pytest.raises(FileFormatError) as err:
            parse_pmx(data[:cut])
        # The message names the section the cut falls in, and a byte inside what was given.
        inside = max((start, section) for section, start in starts.items() if start <= cut)[1]
        assert f"{inside} section" in str(err.value), (cut, str(err.value))
        at = re.search(r"byte (\d+):", str(err.value))
        assert at and starts[inside] <= int(at.group(1)) <= cut, (cut, str(err.value))


@pytest.mark.parametrize(
    "head, message",
    [
        (b"Pmd\x00\x00\x00\x80?", "PMD file"),
        (b"PMX", "not a PMX file"),
        (b"\x89PNG\r\n\x1a\n" + bytes(40), "not a PMX file"),
        (b"", "not a PMX file"),
    ],
)
def test_wrong_magic_is_refused(head: bytes, message: str) -> None:
    with pytest.raises(FileFormatError, match=message):
        parse_pmx(head)


def _patched(data: bytes, offset: int, fmt: str, value: float | int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_bad_header_settings_are_refused() -> None:
    data, _ = _leg_file()
    with pytest.raises(FileFormatError, match="unsupported PMX version 3.0"):
        parse_pmx(_patched(data, 4, "<f", 3.0))
    with pytest.raises(FileFormatError, match="text encoding 2"):
        parse_pmx(_patched(data, 9, "<B", 2))
    with pytest.raises(FileFormatError, match="bone index size is 3"):
        parse_pmx(_patched(data, 14, "<B", 3))
    with pytest.raises(FileFormatError, match="5 additional UV"):
        parse_pmx(_patched(data, 10, "<B", 5))


@pytest.mark.parametrize("section", ["vertices", "faces", "textures", "materials", "bones", "morphs", "display frames", "rigid bodies", "joints", "soft bodies"])
@pytest.mark.parametrize("count", [0x7FFFFFFF, -1])
def test_absurd_counts_fail_at_once_without_allocating(section: str, count: int) -> None:
    data, starts = _leg_file()
    bad = _patched(data, starts[section], "<i", count)
    tracemalloc.start()
    try:
        with pytest.raises(FileFormatError) as err:
            parse_pmx(bad)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"{section} section" in str(err.value)
    assert ("negative" if count < 0 else "declares 2147483647") in str(err.value)
    # At once: refused at the count itself, before reading a record; and nothing large allocated.
    assert f"byte {starts[section]}:" in str(err.value), str(err.value)
    assert peak < 1_000_000, peak


def _offset_of_bone_field(bones: list[Bone], which: int, field_offset: int) -> int:
    """Byte offset of a field of bone ``which`` in the one-byte-index, UTF-16 layout: the file is
    written up to that bone and measured."""
    data, starts = write_pmx(bones[:which], extras=True)
    return starts["morphs"] + field_offset


def test_absurd_inner_counts_and_lengths_fail_at_once() -> None:
    bones = leg_rig_bones()
    data, starts = write_pmx(bones)
    # The IK bone (index 5): name and English name texts, position, parent, level, flags, tail
    # offset, then the IK block: target (1), loops (4), angle (4), link count.
    start = _offset_of_bone_field(bones, 5, 0)
    names = 4 + len(LEG_IK.encode("utf-16-le")) + 4 + len(b"l\0e\0g\0 \0I\0K\0_\0L\0")
    link_count = start + names + 12 + 1 + 4 + 2 + 12 + 1 + 4 + 4
    assert struct.unpack_from("<i", data, link_count)[0] == 2
    with pytest.raises(FileFormatError, match=r"bones section.*declares 2147483647 IK links"):
        parse_pmx(_patched(data, link_count, "<i", 0x7FFFFFFF))
    with pytest.raises(FileFormatError, match="name of bone 5 has a negative length"):
        parse_pmx(_patched(data, start, "<i", -4))
    with pytest.raises(FileFormatError, match="ends inside the name of bone 5"):
        parse_pmx(_patched(data, start, "<i", 0x7FFFFFF0))


def test_broken_records_name_what_is_wrong() -> None:
    data, starts = _leg_file()
    # First vertex: 32 + 16 (one additional UV) bytes, then its weight type.
    with pytest.raises(FileFormatError, match="vertices section.*vertex 0 has weight type 9"):
        parse_pmx(_patched(data, starts["vertices"] + 4 + 48, "<B", 9))
    bones = leg_rig_bones()
    bones[2].parent = 100
    with pytest.raises(FileFormatError, match=r"the parent of bone 2 '左ひざ' is bone 100, but the model has 11 bones"):
        parse_pmx(write_pmx(bones)[0])
    bones = leg_rig_bones()
    bones[1].parent = 3  # 左足 under 左足首 under 左ひざ under 左足
    with pytest.raises(FileFormatError, match="the parents loop"):
        parse_pmx(write_pmx(bones)[0])
    bones = leg_rig_bones()
    bones[3].position = (1.0, math.nan, 0.0)
    with pytest.raises(FileFormatError, match="the position of bone 3 '左足首' is not finite"):
        parse_pmx(write_pmx(bones)[0])
    bones = leg_rig_bones()
    bones[5].links[1] = Link(1, ((0, 0, 0), (0, 0, 0)))
    written, starts = write_pmx(bones)
    raw = bytearray(written)
    # The limit switch of the second link is the byte before its 24 bytes of limits, the last
    # such run in the bones section.
    switch = raw.rfind(bytes([1]) + struct.pack("<6f", 0, 0, 0, 0, 0, 0), 0, starts["morphs"])
    raw[switch] = 7
    with pytest.raises(FileFormatError, match="limit switch 7"):
        parse_pmx(bytes(raw))


# --- axes and units ----------------------------------------------------------------------------


def test_points_keep_up_front_and_left_and_change_handedness() -> None:
    up, front, left = blender_points([[0, 1, 0], [0, 0, -1], [1, 0, 0]], 1.0)
    np.testing.assert_array_equal(up, [0, 0, 1])  # MMD +Y up -> Blender +Z up
    np.testing.assert_array_equal(front, [0, -1, 0])  # facing -Z -> facing -Y (Blender's front)
    np.testing.assert_array_equal(left, [1, 0, 0])  # the model's left hand stays at +X
    linear = blender_points(np.eye(3), 1.0).T
    assert np.linalg.det(linear) == pytest.approx(-1.0)  # a reflection: left- to right-handed


def test_rotations_convert_so_that_rotated_points_agree() -> None:
    rng = np.random.default_rng(7)
    q = rng.normal(size=(500, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    p = rng.normal(size=(500, 3))
    rotated_then_converted = blender_points(np.einsum("nij,nj->ni", matrix_from_quat(q), p), 1.0)
    converted_then_rotated = np.einsum("nij,nj->ni", matrix_from_quat(blender_quaternions(q)), blender_points(p, 1.0))
    assert np.abs(rotated_then_converted - converted_then_rotated).max() < 1e-12


@pytest.mark.parametrize(
    "lo, hi",
    [
        ((-math.pi, 0, 0), (math.radians(-0.5), 0, 0)),  # a knee: X beyond 90 degrees
        ((-0.5, -1.2, -2.5), (0.4, 1.0, 2.9)),  # X within 90 degrees: X in the middle
        ((-2.0, -0.3, -0.6), (1.9, 0.5, 0.2)),  # Y in the middle
        ((-2.0, -2.0, -1.0), (2.5, 2.0, 1.0)),  # Z in the middle
    ],
)
def test_euler_boxes_convert_into_blender_space_and_into_the_links_frame(lo, hi) -> None:
    """Rotations inside the MMD box (read in MMD's order) are inside the converted box, in world
    axes and in the link's own frame; rotations outside it are outside both."""
    rng = np.random.default_rng(3)
    order = mmd_euler_order(lo, hi)
    lo_b, hi_b, order_b = blender_euler_box(lo, hi)
    lo_a, hi_a = np.array(lo), np.array(hi)
    mid = 0.5 * (lo_a + hi_a)
    half = 0.5 * (hi_a - lo_a)
    inside = mid + half * rng.uniform(-0.999, 0.999, size=(400, 3))
    q_in = blender_quaternions(quat_from_euler(inside, order))
    world = EulerBoxLimit(lo_b, hi_b, order_b)
    assert world.violation(q_in).max() < 1e-9
    outside = inside.copy()
    k = int(np.argmax(hi_a - lo_a < 2 * math.pi - 0.2))  # an axis with room outside its range
    outside[:, k] = hi_a[k] + 0.1
    q_out = blender_quaternions(quat_from_euler(outside, order))
    assert world.violation(q_out).min() > 0.05
    d = rng.normal(size=3)
    frame, lo_f, hi_f = link_frame(lo_b, hi_b, order_b, d)
    assert np.allclose(frame.T @ frame, np.eye(3)) and np.linalg.det(frame) == pytest.approx(1.0)
    assert np.all(np.isin(np.round(frame, 12), [-1.0, 0.0, 1.0]))  # axis-aligned
    b = quat_from_matrix(frame)
    bc = b * np.array([1, -1, -1, -1])
    own = EulerBoxLimit(lo_f, hi_f, "XYZ")
    in_frame = quat_multiply(quat_multiply(bc, q_in), b)  # R = B^T Q B
    assert own.violation(in_frame).max() < 1e-9
    assert own.violation(quat_multiply(quat_multiply(bc, q_out), b)).min() > 0.05


# --- the leg rig: IK within limits, inheritance, fixed axes ------------------------------------


def _leg_rig(**kwargs):
    return build_rig(parse_pmx(write_pmx(leg_rig_bones(**kwargs))[0], "leg.pmx"))


def _identity_pose(n: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    rot = np.zeros((frames, n, 4))
    rot[..., 0] = 1.0
    return rot, np.zeros((frames, n, 3))


def test_leg_rig_definitions() -> None:
    rig = _leg_rig()
    sk = rig.skeleton
    assert not rig.notes
    kinds = {c.name: type(c) for c in rig.stack.controls}
    assert kinds == {
        f"IK {LEG_IK}": IKControl,
        f"Inherit {LEG_D}": InheritControl,
        f"Inherit {TWIST_1}": InheritControl,
        f"Inherit {GROOVE}": InheritControl,
        f"Fixed axis {TWIST}": FixedAxisControl,
    }
    ik = rig.stack.control(f"IK {LEG_IK}")
    assert isinstance(ik, IKControl) and ik.solver == "ccd" and ik.max_passes == 40
    assert [sk.names[j] for j in ik.path.joints] == [LEG, KNEE] and sk.names[ik.path.end_joint] == ANKLE
    assert rig.ik_targets[ik.name] == sk.index(LEG_IK)
    # The knee may bend about one axis only: a hinge about its own X, which is Blender's X, over
    # MMD's [-180, -0.5] degrees about MMD's X turned into [0.5, 180] (reflection: sign flips).
    assert ik.limits is not None and ik.limits[0] is None
    knee = ik.limits[1]
    assert isinstance(knee, HingeLimit)
    np.testing.assert_array_equal(knee.axis, [1, 0, 0])
    assert (knee.min_angle, knee.max_angle) == pytest.approx((math.radians(0.5), math.pi), abs=1e-7)
    knee_frame = sk.rest_placements()[sk.index(KNEE), :3, :3]
    np.testing.assert_allclose(knee_frame[:, 0], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(knee_frame[:, 1], [0, 0, -1], atol=1e-12)  # points down, the nearest axis
    # MMD order: after physics, transform level, index. The IK bone (level 1) runs before the
    # D-bone (level 2) and the D-bone reads the IK-corrected thigh.
    order = [c.name for c in rig.stack.controls]
    assert order.index(f"IK {LEG_IK}") < order.index(f"Inherit {LEG_D}")
    assert order.index(f"Fixed axis {TWIST}") < order.index(f"Inherit {TWIST_1}")
    # Names kept: Blender names are the Japanese ones, English alongside.
    j = sk.index(KNEE)
    assert (rig.japanese[j], rig.english[j]) == (KNEE, "knee_L")
    assert rig.tails.shape == (len(sk), 3)


def test_leg_rig_rest_is_the_model_in_blender_space() -> None:
    rig = _leg_rig()
    sk = rig.skeleton
    heads = sk.rest_placements()[:, :3, 3]
    s = DEFAULT_SCALE
    np.testing.assert_allclose(heads[sk.index(KNEE)], [1.1 * s, -0.2 * s, 5.5 * s], atol=1e-12)
    # Up, front and left survive: the hip is above the ankle, the toe in front of it (-Y), the
    # left leg on +X.
    assert heads[sk.index(LEG), 2] > heads[sk.index(ANKLE), 2]
    assert heads[sk.index(TOE), 1] < heads[sk.index(ANKLE), 1]
    assert heads[sk.index(LEG), 0] > 0
    # A bone without a limited link points at its child (+Y head to tail).
    thigh = sk.rest_placements()[sk.index(LEG)]
    to_knee = heads[sk.index(KNEE)] - heads[sk.index(LEG)]
    assert np.dot(thigh[:3, 1], to_knee / np.linalg.norm(to_knee)) == pytest.approx(1.0)
    # Local axes turn the arm's Z toward the file's local Z (MMD Z -> Blender Y).
    arm = sk.rest_placements()[sk.index(ARM), :3, :3]
    assert arm[:, 2] @ np.array([0.0, 1.0, 0.0]) > 0.99


def _reachable_targets(rig, frames: int, seed: int) -> np.ndarray:
    sk = rig.skeleton
    rest = sk.rest_placements()[:, :3, 3]
    hip, knee, ankle = rest[sk.index(LEG)], rest[sk.index(KNEE)], rest[sk.index(ANKLE)]
    a, b = np.linalg.norm(knee - hip), np.linalg.norm(ankle - knee)
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(frames, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d[:, 2] = -np.abs(d[:, 2])
    r = rng.uniform(abs(a - b) + 0.02 * (a + b), 0.995 * (a + b), size=frames)
    return hip + d * r[:, None]


def test_ik_leg_reaches_within_the_knee_limit() -> None:
    rig = _leg_rig()
    sk = rig.skeleton
    frames = 300
    rot, tr = _identity_pose(len(sk), frames)
    targets = _reachable_targets(rig, frames, seed=11)
    ik_bone = sk.index(LEG_IK)
    tr[:, ik_bone] = targets - sk.rest_placements()[ik_bone, :3, 3]  # the animation moves the IK bone
    name = f"IK {LEG_IK}"
    wanted = ik_target_positions(rig, rot, tr)[name]
    np.testing.assert_allclose(wanted, targets, atol=1e-12)
    inst = rig.stack.instance()
    inst.set_target(name, wanted)
    out = inst.evaluate(rot, tr)
    report = out.reports[name]
    control = rig.stack.control(name)
    assert isinstance(control, IKControl) and control.limits is not None
    world = sk.forward_kinematics(out.rotations, out.translations)
    ankle = world[:, sk.index(ANKLE), :3, 3]
    err = np.linalg.norm(ankle - targets, axis=1)
    assert err.max() <= 1e-3 and report.converged.all(), (err.max(), report.residual.max())
    violations = limit_violations(control.limits, out.rotations[:, list(control.path.joints)])
    assert violations.max() == 0.0
    knee = control.limits[1]
    assert isinstance(knee, HingeLimit)
    # Bent the one way the limit allows (a positive turn swings the shin backward, see
    # test_knee_limit_bends_backward), never past it.
    bend = knee.angle(out.rotations[:, sk.index(KNEE)])
    assert bend.min() >= math.radians(0.5) - 1e-12 and bend.max() <= math.pi
    print(f"leg IK: {frames} targets, largest ankle error {err.max():.2e} m, knee bend {math.degrees(bend.min()):.1f}..{math.degrees(bend.max()):.1f} deg")


def test_knee_limit_bends_backward() -> None:
    """MMD's knee range [-180, -0.5] degrees about X is a backward bend; after conversion a turn
    inside the range must swing the ankle behind the knee (+Y in Blender) and up."""
    rig = _leg_rig()
    sk = rig.skeleton
    control = rig.stack.control(f"IK {LEG_IK}")
    assert isinstance(control, IKControl) and control.limits is not None
    knee = control.limits[1]
    assert isinstance(knee, HingeLimit)
    rot, _ = _identity_pose(len(sk), 1)
    rot[0, sk.index(KNEE)] = [math.cos(math.pi / 4), *(math.sin(math.pi / 4) * knee.axis)]  # +90 degrees
    assert knee.violation(rot[0, sk.index(KNEE)]) == 0.0
    rest = sk.rest_placements()[:, :3, 3]
    bent = sk.forward_kinematics(rot)[0, :, :3, 3]
    k, a = sk.index(KNEE), sk.index(ANKLE)
    assert bent[a, 1] - bent[k, 1] > 0.9 * np.linalg.norm(rest[a] - rest[k])
    assert rest[a, 2] < bent[a, 2]


def test_ik_leg_out_of_reach_straightens_toward_the_target() -> None:
    rig = _leg_rig()
    sk = rig.skeleton
    rot, tr = _identity_pose(len(sk), 1)
    rest = sk.rest_placements()[:, :3, 3]
    hip = rest[sk.index(LEG)]
    reach = np.linalg.norm(rest[sk.index(KNEE)] - hip) + np.linalg.norm(rest[sk.index(ANKLE)] - rest[sk.index(KNEE)])
    direction = np.array([0.3, -0.2, -1.0]) / np.linalg.norm([0.3, -0.2, -1.0])
    target = hip + 1.5 * reach * direction
    inst = rig.stack.instance()
    name = f"IK {LEG_IK}"
    inst.set_target(name, target)
    out = inst.evaluate(rot, tr)
    world = sk.forward_kinematics(out.rotations)
    ankle = world[0, sk.index(ANKLE), :3, 3]
    aim = (ankle - hip) / np.linalg.norm(ankle - hip)
    # Aimed at the target, the knee as open as its limit allows (the rest already bends it).
    assert math.degrees(math.acos(min(1.0, aim @ direction))) < 1e-6
    control = rig.stack.control(name)
    assert isinstance(control, IKControl) and control.limits is not None
    knee = control.limits[1]
    assert isinstance(knee, HingeLimit)
    assert knee.angle(out.rotations[0, sk.index(KNEE)]) == pytest.approx(knee.min_angle, abs=1e-9)
    assert out.reports[name].residual[0] == pytest.approx(np.linalg.norm(target - ankle), abs=1e-12)
    assert np.linalg.norm(ankle - hip) > 0.99 * reach


def test_inherited_bones_follow_their_sources_by_the_ratio() -> None:
    rig = _leg_rig()
    sk = rig.skeleton
    frames = 50
    rng = np.random.default_rng(5)
    rot, tr = _identity_pose(len(sk), frames)
    twist = sk.index(TWIST)
    # Animate the twist bone freely; the fixed axis keeps its twist, the split bone half of that.
    q = rng.normal(size=(frames, 4))
    rot[:, twist] = q / np.linalg.norm(q, axis=1, keepdims=True)
    center = sk.index(CENTER)
    tr[:, center] = rng.normal(scale=0.1, size=(frames, 3))
    name = f"IK {LEG_IK}"
    targets = _reachable_targets(rig, frames, seed=2)
    inst = rig.stack.instance()
    inst.set_target(name, targets)
    out = inst.evaluate(rot, tr)
    frames_of = sk.rest_placements()[:, :3, :3]

    def model_turn(j: int) -> np.ndarray:
        """A joint's local rotation in model (world) axes: B R B^T."""
        return np.einsum("ij,tjk,lk->til", frames_of[j], matrix_from_quat(out.rotations[:, j]), frames_of[j])

    # Fixed axis: what is left of the twist bone's turn is about the file's axis only.
    axis = blender_points([0.97, -0.24, 0.0], 1.0)
    axis /= np.linalg.norm(axis)
    twist_q = quat_from_matrix(model_turn(twist))
    turn_axis, turn_angle = axis_angle_from_quat(twist_q)
    moving = turn_angle > 1e-6
    assert moving.sum() > 40
    assert np.abs(np.abs(np.einsum("ti,i->t", turn_axis[moving], axis)) - 1.0).max() < 1e-9
    # The split bone: half the twist bone's turn, about the same axis.
    split_q = quat_from_matrix(model_turn(sk.index(TWIST_1)))
    half = np.minimum(turn_angle, 2 * math.pi - turn_angle) * 0.5
    np.testing.assert_allclose(quat_angle(split_q), half, atol=1e-9)
    # The D-bone turns exactly as the IK-corrected thigh (ratio 1).
    d_turn = model_turn(sk.index(LEG_D))
    thigh_turn = model_turn(sk.index(LEG))
    assert np.abs(d_turn - thigh_turn).max() < 1e-9
    assert quat_angle(quat_from_matrix(thigh_turn)).max() > 0.3  # the IK did move the thigh
    # The groove moves by -0.5 of the centre's movement (translations in model axes as well).
    g = sk.index(GROOVE)
    moved = np.einsum("ij,tj->ti", frames_of[g], out.translations[:, g])
    source = np.einsum("ij,tj->ti", frames_of[center], tr[:, center])
    np.testing.assert_allclose(moved, -0.5 * source, atol=1e-12)


# --- what is not converted -------------------------------------------------------------------


def test_unconvertible_definitions_are_skipped_with_a_reason() -> None:
    bones = leg_rig_bones()
    bones.append(Bone("ループA", (0, 1, 0), 0, flags=ROTATABLE | VISIBLE | APPEND_ROTATION, append=(12, 0.5)))
    bones.append(Bone("ループB", (0, 1, 0), 0, flags=ROTATABLE | VISIBLE | APPEND_ROTATION, append=(11, 0.5)))
    bones.append(Bone("自分", (0, 1, 0), 0, flags=ROTATABLE | VISIBLE | APPEND_TRANSLATION, append=(13, 1.0)))
    bones.append(Bone("ゼロ", (0, 1, 0), 0, flags=ROTATABLE | VISIBLE | APPEND_ROTATION | LOCAL_APPEND, append=(1, 0.0)))
    # An IK whose links skip the knee (thigh then ankle): not one parent chain.
    bones.append(Bone("足IK2", (1, 1, 0), -1, ik_target=4, links=[Link(3), Link(1)]))
    bones.append(Bone("外部", (0, 2, 0), 0, external_key=3))
    rig = build_rig(parse_pmx(write_pmx(bones)[0]))
    notes = "\n".join(rig.notes)
    assert "'ループA' appends from a bone that appends from it in turn" in notes
    assert "'ループB' appends from a bone that appends from it in turn" in notes
    assert "'自分' appends from itself" in notes
    assert "'ゼロ' appends with ratio 0" in notes
    assert "IK '足IK2': its links do not form one parent chain" in notes
    assert "'外部' follows an external parent" in notes
    names = {c.name for c in rig.stack.controls}
    assert not {"Inherit ループA", "Inherit ループB", "Inherit 自分", "Inherit ゼロ", "IK 足IK2"} & names
    assert f"IK {LEG_IK}" in names  # the rest still converts


def test_names_are_unique_non_empty_and_fit_blender() -> None:
    bones = leg_rig_bones()
    bones.append(Bone(KNEE, (0, 2, 0), 0, name_en="knee_L"))  # a twin of 左ひざ, same English name
    bones.append(Bone("", (0, 3, 0), 0))
    long = "長い名前" * 10  # 120 bytes of UTF-8
    bones.append(Bone(long, (0, 4, 0), 0, name_en="long"))
    model = parse_pmx(write_pmx(bones, sizes=_sizes(2))[0])
    rig = build_rig(model)
    names = [rig.skeleton.names[rig.joint_of_bone(i)] for i in range(len(bones))]
    assert names[2] == KNEE and names[11] == f"{KNEE}.001" and names[12] == "bone12"
    assert len(names[13].encode("utf-8")) <= 63 and long.startswith(names[13])
    assert len(set(names)) == len(names)
    assert rig.japanese[rig.joint_of_bone(13)] == long  # the file's name is kept whole
    english = build_rig(model, names="english")
    en = [english.skeleton.names[english.joint_of_bone(i)] for i in range(len(bones))]
    # English where it is given and distinct; the twins' shared English name is not used.
    assert en[1] == "leg_L" and en[2] == KNEE and en[11] == f"{KNEE}.001" and en[13] == "long"


def test_rig_without_limits_leaves_the_knee_free() -> None:
    rig = _leg_rig(knee_limit=False)
    ik = rig.stack.control(f"IK {LEG_IK}")
    assert isinstance(ik, IKControl) and ik.limits is None
    # Without a limited link the knee points at its child like any other bone.
    sk = rig.skeleton
    rest = sk.rest_placements()
    to_ankle = rest[sk.index(ANKLE), :3, 3] - rest[sk.index(KNEE), :3, 3]
    assert rest[sk.index(KNEE), :3, 1] @ (to_ankle / np.linalg.norm(to_ankle)) == pytest.approx(1.0)


# --- rigid bodies and joints -----------------------------------------------------------------


def _physics_file(**body_changes):
    from tests.helpers.pmx_files import Body, JointRecord

    head = Body("頭", 3, 0, (1.5, 0.0, 0.0), (0.0, 17.0, 0.2), group=2, mask=0xFFFB, mode=0, mass=3.0)
    hair = Body("髪1", 4, 2, (0.3, 2.0, 0.0), (1.0, 16.0, 0.8), (0.1, 0.2, 0.3), group=3, mask=0xFFF7, damping=(0.9, 0.99), restitution=0.1, friction=0.2, mode=1)
    tip = Body("髪2", 4, 1, (0.2, 0.3, 0.4), (1.0, 14.0, 0.8), group=3, mode=2)
    for k, v in body_changes.items():
        setattr(hair, k, v)
    joint = JointRecord("髪J", 1, 2, (1.0, 15.0, 0.8), (0.0, 0.5, 0.0), move=((-0.1, 0.0, 0.0), (0.1, 0.0, 0.0)), turn=((-0.3, -0.2, -0.1), (0.3, 0.2, 0.1)), springs=((1.0, 2.0, 3.0), (40.0, 50.0, 60.0)))
    return write_pmx(leg_rig_bones(), bodies=[head, hair, tip], joints=[joint])[0]


def test_rigid_bodies_and_joints_read_back_as_written() -> None:
    from marionette.core.formats.pmx import BodyMode, BodyShape

    model = parse_pmx(_physics_file(), "physics.pmx")
    f32 = np.float32
    assert [b.name for b in model.rigid_bodies] == ["頭", "髪1", "髪2"] and model.counts["rigid bodies"] == 3
    head, hair, tip = model.rigid_bodies
    assert (head.bone, head.group, head.collides_with, head.shape, head.mode, head.mass) == (3, 2, 0xFFFB, BodyShape.SPHERE, BodyMode.FOLLOW_BONE, 3.0)
    assert (hair.shape, hair.mode, tip.shape, tip.mode) == (BodyShape.CAPSULE, BodyMode.DYNAMIC, BodyShape.BOX, BodyMode.DYNAMIC_BONE_POSITION)
    np.testing.assert_array_equal(hair.size, np.array([0.3, 2.0, 0.0], dtype=f32))
    np.testing.assert_array_equal(hair.rotation, np.array([0.1, 0.2, 0.3], dtype=f32))
    assert (hair.linear_damping, hair.angular_damping, hair.restitution, hair.friction) == tuple(float(f32(v)) for v in (0.9, 0.99, 0.1, 0.2))
    (joint,) = model.joints
    assert (joint.name, joint.kind, joint.body_a, joint.body_b) == ("髪J", 0, 1, 2)
    np.testing.assert_array_equal(joint.rotation_min, np.array([-0.3, -0.2, -0.1], dtype=f32))
    np.testing.assert_array_equal(joint.spring_rotation, np.array([40.0, 50.0, 60.0], dtype=f32))
    np.testing.assert_array_equal(joint.translation_max, np.array([0.1, 0.0, 0.0], dtype=f32))


@pytest.mark.parametrize(
    ("change", "message"),
    [({"shape": 3}, "has shape 3"), ({"mode": 4}, "has mode 4"), ({"bone": 40}, "follows bone 40"), ({"mass": float("nan")}, "not finite")],
)
def test_broken_rigid_bodies_are_refused_naming_the_section(change, message) -> None:
    with pytest.raises(FileFormatError, match=f"rigid bodies section.*{message}"):
        parse_pmx(_physics_file(**change), "broken.pmx")


def test_a_joint_to_a_body_the_model_has_not_is_refused() -> None:
    from tests.helpers.pmx_files import Body, JointRecord

    data = write_pmx(leg_rig_bones(), bodies=[Body("a", 0, 0, (1, 1, 1), (0, 0, 0))], joints=[JointRecord("j", 0, 5, (0, 0, 0))])[0]
    with pytest.raises(FileFormatError, match="joints section.*links rigid bodies 0 and 5; the model has 1"):
        parse_pmx(data, "joint.pmx")

"""Quadrupeds in numpy (docs/pipeline.md#quadrupeds): mapping by shape, facing of a horizontal
body, chains of different segment counts sharing the bend by arc length, travel scaled by pelvis
height, and rolled copies giving the same motion."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.mapping.quadruped import map_quadruped
from marionette.core.mapping.quadruped_profile import chain_slots, parse_slot
from marionette.core.retarget.body_chains import read_body
from marionette.core.retarget.geometric import RetargetOptions
from marionette.core.retarget.quadruped import bind_quadrupeds, pose_of, retarget_quadruped
from marionette.core.rig.rotations import FloatArray, matrix_from_quat, quat_from_axis_angle
from tests.helpers.quadruped_rigs import Quadruped, bend_clip, rolled_clip, rolled_skeleton

LEFT = (0.0, 1.0, 0.0)  # the synthetic rigs face +X with Z up: +Y is their left


def _turn(axis, degrees) -> np.ndarray:
    return matrix_from_quat(quat_from_axis_angle(axis, np.radians(degrees)))


def _mapped(rig: Quadruped, turn: np.ndarray | None = None, names: list[str] | None = None) -> dict[str, str]:
    heads, tails = rig.heads, rig.tails
    if turn is not None:
        heads, tails = heads @ turn.T, tails @ turn.T
    m = map_quadruped(names or rig.names, rig.parents, heads, tails)
    assert m.refusal is None, m.refusal
    return {s: mb.bone for s, mb in m.slots.items()}


@pytest.mark.parametrize(("counts", "face"), [((2, 1, 3, 3, 3), False), ((4, 2, 5, 3, 4), True), ((7, 3, 12, 4, 3), False)])
def test_a_built_quadruped_maps_by_shape_whatever_its_names_and_placement(counts, face):
    spine, neck, tail, front, hind = counts
    rig = Quadruped(spine, neck, tail, front, hind, face=face)
    expected = rig.slots(*counts, face=face)
    assert _mapped(rig) == expected
    # Lying Y-up and facing +Z (a glTF file read as it is), with names that say nothing.
    turn = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).T @ _turn((0, 0, 1), 90)
    rng = np.random.default_rng(sum(counts))
    scrambled = [f"j{k:03d}" for k in rng.permutation(len(rig.names))]
    by_index = {s: rig.names.index(b) for s, b in expected.items()}
    got = _mapped(rig, turn, scrambled)
    assert {s: scrambled.index(b) for s, b in got.items()} == by_index


def test_ears_and_jaw_are_found_on_the_head_and_carried():
    rig = Quadruped(2, 1, 3, 3, 3, face=True)
    expected = rig.slots(2, 1, 3, 3, 3, face=True)
    assert _mapped(rig) == expected
    other = Quadruped(3, 2, 4, 3, 4, length=1.4, face=True)
    o_slots = other.slots(3, 2, 4, 3, 4, face=True)
    binding = bind_quadrupeds(rig.skeleton, expected, other.skeleton, o_slots, rig.ends, other.ends)
    assert {"jaw", "ear.L", "ear.R"} <= set(binding.shared)
    # The jaw opens and the left ear folds back on the source: the same on the target.
    clip = bend_clip(rig.skeleton, {"jaw": (LEFT, 0.5), "ear0.L": (LEFT, -0.6)}, frames=3)
    result = retarget_quadruped(binding, clip)
    pose = other.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    src = pose_of(rig.skeleton, clip)
    for chain in ("jaw", "ear.L"):
        s_pts = binding.source.points[chain].positions(src[..., :3, :3], src[..., :3, 3])
        t_pts = binding.target.points[chain].positions(pose[..., :3, :3], pose[..., :3, 3])
        for k in range(t_pts.shape[1] - 1):
            a, b = s_pts[-1, k + 1] - s_pts[-1, k], t_pts[-1, k + 1] - t_pts[-1, k]
            assert np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))) < 1e-4, chain


def test_a_rig_with_two_legs_is_refused_as_a_quadruped():
    rig = Quadruped()
    keep = [i for i, n in enumerate(rig.names) if not n.startswith("front")]
    remap = {old: new for new, old in enumerate(keep)}
    parents = [remap.get(int(rig.parents[i]), -1) for i in keep]
    m = map_quadruped([rig.names[i] for i in keep], parents, rig.heads[keep], rig.tails[keep])
    assert m.refusal is not None and "not a quadruped" in m.refusal


def test_facing_of_a_horizontal_body_from_paws_and_head():
    rig = Quadruped()
    body = read_body(rig.skeleton, rig.slots(2, 1, 3, 3, 3), rig.ends)
    np.testing.assert_allclose(body.axes.forward, [1, 0, 0], atol=1e-9)
    np.testing.assert_allclose(body.axes.up, [0, 0, 1], atol=1e-9)
    np.testing.assert_allclose(body.axes.left, LEFT, atol=1e-9)
    assert body.hip_height == pytest.approx(0.8, rel=0.01)


def _chain_points(skeleton, placements, bones, end_bone, end_offset):
    pts = [placements[:, skeleton.index(b), :3, 3] for b in bones]
    tail = placements[:, skeleton.index(end_bone)]
    pts.append(tail[:, :3, :3] @ end_offset + tail[:, :3, 3])
    return np.stack(pts, axis=1)


def _at(points: np.ndarray, f: float) -> np.ndarray:
    """The point at arc fraction ``f`` of each frame's polyline, measured at rest (frame 0)."""
    steps = np.linalg.norm(np.diff(points[0], axis=0), axis=1)
    frac = np.concatenate([[0.0], np.cumsum(steps) / steps.sum()])
    return np.stack([[np.interp(f, frac, p[:, d]) for d in range(3)] for p in points])


@pytest.mark.parametrize(
    ("source_counts", "target_counts"),
    [((4, 1, 5, 3, 3), (7, 1, 12, 4, 4)), ((7, 2, 12, 4, 4), (4, 1, 5, 3, 3))],
    ids=["4 to 7 spine, 5 to 12 tail, 3 to 4 legs", "and back"],
)
def test_chains_of_other_segment_counts_share_the_bend_by_arc_length(source_counts, target_counts):
    src, tgt = Quadruped(*source_counts, length=1.0), Quadruped(*target_counts, length=1.6, height=1.2)
    s_slots, t_slots = src.slots(*source_counts), tgt.slots(*target_counts)
    # Every source bone of the spine, tail and left front leg turns about the body's left.
    bends = {b: (LEFT, np.radians(12.0)) for s, b in s_slots.items() if parse_slot(s)[0] in ("spine", "tail", "front_leg.L")}
    clip = bend_clip(src.skeleton, bends)
    binding = bind_quadrupeds(src.skeleton, s_slots, tgt.skeleton, t_slots, src.ends, tgt.ends)
    result = retarget_quadruped(binding, clip)
    s_pose = pose_of(src.skeleton, clip)
    t_pose = tgt.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    s_chains, t_chains = chain_slots(s_slots), chain_slots(t_slots)
    ends = {"spine": lambda c: (c["neck"][0], np.zeros(3))}

    def points(rig, pose, chains, chain):
        bones = chains[chain]
        if chain in ends:
            end, off = ends[chain](chains)
        else:
            i = rig.skeleton.index(bones[-1])
            end = bones[-1]
            off = (np.linalg.inv(rig.skeleton.rest_placements()[i]) @ np.append(rig.ends[i], 1.0))[:3]
        return _chain_points(rig.skeleton, pose, bones, end, off)

    for chain in ("spine", "tail", "front_leg.L", "hind_leg.R"):
        sp, tp = points(src, s_pose, s_chains, chain), points(tgt, t_pose, t_chains, chain)
        steps = np.linalg.norm(np.diff(tp[0], axis=0), axis=1)
        frac = np.concatenate([[0.0], np.cumsum(steps) / steps.sum()])
        for k in range(len(t_chains[chain])):
            want = _at(sp, frac[k + 1]) - _at(sp, frac[k])
            got = tp[:, k + 1] - tp[:, k]
            cos = np.einsum("ti,ti->t", want, got) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
            assert np.degrees(np.arccos(np.clip(cos, -1, 1))).max() < 1e-4, (chain, k)
    # The bend is shared, not piled up: the source turns 12 degrees at each joint, so no two
    # neighbouring target segments turn by more than 12 degrees per source joint they span, and
    # all of the curl arrives.
    for chain in ("spine", "tail"):
        sp, tp = points(src, s_pose, s_chains, chain)[-1], points(tgt, t_pose, t_chains, chain)[-1]
        seg = np.diff(tp, axis=0)
        seg /= np.linalg.norm(seg, axis=1, keepdims=True)
        turns = np.degrees(np.arccos(np.clip(np.einsum("ki,ki->k", seg[1:], seg[:-1]), -1, 1)))
        spans = -(-len(s_chains[chain]) // len(t_chains[chain]))
        assert turns.max() <= 12.0 * spans + 1e-6, chain
        whole = np.diff(sp, axis=0)
        total = np.degrees(np.arccos(np.clip(whole[0] @ whole[-1] / np.linalg.norm(whole[0]) / np.linalg.norm(whole[-1]), -1, 1)))
        assert turns.sum() == pytest.approx(total * (1 - 1 / len(t_chains[chain])), abs=12.0), chain


def test_travel_is_scaled_by_pelvis_height():
    src, tgt = Quadruped(height=0.8), Quadruped(height=1.6, length=2.0)
    slots = src.slots(2, 1, 3, 3, 3)
    clip = bend_clip(src.skeleton, {}, travel=3.0)
    binding = bind_quadrupeds(src.skeleton, slots, tgt.skeleton, slots, src.ends, tgt.ends)
    assert binding.horizontal_scale == binding.vertical_scale == pytest.approx(2.0, rel=1e-3)
    result = retarget_quadruped(binding, clip)
    pose = tgt.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    moved = pose[-1, tgt.skeleton.index("pelvis"), :3, 3] - pose[0, tgt.skeleton.index("pelvis"), :3, 3]
    np.testing.assert_allclose(moved, [6.0, 0.0, 0.0], atol=1e-3 * 6.0)


def test_explicit_travel_scales_replace_the_pelvis_height_ratio_across_and_up():
    """A body that travels 3 along +X while rising 0.2: with a horizontal scale of 0.5 and a
    vertical of 3 (the pelvis ratio is 2) the target's pelvis moves 1.5 across and 0.6 up; one
    ``scale`` sets both; an unusable scale is 1 and said."""
    src, tgt = Quadruped(height=0.8), Quadruped(height=1.6, length=2.0)
    slots = src.slots(2, 1, 3, 3, 3)
    clip = bend_clip(src.skeleton, {}, travel=3.0)
    rest = src.skeleton.rest_placements()
    lift = np.linalg.inv(rest[0][:3, :3]) @ np.array([0.0, 0.0, 0.2])
    clip.translations[:, 0] += np.linspace(0.0, 1.0, clip.frame_count)[:, None] * lift
    pelvis = tgt.skeleton.index("pelvis")

    def moved(options: RetargetOptions) -> tuple[FloatArray, tuple[str, ...]]:
        binding = bind_quadrupeds(src.skeleton, slots, tgt.skeleton, slots, src.ends, tgt.ends, options=options)
        result = retarget_quadruped(binding, clip)
        pose = tgt.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
        return pose[-1, pelvis, :3, 3] - pose[0, pelvis, :3, 3], binding.warnings

    np.testing.assert_allclose(moved(RetargetOptions())[0], [6.0, 0.0, 0.4], atol=1e-3 * 6.0)
    np.testing.assert_allclose(moved(RetargetOptions(horizontal_scale=0.5, vertical_scale=3.0))[0], [1.5, 0.0, 0.6], atol=1e-6)
    np.testing.assert_allclose(moved(RetargetOptions(scale=1.0))[0], [3.0, 0.0, 0.2], atol=1e-6)
    got, warnings = moved(RetargetOptions(scale=-2.0))
    np.testing.assert_allclose(got, [3.0, 0.0, 0.2], atol=1e-6)
    assert any("travel scale -2.0 is unusable; used 1" in w for w in warnings)


@pytest.mark.parametrize("mode", ["HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE"])
def test_root_motion_goes_where_asked(mode):
    src, tgt = Quadruped(height=0.8), Quadruped(height=1.6, length=2.0, root=True)
    slots = src.slots(2, 1, 3, 3, 3)
    clip = bend_clip(src.skeleton, {}, travel=3.0)
    binding = bind_quadrupeds(src.skeleton, slots, tgt.skeleton, slots, src.ends, tgt.ends, root_motion=mode)
    result = retarget_quadruped(binding, clip)
    np.testing.assert_allclose(result.root_motion[-1], [6.0, 0.0, 0.0], atol=1e-3 * 6.0)  # the travel, scaled
    pose = tgt.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    pelvis, root = tgt.skeleton.index("pelvis"), tgt.skeleton.index("root")
    moved = pose[-1, :, :3, 3] - pose[0, :, :3, 3]
    carried = mode in ("HIPS", "ROOT_BONE")
    np.testing.assert_allclose(moved[pelvis], [6.0 if carried else 0.0, 0.0, 0.0], atol=1e-3 * 6.0)
    np.testing.assert_allclose(moved[root], [6.0 if mode == "ROOT_BONE" else 0.0, 0.0, 0.0], atol=1e-9 + 1e-3 * 6.0)
    assert result.clip.coverage[root] == (1.0 if mode == "ROOT_BONE" else 0.0)
    if mode == "ROOT_BONE":  # the pelvis rides on the root: its own keys carry no travel
        np.testing.assert_allclose(result.clip.translations[:, pelvis], result.clip.translations[:1, pelvis].repeat(5, 0), atol=1e-9)


def test_rolled_copies_of_both_quadrupeds_give_every_bone_the_same_motion():
    rng = np.random.default_rng(7)
    src, tgt = Quadruped(4, 1, 5, 3, 3), Quadruped(2, 2, 3, 3, 4, length=1.3, height=1.0)
    s_slots, t_slots = src.slots(4, 1, 5, 3, 3), tgt.slots(2, 2, 3, 3, 4)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.6, 0.6))) for n in src.skeleton.names}
    clip = bend_clip(src.skeleton, bends, frames=6, travel=0.5)
    plain = bind_quadrupeds(src.skeleton, s_slots, tgt.skeleton, t_slots, src.ends, tgt.ends)
    base = tgt.skeleton.forward_kinematics(*(lambda c: (c.rotations, c.translations))(retarget_quadruped(plain, clip).clip))
    s_rolls = {n: float(rng.uniform(-np.pi, np.pi)) for n in src.skeleton.names}
    t_rolls = {n: float(rng.uniform(-np.pi, np.pi)) for n in tgt.skeleton.names}
    s_rolled, t_rolled = rolled_skeleton(src.skeleton, s_rolls), rolled_skeleton(tgt.skeleton, t_rolls)
    binding = bind_quadrupeds(s_rolled, s_slots, t_rolled, t_slots, src.ends, tgt.ends)
    out = retarget_quadruped(binding, rolled_clip(clip, src.skeleton, s_rolls)).clip
    pose = t_rolled.forward_kinematics(out.rotations, out.translations)
    for i, name in enumerate(tgt.skeleton.names):
        want = base[:, i, :3, :3] @ _turn((0, 1, 0), np.degrees(t_rolls[name]))
        rel = np.swapaxes(want, -1, -2) @ pose[:, i, :3, :3]
        angle = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))
        assert angle.max() < 0.1, name
        np.testing.assert_allclose(pose[:, i, :3, 3], base[:, i, :3, 3], atol=1e-9)

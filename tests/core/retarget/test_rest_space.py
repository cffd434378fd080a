"""Rest-space retarget (docs/methods.md#rest-space) on rigs built by the tests: Blender-bone rigs from the sample
humanoid and joint-frame rigs with non-identity attachment frames C0/C1. Each test measures an
angle, a position or a key against a value known independently of the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import ClipError, MappingError
from marionette.core.measure.figures import bone_direction_errors
from marionette.core.retarget.geometric import RetargetOptions, RigInput, bind, retarget, source_placements
from marionette.core.retarget.rest_space import bind_rest_space, clip_placements, retarget_rest_space
from marionette.core.rig import rotations as R
from marionette.core.rig.clip import Clip
from marionette.core.rig.samples import SampleRig, bone_matrix, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Joint, Skeleton
from tests.helpers.rig_inputs import rig_input

SOURCE = sample_humanoid()
CLIP = sample_walk(SOURCE, frames=32)



def run(target, source=SOURCE, clip=CLIP, options=None, **kw):
    binding = bind_rest_space(rig_input(source), rig_input(target), options, **kw)
    result = retarget_rest_space(binding, clip)
    world = target.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    return binding, result, world


def geometric_world(target, source=SOURCE, clip=CLIP, **options):
    res = retarget(bind(rig_input(source), rig_input(target), RetargetOptions(**options)), clip)
    return res, target.skeleton.forward_kinematics(res.clip.rotations, res.clip.translations)


def angles_deg(a, b):
    """Angle (degrees) between rotation matrices ``(..., 3, 3)``."""
    return np.degrees(R.quat_angle_between(R.quat_from_matrix(a), R.quat_from_matrix(b)))


def rebuilt(rig: SampleRig, rest: np.ndarray, tails: np.ndarray) -> SampleRig:
    sk = rig.skeleton
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    return SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest), rig.slots, tails)


def turned(rig: SampleRig, m: np.ndarray) -> SampleRig:
    """The same rig with its whole rest moved by the rigid 4x4 ``m``."""
    return rebuilt(rig, m @ rig.skeleton.rest_placements(), rig.tails @ m[:3, :3].T + m[:3, 3])


def lowered_arms(rig: SampleRig, degrees: float) -> SampleRig:
    """Same family, other rest pose: each arm (upper arm and everything below it) turned as one
    piece about the shoulder joint and the forward axis, bone axes included."""
    sk = rig.skeleton
    rest = sk.rest_placements().copy()
    tails = rig.tails.copy()
    for side, sign in (("L", 1.0), ("R", -1.0)):
        top = sk.index(f"UpperArm.{side}")
        pivot = rest[top, :3, 3].copy()
        g = R.matrix_from_quat(R.quat_from_axis_angle([0.0, 1.0, 0.0], sign * np.radians(degrees)))
        for i in [top, *sk.descendants(top)]:
            rest[i, :3, :3] = g @ rest[i, :3, :3]
            rest[i, :3, 3] = g @ (rest[i, :3, 3] - pivot) + pivot
            tails[i] = g @ (tails[i] - pivot) + pivot
    return rebuilt(rig, rest, tails)


def motion_on(rig: SampleRig, world: np.ndarray) -> Clip:
    """The clip that puts ``rig``'s bones at the placements ``world`` (same joint names)."""
    q, tr, _ = R.parts_from_transform(rig.skeleton.local_from_world(world))
    return Clip.from_frames(rig.skeleton.names, q, tr, fps=CLIP.fps)


def rotation_about(axis, degrees):
    return R.transform_from_parts(R.quat_from_axis_angle(axis, np.radians(degrees)), np.zeros(3))


def random_rotations(rng, n):
    return R.matrix_from_quat(R.quat_normalize(rng.normal(size=(n, 4))))


def joint_frame_rig(rig: SampleRig, rng, turn=None) -> SampleRig:
    """``rig`` as engine-style joints: every joint gets arbitrary axes and a child-side frame C1
    (rotated and offset from the part's origin), C0 chosen so the rest placements stay those of
    ``rig`` (with their axes turned). Placement = P C0 T C1^-1."""
    sk = rig.skeleton
    m = np.eye(4) if turn is None else turn
    rest = m @ sk.rest_placements()
    rest[:, :3, :3] = rest[:, :3, :3] @ random_rotations(rng, len(sk))
    c1 = np.broadcast_to(np.eye(4), (len(sk), 4, 4)).copy()
    c1[:, :3, :3] = random_rotations(rng, len(sk))
    c1[:, :3, 3] = rng.uniform(-0.05, 0.05, size=(len(sk), 3))
    joints = []
    for i, name in enumerate(sk.names):
        p = int(sk.parents[i])
        parent_rest = np.eye(4) if p < 0 else rest[p]
        c0 = np.linalg.inv(parent_rest) @ rest[i] @ c1[i]
        joints.append(Joint(name, None if p < 0 else sk.names[p], c0, c1[i]))
    out = Skeleton.from_joints(joints)
    assert out.child_frames is not None and out.names == sk.names
    assert np.abs(out.rest_placements() - rest).max() < 1e-12
    return SampleRig(out, rig.slots, rig.tails @ m[:3, :3].T + m[:3, 3])


def random_clip(rig: SampleRig, rng, frames=6, max_angle=1.2) -> Clip:
    n = len(rig.skeleton)
    axes = rng.normal(size=(frames, n, 3))
    q = R.quat_from_axis_angle(axes, rng.uniform(-max_angle, max_angle, size=(frames, n)))
    tr = np.zeros((frames, n, 3))
    hips = rig.skeleton.index(rig.slots["hips"])
    tr[:, hips] = rng.uniform(-0.2, 0.2, size=(frames, 3))
    return Clip.from_frames(rig.skeleton.names, q, tr, fps=24.0)


def parent_side_frames(sk: Skeleton) -> np.ndarray:
    """Rest orientation of each joint's parent-side frame, ``(P_rest C0)`` rotation part."""
    rest = sk.rest_placements()
    out = np.empty((len(sk), 3, 3))
    for i in range(len(sk)):
        p = int(sk.parents[i])
        parent = np.eye(4) if p < 0 else rest[p]
        out[i] = (parent @ sk.parent_frames[i])[:3, :3]
    return out


# --- Blender-bone rigs -----------------------------------------------------------------------


def test_a_rig_onto_itself_reproduces_placements_and_keys():
    b, res, wt = run(SOURCE)
    ws, _ = clip_placements(SOURCE.skeleton, CLIP)
    assert np.abs(ws - wt).max() < 1e-12
    assert np.allclose(b.carry, np.eye(3), atol=1e-15)
    assert angles_deg(R.matrix_from_quat(res.clip.rotations), R.matrix_from_quat(CLIP.rotations)).max() < 1e-9


def test_other_rolls_and_proportions_match_geometric_frames():
    rng = np.random.default_rng(5)
    target = sample_humanoid(proportions=0.85, rolls=rng.uniform(-np.pi, np.pi, len(SOURCE.skeleton)))
    _, res, wt = run(target)
    _, wg = geometric_world(target)
    assert angles_deg(wt[..., :3, :3], wg[..., :3, :3]).max() < 1e-9
    assert np.abs(wt[..., :3, 3] - wg[..., :3, 3]).max() < 1e-9
    # Each bone turns by its own roll relative to the source, constantly over time.
    ws, _ = clip_placements(SOURCE.skeleton, CLIP)
    rel = np.swapaxes(ws[..., :3, :3], -1, -2) @ wt[..., :3, :3]
    rest_rel = np.swapaxes(SOURCE.skeleton.rest_placements()[:, :3, :3], -1, -2) @ target.skeleton.rest_placements()[:, :3, :3]
    assert angles_deg(rel, rest_rel[None]).max() < 1e-9


@pytest.mark.parametrize(
    "label, m",
    [
        ("facing +X", rotation_about([0, 0, 1], 90)),
        ("facing +Y and shifted", rotation_about([0, 0, 1], 180) + np.pad(np.array([[0.5], [2.0], [0.0]]), ((0, 1), (3, 0)))),
        ("lying on its back", rotation_about([1, 0, 0], -90)),
    ],
)
def test_facing_alignment_carries_the_motion_into_the_targets_body_frame(label, m):
    target = turned(sample_humanoid(proportions=1.2), m)
    b, _, wt = run(target)
    assert np.abs(b.align - m[:3, :3]).max() < 1e-12, label
    _, _, plain = run(sample_humanoid(proportions=1.2))
    assert angles_deg(wt[..., :3, :3], m[:3, :3] @ plain[..., :3, :3]).max() < 1e-9, label
    assert np.abs(wt[..., :3, 3] - (plain[..., :3, 3] @ m[:3, :3].T + m[:3, 3])).max() < 1e-9, label


def test_rest_matching_lines_an_a_pose_source_up_with_a_t_pose_target():
    a_pose = lowered_arms(SOURCE, 45.0)
    truth = SOURCE.skeleton.forward_kinematics(CLIP.rotations, CLIP.translations)
    clip_a = motion_on(a_pose, truth)  # the same motion, played by the A-pose rig
    b_plain, _, w_plain = run(SOURCE, source=a_pose, clip=clip_a)
    b_match, _, w_match = run(SOURCE, source=a_pose, clip=clip_a, match_rest=True)
    arm = SOURCE.skeleton.index("UpperArm.L")
    # Without matching, the rest difference (45 degrees at the arms) shows in the result ...
    assert angles_deg(w_plain[:, arm, :3, :3], truth[:, arm, :3, :3]).min() == pytest.approx(45.0, abs=1.0)
    # ... with it, every bone plays the motion exactly, twist included (positions fix the twist
    # of a straight arm through where its hand and thumb point).
    assert angles_deg(w_match[..., :3, :3], truth[..., :3, :3]).max() < 1e-9
    assert np.abs(w_match[..., :3, 3] - truth[..., :3, 3]).max() < 1e-9
    matched = dict(zip(b_match.slots, np.degrees([np.arccos(np.clip((np.trace(m) - 1) / 2, -1, 1)) for m in b_match.rest_match]), strict=True))
    assert matched["upper_arm.L"] == pytest.approx(45.0, abs=1e-9) and matched["shoulder.L"] < 1e-9
    g = bind(rig_input(a_pose), rig_input(SOURCE))
    errors = bone_direction_errors(g, source_placements(g, clip_a), w_match)
    assert max(float(v.max()) for v in errors.values()) < 1e-5  # degrees; arccos resolution


def test_rest_matching_keeps_roll_differences():
    rng = np.random.default_rng(8)
    rolled = sample_humanoid(rolls=rng.uniform(-np.pi, np.pi, len(SOURCE.skeleton)))
    b, _, w_match = run(rolled, match_rest=True)
    _, _, w_plain = run(rolled)
    assert np.allclose(b.rest_match, np.eye(3), atol=1e-12)  # positions agree: nothing to match
    assert angles_deg(w_match[..., :3, :3], w_plain[..., :3, :3]).max() < 1e-9


def test_travel_is_scaled_by_hip_height_from_the_ground():
    target = sample_humanoid(proportions=0.7, leg_scale=1.2)
    b, res, wt = run(target)
    assert b.horizontal_scale == pytest.approx(b.target_hip_height / b.source_hip_height, rel=1e-12)
    assert b.horizontal_scale == pytest.approx(0.7 * 1.2, abs=0.03)
    ws, _ = clip_placements(SOURCE.skeleton, CLIP)
    hs, ht = ws[:, SOURCE.skeleton.index("Hips"), :3, 3], wt[:, target.skeleton.index("Hips"), :3, 3]
    travelled_s, travelled_t = np.linalg.norm((hs[-1] - hs[0])[:2]), np.linalg.norm((ht[-1] - ht[0])[:2])
    assert travelled_t == pytest.approx(travelled_s * b.horizontal_scale, rel=1e-9)
    # Same rule as the geometric frames (docs/pipeline.md#hips-height-and-travel): the hips land where that method puts them.
    _, wg = geometric_world(target)
    assert np.abs(ht - wg[:, target.skeleton.index("Hips"), :3, 3]).max() < 1e-12
    assert np.abs(res.root_motion[-1, :2] - (hs[-1] - hs[0])[:2] * b.horizontal_scale).max() < 0.05


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -2.0])
def test_unusable_scale_falls_back_to_one_and_says_so(bad):
    b = bind_rest_space(rig_input(SOURCE), rig_input(sample_humanoid(proportions=0.5)), RetargetOptions(scale=bad))
    assert (b.horizontal_scale, b.vertical_scale) == (1.0, 1.0)
    assert any("unusable" in w for w in b.warnings)
    b2 = bind_rest_space(rig_input(SOURCE), rig_input(SOURCE), RetargetOptions(horizontal_scale=2.0, vertical_scale=0.5))
    assert (b2.horizontal_scale, b2.vertical_scale) == (2.0, 0.5)


def test_translation_disabled_keys_zero_translation():
    _, res, wt = run(sample_humanoid(proportions=1.3), translate=False)
    assert np.all(res.clip.translations == 0.0)
    assert np.all(res.root_motion == 0.0)
    hips = SOURCE.skeleton.index("Hips")
    rest_hips = sample_humanoid(proportions=1.3).skeleton.rest_placements()[hips, :3, 3]
    assert np.abs(wt[:, hips, :3, 3] - rest_hips).max() < 1e-12


def test_source_coverage_carries_and_unmapped_targets_get_none():
    # The clip keys everything but the left forearm, and the right hand at half weight.
    keep = [n for n in CLIP.names if n != "Forearm.L"]
    clip = CLIP.subset(keep)
    cov = clip.coverage.copy()
    cov[keep.index("Hand.R")] = 0.5
    clip = Clip(clip.names, clip.times, clip.fps, clip.rotations, clip.translations, coverage=cov)
    target = sample_humanoid()
    slots = {k: v for k, v in target.slots.items() if not k.startswith("index")}
    b = bind_rest_space(rig_input(SOURCE), RigInput(target.skeleton, slots, target.tails))
    res = retarget_rest_space(b, clip)
    cov_t = dict(zip(target.skeleton.names, res.clip.coverage, strict=True))
    assert cov_t["Forearm.L"] == 0.0 and cov_t["Hand.R"] == 0.5 and cov_t["UpperArm.L"] == 1.0
    for name in ("Index1.L", "Index3.R"):
        i = target.skeleton.index(name)
        assert cov_t[name] == 0.0
        assert np.all(res.clip.rotations[:, i] == [1.0, 0.0, 0.0, 0.0])  # left at its rest


def with_root_and_ik_feet(rig: SampleRig) -> SampleRig:
    """A root bone at the origin carrying the hips *and the feet* (IK-style feet)."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    names = ["Root", *sk.names]
    parents = [None] + [("Root" if (p < 0 or n.startswith("Foot")) else sk.names[p]) for n, p in zip(sk.names, sk.parents, strict=True)]
    root = bone_matrix([0.0, 0.0, 0.0], [0.0, 0.3, 0.0])
    new = Skeleton.from_rest_matrices(names, parents, np.concatenate([root[None], rest]))
    tails = dict(zip(sk.names, rig.tails, strict=True)) | {"Root": np.array([0.0, 0.3, 0.0])}
    return SampleRig(new, rig.slots, np.stack([tails[n] for n in new.names]))


@pytest.mark.parametrize("mode", ["HIPS", "ROOT_BONE"])
def test_ik_feet_are_placed_by_the_anatomical_chain(mode):
    target = with_root_and_ik_feet(sample_humanoid(proportions=0.9))
    plain = sample_humanoid(proportions=0.9)
    b, res, wt = run(target, options=RetargetOptions(root_motion=mode))
    _, _, wp = run(plain)
    for name in ("Foot.L", "Toes.R", "Hips", "Hand.L"):
        i, j = target.skeleton.index(name), plain.skeleton.index(name)
        assert np.abs(wt[:, i, :3, 3] - wp[:, j, :3, 3]).max() < 1e-9, name
        assert angles_deg(wt[:, i, :3, :3], wp[:, j, :3, :3]).max() < 1e-9, name
    foot, root = target.skeleton.index("Foot.L"), target.skeleton.index("Root")
    assert res.clip.coverage[foot] == 1.0 and np.abs(res.clip.translations[:, foot]).max() > 0.01
    assert res.clip.coverage[root] == (1.0 if mode == "ROOT_BONE" else 0.0)
    assert (np.abs(res.clip.translations[:, root]).max() > 0.1) == (mode == "ROOT_BONE")


@pytest.mark.parametrize("mode", ["IN_PLACE", "OBJECT"])
def test_in_place_keeps_height_and_hands_travel_back(mode):
    _, res, wt = run(SOURCE, options=RetargetOptions(root_motion=mode))
    ws, _ = clip_placements(SOURCE.skeleton, CLIP)
    hips = SOURCE.skeleton.index("Hips")
    assert np.abs(wt[:, hips, :2, 3] - wt[0, hips, :2, 3]).max() < 1e-12
    assert np.abs(wt[:, hips, 2, 3] - ws[:, hips, 2, 3]).max() < 1e-9
    assert np.abs(res.root_motion[-1, :2] - (ws[-1, hips, :2, 3] - ws[0, hips, :2, 3])).max() < 0.05


def test_refuses_a_rig_without_the_minimum_and_a_clip_with_nan_keys():
    slots = {k: v for k, v in SOURCE.slots.items() if k != "shin.R"}
    with pytest.raises(MappingError, match=r"shin\.R"):
        bind_rest_space(rig_input(SOURCE), RigInput(SOURCE.skeleton, slots, SOURCE.tails))
    rot = CLIP.rotations.copy()
    rot[3, 5, 1] = np.nan
    bad = Clip.from_frames(CLIP.names, rot, CLIP.translations, fps=CLIP.fps, name="Broken")
    with pytest.raises(ClipError, match="non-finite"):
        retarget_rest_space(bind_rest_space(rig_input(SOURCE), rig_input(SOURCE)), bad)


# --- joint-frame rigs (C0, C1 not identity) --------------------------------------------------


def test_joint_frames_known_rotation_gives_the_analytic_local_rotation():
    """One joint turned by a known rotation in its attachment frame: the target joint turns by the
    same angle about the axis carried by G = (Pt C0t)^T A (Ps C0s), the rotation between the two
    joints' parent-side rest frames; nothing else moves."""
    rng = np.random.default_rng(21)
    source = joint_frame_rig(SOURCE, rng)
    turn = rotation_about([0, 0, 1], 90)
    target = joint_frame_rig(sample_humanoid(proportions=1.1), rng, turn)
    n = len(source.skeleton)
    elbow = source.skeleton.index("Forearm.L")
    axis, angle = np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0), np.radians(40.0)
    q = R.quat_identity((1, n))
    q[0, elbow] = R.quat_from_axis_angle(axis, angle)
    clip = Clip.from_frames(source.skeleton.names, q, np.zeros((1, n, 3)), fps=24.0)
    b, res, _ = run(target, source=source, clip=clip)
    assert np.abs(b.align - turn[:3, :3]).max() < 1e-12
    g = parent_side_frames(target.skeleton)[elbow].T @ b.align @ parent_side_frames(source.skeleton)[elbow]
    got_axis, got_angle = R.axis_angle_from_quat(res.clip.rotations[0, elbow])
    assert got_angle == pytest.approx(angle, abs=1e-9)
    assert np.abs(got_axis - g @ axis).max() < 1e-9
    others = np.delete(np.arange(n), elbow)
    assert R.quat_angle(res.clip.rotations[0, others]).max() < 1e-9
    assert np.abs(res.clip.translations[0, others]).max() < 1e-9  # joints turn about their pivots


def test_joint_frames_every_joint_conjugated_by_its_parent_side_frames():
    rng = np.random.default_rng(22)
    source = joint_frame_rig(SOURCE, rng)
    turn = rotation_about([0, 0, 1], -90)
    target = joint_frame_rig(sample_humanoid(proportions=0.9), rng, turn)
    clip = random_clip(source, rng)
    b, res, wt = run(target, source=source, clip=clip)
    g = np.swapaxes(parent_side_frames(target.skeleton), -1, -2) @ b.align @ parent_side_frames(source.skeleton)
    expected = g @ R.matrix_from_quat(clip.rotations) @ np.swapaxes(g, -1, -2)
    assert np.abs(R.matrix_from_quat(res.clip.rotations) - expected).max() < 1e-9
    # And through the attachment frames the target's joints take the aligned, carried orientation.
    ws = source.skeleton.forward_kinematics(clip.rotations, clip.translations)
    carried = b.align @ ws[:, b.source_bones, :3, :3] @ b.carry
    assert np.abs(wt[:, b.target_bones, :3, :3] - carried).max() < 1e-9
    hips = target.skeleton.index("Hips")
    non_root = np.delete(np.arange(len(target.skeleton)), hips)
    assert np.abs(res.clip.translations[:, non_root]).max() < 1e-9


def test_toes_carry_their_own_motion():
    # The rest-space carry has the toes as any joint; geometric frames carry their bend relative
    # to the foot (both counted from the canonical pose), so both methods agree on it.
    toe = SOURCE.skeleton.index("Toes.L")
    rot = CLIP.rotations.copy()
    bend = np.radians(25.0) * np.sin(np.linspace(0.0, np.pi, CLIP.frame_count))
    rot[:, toe] = R.quat_from_axis_angle([1.0, 0.0, 0.0], bend)
    clip = Clip.from_frames(CLIP.names, rot, CLIP.translations, fps=CLIP.fps)
    target = sample_humanoid(proportions=1.2, rolls=np.random.default_rng(1).uniform(-3.0, 3.0, len(SOURCE.skeleton)))
    _, res, wt = run(target, clip=clip)
    ws, _ = clip_placements(SOURCE.skeleton, clip)
    foot = SOURCE.skeleton.index("Foot.L")

    def bend(rig, w):
        """Angle of the toe's turn relative to the foot, from its rest relation (roll-free)."""
        rest = rig.skeleton.rest_placements()[:, :3, :3]
        rel = np.swapaxes(w[:, foot, :3, :3], -1, -2) @ w[:, toe, :3, :3]
        return angles_deg(rel, (rest[foot].T @ rest[toe])[None])

    src_bend, tgt_bend = bend(SOURCE, ws), bend(target, wt)
    assert np.abs(src_bend).max() > 20.0
    assert np.abs(tgt_bend - src_bend).max() < 1e-9
    _, wg = geometric_world(target, clip=clip)
    assert np.abs(bend(target, wg) - src_bend).max() < 1e-6
    assert res.clip.coverage[toe] == 1.0

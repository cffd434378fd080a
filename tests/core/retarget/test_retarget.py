"""Geometric-frame retarget (docs/methods.md#geometric-frames) on rigs built by the tests: each test varies one property of
the target or the source (rolls, rest pose, facing, proportions, hierarchy) and measures that the
result does not depend on it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from marionette.core.errors import MappingError, RigError
from marionette.core.measure.figures import bone_direction_errors, limb_plane_errors, measure
from marionette.core.retarget.facing import Leg, infer_facing
from marionette.core.retarget.geometric import RetargetOptions, RigInput, bind, retarget, source_placements
from marionette.core.rig import rotations as R
from marionette.core.rig.samples import SampleRig, bone_matrix, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.rig_inputs import rig_input

SOURCE = sample_humanoid()
CLIP = sample_walk(SOURCE, frames=40)



def run(target: SampleRig, source: SampleRig = SOURCE, clip=CLIP, **options):
    binding = bind(rig_input(source), rig_input(target), RetargetOptions(**options))
    result = retarget(binding, clip)
    world_t = target.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    return binding, result, source_placements(binding, clip), world_t


def transformed(rig: SampleRig, m: np.ndarray) -> SampleRig:
    """The same rig with its whole rest moved by the 4x4 ``m`` in skeleton space."""
    rest = m @ rig.skeleton.rest_placements()
    # Bone rests are rigid (a rig in centimetres has long offsets, not scaled axes).
    rest[:, :3, :3] /= np.linalg.norm(rest[:, :3, :3], axis=-2, keepdims=True)
    parents = [None if p < 0 else rig.skeleton.names[p] for p in rig.skeleton.parents]
    sk = Skeleton.from_rest_matrices(rig.skeleton.names, parents, rest)
    tails = rig.tails @ m[:3, :3].T + m[:3, 3]
    return SampleRig(sk, rig.slots, tails)


def rotation_about(axis, degrees, scale=1.0):
    return R.transform_from_parts(R.quat_from_axis_angle(axis, np.radians(degrees)), np.zeros(3), [scale] * 3)


def test_a_rig_onto_itself_reproduces_the_clip_exactly():
    _, _, ws, wt = run(SOURCE)
    assert np.abs(ws - wt).max() < 1e-9


def test_roll_invariance_random_rolls_on_every_target_bone():
    rng = np.random.default_rng(11)
    plain = sample_humanoid(arms_down_angle=0.3, proportions=0.9)
    rolled = sample_humanoid(arms_down_angle=0.3, proportions=0.9, rolls=rng.uniform(-np.pi, np.pi, len(plain.skeleton)))
    b, _, ws, wt_plain = run(plain)
    _, _, _, wt_rolled = run(rolled)
    # Same positions for every bone at every frame ...
    assert np.abs(wt_plain[..., :3, 3] - wt_rolled[..., :3, 3]).max() < 1e-9
    # ... and the full orientation differs exactly by each bone's own roll change (constant in time).
    rel = np.swapaxes(wt_plain[..., :3, :3], -1, -2) @ wt_rolled[..., :3, :3]
    rest_rel = plain.skeleton.rest_placements()[:, :3, :3].transpose(0, 2, 1) @ rolled.skeleton.rest_placements()[:, :3, :3]
    assert np.degrees(R.quat_angle_between(R.quat_from_matrix(rel), R.quat_from_matrix(rest_rel)[None])).max() < 0.1
    errs = bone_direction_errors(b, ws, wt_rolled)
    assert max(v.max() for v in errs.values()) < 0.05


@pytest.mark.parametrize("degrees", [45, 80])
def test_rest_pose_invariance_arms_lowered_from_t_pose(degrees):
    _, _, _, wt_t = run(sample_humanoid())
    _, _, _, wt_a = run(sample_humanoid(arms_down_angle=np.radians(degrees)))
    assert np.abs(wt_t[..., :3, 3] - wt_a[..., :3, 3]).max() < 1e-9
    # Orientation of the bones that did not change their rest: identical.
    assert np.abs(wt_t[..., :3, :3] - wt_a[..., :3, :3])[:, :5].max() < 1e-9


def test_source_rest_pose_does_not_matter_either():
    a_pose_source = sample_humanoid(arms_down_angle=np.radians(50))
    # The same motion authored on an A-pose source: same world positions, so same target result.
    clip_t = CLIP
    ws_t = SOURCE.skeleton.forward_kinematics(clip_t.rotations, clip_t.translations)
    rot = a_pose_source.skeleton.local_from_world(_rebase(ws_t, SOURCE, a_pose_source))
    q, tr, _ = R.parts_from_transform(rot)
    clip_a = CLIP.__class__.from_frames(a_pose_source.skeleton.names, q, tr, fps=CLIP.fps)
    target = sample_humanoid(proportions=1.1)
    _, _, _, w1 = run(target)
    _, _, _, w2 = run(target, source=a_pose_source, clip=clip_a)
    assert np.abs(w1[..., :3, 3] - w2[..., :3, 3]).max() < 1e-9


def _rebase(world, rig_from, rig_to):
    """World placements of ``rig_from`` re-expressed with ``rig_to``'s rest orientations (same
    positions, each bone's orientation changed by its rest difference)."""
    delta = np.linalg.inv(rig_from.skeleton.rest_placements()) @ rig_to.skeleton.rest_placements()
    delta[:, :3, 3] = 0.0
    return world @ delta


@pytest.mark.parametrize(
    "label, m",
    [
        ("facing +X", rotation_about([0, 0, 1], 90)),
        ("facing +Y", rotation_about([0, 0, 1], 180)),
        ("lying on its back (Z-up file read as Y-up)", rotation_about([1, 0, 0], -90)),
        ("x100 and turned", rotation_about([0, 0, 1], -90, 100.0)),
    ],
)
def test_target_facing_comes_from_the_body(label, m):
    target = transformed(sample_humanoid(), m)
    b, _, ws, wt = run(target)
    assert b.target_facing.source == "inferred", label
    expected_forward = m[:3, :3] @ np.array([0.0, -1.0, 0.0])
    assert np.allclose(b.target_facing.forward, expected_forward / np.linalg.norm(expected_forward), atol=1e-9)
    # The result is the plain result carried by m: the same motion, in the target's own space.
    _, _, _, plain = run(sample_humanoid())
    assert np.abs(wt[..., :3, 3] - (plain[..., :3, 3] @ m[:3, :3].T + m[:3, 3])).max() < 1e-6 * np.abs(m[:3, :3]).max()


def test_source_lying_on_its_back_still_retargets_upright():
    lying = transformed(SOURCE, rotation_about([1, 0, 0], 90))
    ws = SOURCE.skeleton.forward_kinematics(CLIP.rotations, CLIP.translations)
    m = rotation_about([1, 0, 0], 90)
    local = lying.skeleton.local_from_world(m @ ws)
    q, tr, _ = R.parts_from_transform(local)
    clip = CLIP.__class__.from_frames(lying.skeleton.names, q, tr, fps=CLIP.fps)
    _, _, _, upright = run(SOURCE)
    _, _, _, from_lying = run(SOURCE, source=lying, clip=clip)
    assert np.abs(upright[..., :3, 3] - from_lying[..., :3, 3]).max() < 1e-9


def test_proportions_scale_travel_by_hip_height_from_the_ground():
    target = sample_humanoid(proportions=0.8, leg_scale=1.25)
    b, _, ws, wt = run(target)
    assert b.horizontal_scale == pytest.approx(b.target_hip_height / b.source_hip_height)
    report = measure(b, ws, wt)
    assert report["summary"]["hips_height_error"] < 1e-9
    assert report["summary"]["max_direction_error"] < 0.01
    # The target walks the source's distance times the scale.
    hips_s, hips_t = (w[:, i, :3, 3] for w, i in ((ws, SOURCE.skeleton.index("Hips")), (wt, target.skeleton.index("Hips"))))
    assert np.linalg.norm(hips_t[-1] - hips_t[0]) == pytest.approx(np.linalg.norm(hips_s[-1] - hips_s[0]) * b.horizontal_scale, rel=1e-6)


def test_explicit_scales_and_unusable_scale_falls_back_to_one():
    b, _, _, _ = run(sample_humanoid(proportions=0.5), scale=float("nan"))
    assert b.horizontal_scale == 1.0 and any("unusable" in w for w in b.warnings)
    b2, _, _, _ = run(sample_humanoid(proportions=0.5), horizontal_scale=2.0, vertical_scale=0.5)
    assert (b2.horizontal_scale, b2.vertical_scale) == (2.0, 0.5)


@pytest.mark.parametrize("mode", ["IN_PLACE", "OBJECT"])
def test_in_place_keeps_height_and_drops_travel(mode):
    b, result, ws, wt = run(SOURCE, root_motion=mode)
    hips = SOURCE.skeleton.index("Hips")
    assert np.abs(wt[:, hips, :2, 3] - wt[0, hips, :2, 3]).max() < 1e-9
    assert np.abs(wt[:, hips, 2, 3] - ws[:, hips, 2, 3]).max() < 1e-9
    # The travel is handed back for the object (or discarded) rather than lost silently.
    assert np.abs(result.root_motion[-1] - (ws[-1, hips, :3, 3] - ws[0, hips, :3, 3]) * [1, 1, 0]).max() < 0.05


def with_root_and_ik_feet(rig: SampleRig) -> SampleRig:
    """Add a root bone at the origin; parent the hips *and the feet* to it (IK-style feet)."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    names = ["Root", *sk.names]
    parents = [None] + [("Root" if (p < 0 or n.startswith("Foot")) else sk.names[p]) for n, p in zip(sk.names, sk.parents, strict=True)]
    root = bone_matrix([0.0, 0.0, 0.0], [0.0, 0.3, 0.0])
    new = Skeleton.from_rest_matrices(names, parents, np.concatenate([root[None], rest]))
    tails = {n: t for n, t in zip(sk.names, rig.tails, strict=True)}
    tails["Root"] = np.array([0.0, 0.3, 0.0])
    return SampleRig(new, rig.slots, np.stack([tails[n] for n in new.names]))


@pytest.mark.parametrize("mode", ["HIPS", "ROOT_BONE"])
def test_feet_parented_to_the_root_follow_the_anatomical_chain(mode):
    target = with_root_and_ik_feet(sample_humanoid(proportions=0.9))
    plain = sample_humanoid(proportions=0.9)
    b, result, ws, wt = run(target, root_motion=mode)
    _, _, _, wp = run(plain)
    for name in ("Foot.L", "Foot.R", "Toes.L", "Hips", "Hand.R"):
        i, j = target.skeleton.index(name), plain.skeleton.index(name)
        assert np.abs(wt[:, i, :3, 3] - wp[:, j, :3, 3]).max() < 1e-9, name
    foot = target.skeleton.index("Foot.L")
    assert result.clip.coverage[foot] == 1.0
    assert np.abs(result.clip.translations[:, foot]).max() > 0.01  # its location is keyed
    root = target.skeleton.index("Root")
    assert result.clip.coverage[root] == (1.0 if mode == "ROOT_BONE" else 0.0)


def with_extra_bone(rig: SampleRig, parent: str, child: str, new: str) -> SampleRig:
    """Split the segment parent->child by a new bone halfway (an extra spine segment)."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    heads = {n: rest[i, :3, 3] for i, n in enumerate(sk.names)}
    tails = {n: t for n, t in zip(sk.names, rig.tails, strict=True)}
    mid = 0.5 * (heads[parent] + heads[child])
    mats = {n: rest[i] for i, n in enumerate(sk.names)}
    mats[parent] = bone_matrix(heads[parent], mid)
    mats[new] = bone_matrix(mid, heads[child])
    tails[parent], tails[new] = mid, heads[child]
    names = list(sk.names) + [new]
    par = {n: (None if p < 0 else sk.names[p]) for n, p in zip(sk.names, sk.parents, strict=True)}
    par[child], par[new] = new, parent
    out = Skeleton.from_rest_matrices(names, [par[n] for n in names], np.stack([mats[n] for n in names]))
    return SampleRig(out, rig.slots, np.stack([tails[n] for n in out.names]))


def test_extra_bones_between_mapped_bones_keep_segment_directions():
    target = with_extra_bone(sample_humanoid(), "Spine", "Chest", "Spine2")
    b, result, ws, wt = run(target)
    errs = bone_direction_errors(b, ws, wt)
    assert max(v.max() for v in errs.values()) < 1e-4  # degrees; arccos resolution
    assert result.clip.coverage[target.skeleton.index("Spine2")] == 1.0  # handled, not left out
    # The source's spine bend is spread over the two target bones, not taken at one joint: each
    # turns by about half of what the single source bone turns.
    def turn(clip, rig, bone):
        return np.degrees(R.quat_angle(clip.rotations[:, rig.skeleton.index(bone)]))

    src_turn = turn(CLIP, SOURCE, "Spine")
    lower, upper = turn(result.clip, target, "Spine"), turn(result.clip, target, "Spine2")
    moving = src_turn > 2.0
    assert moving.sum() > 5
    assert np.all(upper[moving] > 0.25 * src_turn[moving]) and np.all(lower[moving] > 0.25 * src_turn[moving])
    assert np.all(lower[moving] < 0.8 * src_turn[moving])
    # And the source may have the extra bone: its segment still maps.
    source = with_extra_bone(SOURCE, "Spine", "Chest", "Spine2")
    ws_x = SOURCE.skeleton.forward_kinematics(CLIP.rotations, CLIP.translations)
    world = np.concatenate([ws_x, ws_x[:, [SOURCE.skeleton.index("Spine")]]], axis=1)
    order = [list(SOURCE.skeleton.names + ("Spine2",)).index(n) for n in source.skeleton.names]
    world = world[:, order]
    spine2 = source.skeleton.index("Spine2")
    world[:, spine2] = world[:, source.skeleton.index("Spine")] @ np.linalg.inv(SOURCE.skeleton.rest_placements()[SOURCE.skeleton.index("Spine")]) @ source.skeleton.rest_placements()[spine2]
    q, tr, _ = R.parts_from_transform(source.skeleton.local_from_world(world))
    clip = CLIP.__class__.from_frames(source.skeleton.names, q, tr, fps=CLIP.fps)
    b2, _, ws2, wt2 = run(sample_humanoid(), source=source, clip=clip)
    assert max(v.max() for v in bone_direction_errors(b2, ws2, wt2).values()) < 1e-4


def test_unmapped_bones_are_left_untouched():
    target = sample_humanoid()
    slots = {k: v for k, v in target.slots.items() if not k.startswith(("index", "thumb"))}
    b = bind(rig_input(SOURCE), RigInput(target.skeleton, slots, target.tails))
    res = retarget(b, CLIP)
    for name in ("Index1.L", "Thumb2.R"):
        assert res.clip.coverage[target.skeleton.index(name)] == 0.0
    assert res.clip.coverage[target.skeleton.index("Middle1.L")] == 1.0


def test_knees_and_elbows_bend_in_the_source_plane():
    b, _, ws, wt = run(sample_humanoid(arms_down_angle=1.2, proportions=1.2))
    planes = limb_plane_errors(b, ws, wt)
    assert set(planes) == {"arm.L", "arm.R", "leg.L", "leg.R"}
    for limb, err in planes.items():
        assert np.isfinite(err).sum() > 5, limb
        assert np.nanmax(err) < 0.01, limb


def test_refuses_a_rig_missing_the_minimum_naming_it():
    target = sample_humanoid()
    slots = {k: v for k, v in target.slots.items() if k not in ("hand.L", "foot.R")}
    with pytest.raises(MappingError, match=r"hand\.L.*foot\.R|foot\.R.*hand\.L"):
        bind(rig_input(SOURCE), RigInput(target.skeleton, slots, target.tails))


def test_nan_keys_are_refused_before_anything_is_computed():
    rot = CLIP.rotations.copy()
    rot[5, 3, 2] = np.nan
    bad = CLIP.__class__.from_frames(CLIP.names, rot, CLIP.translations, fps=CLIP.fps, name="Broken")
    b = bind(rig_input(SOURCE), rig_input(sample_humanoid()))
    with pytest.raises(Exception, match="non-finite"):
        retarget(b, bad)


def test_facing_vote_reports_cues_and_admits_unknown():
    up = np.array([0.0, 0.0, 1.0])
    fwd_leg = Leg(hip=[0.1, 0, 1], knee=[0.1, -0.03, 0.5], ankle=[0.1, 0, 0.1], toe=[0.1, -0.15, 0.02])
    f = infer_facing([0, 0, 1], [0, 0, 1.6], [fwd_leg, fwd_leg])
    assert np.allclose(f.forward, [0, -1, 0]) and np.allclose(f.up, up)
    assert all(c.agrees for c in f.cues if c.strength > 0) and len(f.cues) == 4
    # One leg says forward, the other (mirrored in Y) says backward with equal strength: unknown.
    back_leg = Leg(hip=[-0.1, 0, 1], knee=[-0.1, 0.03, 0.5], ankle=[-0.1, 0, 0.1], toe=[-0.1, 0.15, 0.02])
    unknown = infer_facing([0, 0, 1], [0, 0, 1.6], [fwd_leg, back_leg])
    assert unknown.forward is None and unknown.source == "unknown"
    with pytest.raises(RigError, match="explicitly"):
        unknown.basis()
    # Straight legs and feet pointing nowhere: no cue at all.
    flat = Leg(hip=[0.1, 0, 1], knee=[0.1, 0, 0.5], ankle=[0.1, 0, 0.1], toe=[0.1, 0, 0.0])
    assert infer_facing([0, 0, 1], [0, 0, 1.6], [flat, flat]).forward is None


def test_cancelled_cues_fall_back_and_say_so():
    # A rig whose feet point straight down and whose legs are straight: the facing is unknown,
    # the retarget falls back to the left/right labels and records a warning.
    rig = sample_humanoid()
    sk = rig.skeleton
    rest = sk.rest_placements()
    tails = rig.tails.copy()
    for side in "LR":
        for name in (f"Foot.{side}", f"Toes.{side}"):
            i = sk.index(name)
            head = rest[i, :3, 3]
            rest[i] = bone_matrix(head - [0, 0, 0.0] if name.startswith("Foot") else head, head - [0, 0, 0.05])
            tails[i] = head - [0, 0, 0.05]
        toes = sk.index(f"Toes.{side}")
        foot = sk.index(f"Foot.{side}")
        rest[toes, :3, 3] = rest[foot, :3, 3] - [0, 0, 0.05]
        tails[foot] = rest[toes, :3, 3]
        tails[toes] = rest[toes, :3, 3] - [0, 0, 0.03]
        shin = sk.index(f"Shin.{side}")
        rest[shin, 1, 3] = 0.0
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    flat = SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest), rig.slots, tails)
    b = bind(rig_input(SOURCE), rig_input(flat))
    assert b.target_facing.source.startswith("fallback")
    assert any("could not be inferred" in w for w in b.warnings)
    assert np.allclose(b.target_facing.forward, [0, -1, 0], atol=1e-9)


def arms_turned(rig: SampleRig, axis, degrees: float) -> SampleRig:
    """The rig with both arm chains (upper arm down) turned about ``axis`` at the shoulder joint,
    mirrored for the right side, applied as the new rest."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    tails = rig.tails.copy()
    for side, mirror in (("L", [1.0, 1.0, 1.0]), ("R", [1.0, -1.0, -1.0])):
        # Mirroring a rotation through the body's midplane (x -> -x) flips the axis's y and z.
        turn = R.matrix_from_quat(R.quat_from_axis_angle(np.asarray(axis, dtype=float) * mirror, np.radians(degrees)))
        top = sk.index(f"UpperArm.{side}")
        pivot = rest[top, :3, 3].copy()
        for i in [top, *sk.descendants(top)]:
            rest[i, :3, :3] = turn @ rest[i, :3, :3]
            rest[i, :3, 3] = turn @ (rest[i, :3, 3] - pivot) + pivot
            tails[i] = turn @ (tails[i] - pivot) + pivot
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    return SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest), rig.slots, tails)


@pytest.mark.parametrize("lowered", [45.0, 80.0])
def test_lowering_arms_that_point_forward_keeps_every_orientation(lowered):
    # Arms a little forward of the T-pose (as many rigs are): a single least rotation back to the
    # T-pose would leave a twist on the arm; turning about the lowering axis first leaves none.
    forward_t = arms_turned(sample_humanoid(), [0.0, 0.0, 1.0], -8.0)
    lowered_rig = arms_turned(forward_t, [0.0, 1.0, 0.0], lowered)
    _, _, _, w1 = run(forward_t)
    _, _, _, w2 = run(lowered_rig)
    assert np.abs(w1[..., :3, 3] - w2[..., :3, 3]).max() < 1e-9
    # Both rests canonicalise to the same pose, so every bone ends with the same world orientation
    # (twist about its own axis included).
    played = R.quat_from_matrix(np.swapaxes(w1[..., :3, :3], -1, -2) @ w2[..., :3, :3])
    assert np.degrees(R.quat_angle(played)).max() < 0.01


def test_a_clip_collapsing_a_segment_falls_back_to_the_bones_rotation():
    # Translation keys that pull the forearm onto the upper arm's head leave the upper arm's
    # segment without a direction; its frame then follows the bone's rotation, as it would
    # without the collapse, instead of aiming along float noise.
    sk = SOURCE.skeleton
    upper, fore = sk.index("UpperArm.L"), sk.index("Forearm.L")
    offset = sk.rest_placements()[fore, :3, 3] - sk.rest_placements()[upper, :3, 3]
    tr = CLIP.translations.copy()
    # In the forearm's parent-relative rest frame the offset to cancel is its rest head offset.
    tr[:, fore] = -(np.linalg.inv(sk.parent_frames[fore][:3, :3]) @ sk.parent_frames[fore][:3, 3])
    tr[:, fore] += np.random.default_rng(9).normal(scale=1e-7, size=tr[:, fore].shape)  # float noise
    collapsed = CLIP.__class__.from_frames(CLIP.names, CLIP.rotations, tr, fps=CLIP.fps)
    ws = sk.forward_kinematics(collapsed.rotations, collapsed.translations)
    assert np.linalg.norm(ws[:, fore, :3, 3] - ws[:, upper, :3, 3], axis=-1).max() < 1e-5 * np.linalg.norm(offset)
    target = sample_humanoid(proportions=0.9)
    _, _, _, plain = run(target)
    _, _, _, from_collapsed = run(target, clip=collapsed)
    i = target.skeleton.index("UpperArm.L")
    angle = R.quat_angle_between(R.quat_from_matrix(plain[:, i, :3, :3]), R.quat_from_matrix(from_collapsed[:, i, :3, :3]))
    assert np.degrees(angle).max() < 1e-6


def _copy(clip, writeable: bool = True):
    """``clip`` in arrays of its own; read-only ones as a clip read again unchanged from Blender."""
    rotations, translations = clip.rotations.copy(), clip.translations.copy()
    rotations.flags.writeable = translations.flags.writeable = writeable
    return replace(clip, rotations=rotations, translations=translations)


def test_a_read_only_clip_posed_once_gives_the_keys_of_a_clip_posed_anew():
    """The source pose of a read-only clip is kept between retargets; the keys are those of the
    same clip in writable arrays (posed every time), whatever the target (turned, other
    proportions), options or frames, and a writable clip edited in place between retargets is
    posed with its edit."""
    plain = sample_humanoid(arms_down_angle=0.3, proportions=0.9)
    turned = transformed(plain, rotation_about([0.0, 0.0, 1.0], 90.0))
    frozen = _copy(CLIP, writeable=False)

    def keys(target, clip, **options):
        result = retarget(bind(rig_input(SOURCE), rig_input(target), RetargetOptions(**options)), clip)
        return np.concatenate([result.clip.rotations.ravel(), result.clip.translations.ravel()])

    for target, options in ((plain, {}), (turned, {"plant_feet": True}), (SOURCE, {"root_motion": "OBJECT"}), (plain, {})):
        kept = keys(target, frozen, **options)  # posed once, then taken again
        assert np.array_equal(kept, keys(target, frozen, **options))
        assert np.array_equal(kept, keys(target, _copy(CLIP), **options))
    edited = _copy(CLIP)
    before = keys(plain, edited)
    edited.rotations[10:, SOURCE.skeleton.index("Thigh.L")] = R.quat_from_axis_angle([1.0, 0.0, 0.0], 0.5)
    after = keys(plain, edited)
    assert not np.array_equal(before, after)
    assert np.array_equal(after, keys(plain, _copy(edited)))

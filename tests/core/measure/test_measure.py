"""Measurement building blocks checked against direct definitions."""

from __future__ import annotations

import numpy as np

from marionette.core.measure.figures import capsule_rasters


def _dense_raster(segments: np.ndarray, radius: float, size: int) -> np.ndarray:
    """Every pixel centre against every segment: the definition, at full cost."""
    g = np.linspace(-1.5, 1.5, size)
    py, px = np.meshgrid(g, g, indexing="ij")
    inside = np.zeros((size, size), dtype=bool)
    for (ax, ay), (bx, by) in segments:
        d = np.array([bx - ax, by - ay])
        denom = max(float(d @ d), 1e-300)
        t = np.clip(((px - ax) * d[0] + (py - ay) * d[1]) / denom, 0.0, 1.0)
        ex, ey = px - ax - t * d[0], py - ay - t * d[1]
        inside |= ex * ex + ey * ey <= radius * radius
    return inside


def test_capsule_rasters_match_the_dense_definition() -> None:
    rng = np.random.default_rng(11)
    # Segments inside, crossing the border, wholly outside, and of zero length.
    segs = rng.uniform(-2.0, 2.0, size=(6, 25, 2, 2))
    segs[:, 0, 1] = segs[:, 0, 0]
    segs[:, 1] += 5.0
    for size, radius in ((48, 0.1), (31, 0.23)):
        fast = capsule_rasters(segs, radius, size)
        for r in range(segs.shape[0]):
            dense = _dense_raster(segs[r], radius, size)
            assert dense.sum() > 0
            assert np.array_equal(fast[r], dense), f"raster {r} differs in {int((fast[r] != dense).sum())} pixels"


def test_capsule_rasters_skip_non_finite_segments() -> None:
    segs = np.array([[[[0.0, 0.0], [0.5, 0.0]], [[np.nan, 0.0], [1.0, 1.0]]]])
    fast = capsule_rasters(segs, 0.1, 48)
    assert np.array_equal(fast[0], _dense_raster(segs[0, :1], 0.1, 48))


def test_rotation_since_first_frame_ignores_bone_axes_and_sees_a_lost_twist() -> None:
    """The rotation since the first frame compares the motion itself: a rig onto itself is off by
    nothing; other bone axes (every bone's rest rotated about itself) change nothing; a hand that
    keeps its direction but stops turning about it on the second half of the clip is off by
    exactly that turn, which bone directions alone cannot show."""
    from marionette.core.measure.figures import rotation_since_first_frame, rotation_since_first_frame_by_group
    from marionette.core.retarget.geometric import RigInput, bind, source_placements
    from marionette.core.rig import rotations as R
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    rig = sample_humanoid()
    clip = sample_walk(rig, frames=40)
    binding = bind(RigInput(rig.skeleton, rig.slots, rig.tails), RigInput(rig.skeleton, rig.slots, rig.tails))
    src = source_placements(binding, clip)
    same = rotation_since_first_frame_by_group(binding, src, src)
    assert set(same) == {"trunk", "arms", "hands", "legs", "feet/toes", "head"}
    assert all(g["off_max"] < 1e-6 for g in same.values())
    assert same["legs"]["source"] > 5.0 and abs(same["legs"]["target"] - same["legs"]["source"]) < 1e-9

    rng = np.random.default_rng(3)
    axes = R.matrix_from_quat(R.quat_from_axis_angle(rng.normal(size=(len(rig.skeleton), 3)), rng.uniform(-np.pi, np.pi, len(rig.skeleton))))
    rolled = src.copy()
    rolled[..., :3, :3] = src[..., :3, :3] @ axes
    assert max(g["off_max"] for g in rotation_since_first_frame_by_group(binding, src, rolled).values()) < 1e-6

    hand = binding.source.slots["hand.L"]
    twisted = src.copy()
    along = src[:, hand, :3, 1]  # the hand bone's own axis (Y), frame by frame
    turn = R.matrix_from_quat(R.quat_from_axis_angle(along, np.radians(np.where(np.arange(40) >= 20, 5.0, 0.0))))
    twisted[:, hand, :3, :3] = turn @ src[:, hand, :3, :3]
    off = rotation_since_first_frame(binding, src, twisted)["hand.L"]["off"]
    assert np.allclose(off, np.where(np.arange(40) >= 20, 5.0, 0.0), atol=1e-6)
    assert abs(rotation_since_first_frame_by_group(binding, src, twisted)["hands"]["off"] - 5.0 * 20 / 40 / 2) < 1e-6


def _spine_rig(spine_bones: int):
    """The sample humanoid (no fingers) with a straight upright spine of ``spine_bones`` bones
    from 1.08 to 1.45 m; the neck and clavicles hang from its top bone."""
    from marionette.core.rig import samples
    from marionette.core.rig.skeleton import Skeleton

    names = ["Spine", "Chest", "UpperChest"][:spine_bones]
    slots = ["spine", "chest", "upper_chest"][:spine_bones]
    cuts = np.linspace(1.08, 1.45, spine_bones + 1)
    rows = [samples._BODY[0]]
    for k, (name, slot) in enumerate(zip(names, slots, strict=True)):
        rows.append((name, rows[-1][0], slot, (0.0, 0.0, cuts[k]), (0.0, 0.0, cuts[k + 1])))
    rows += [("Neck", names[-1], "neck", (0.0, 0.0, 1.45), (0.0, 0.0, 1.55)), ("Head", "Neck", "head", (0.0, 0.0, 1.55), (0.0, 0.0, 1.75))]
    for name, parent, slot, head, tail in samples._BODY[5:]:
        if slot is not None and slot.split("_")[0] in ("thumb", "index", "middle", "ring", "little"):
            continue
        rows.append((name, names[-1] if parent == "Chest" else parent, slot, head, tail))
    rest = np.stack([samples.bone_matrix(h, t) for _, _, _, h, t in rows])
    sk = Skeleton.from_rest_matrices([r[0] for r in rows], [r[1] for r in rows], rest)
    return sk, {r[2]: r[0] for r in rows if r[2] is not None}, np.array([r[4] for r in rows], dtype=np.float64)


def _bent(sk, deltas: dict[str, np.ndarray], frames: int) -> np.ndarray:
    """Placements of ``sk`` where each named bone's orientation is turned by its skeleton-space
    rotation ``deltas[name]`` ``(T, 3, 3)`` from rest (children follow; others keep their rest
    orientation relative to their parent)."""
    from marionette.core.rig import rotations as R

    rest = sk.rest_placements()[:, :3, :3]
    eye = np.broadcast_to(np.eye(3), (frames, 3, 3))
    total = {}
    local = np.broadcast_to(np.eye(3), (frames, len(sk), 3, 3)).copy()
    for i, name in enumerate(sk.names):
        parent = sk.names[sk.parents[i]] if sk.parents[i] >= 0 else None
        d_parent = total.get(parent, eye)
        total[name] = deltas.get(name, d_parent)
        local[:, i] = rest[i].T @ np.swapaxes(d_parent, -1, -2) @ total[name] @ rest[i]
    return sk.forward_kinematics(R.quat_from_matrix(local))


def test_trunk_over_spines_of_different_counts_is_judged_by_the_run_as_a_whole() -> None:
    """A one-bone spine onto a three-bone spine carrying the same overall motion (the bend on the
    first bone, the twist spread over the three; the shoulders and the neck base end up where the
    source's do) reads ~0 on the trunk, where bone for bone it reads the spread twist; 10 degrees
    too much twist on the top of the run is still caught; equal counts keep the per-bone figure."""
    from marionette.core.measure.figures import rotation_since_first_frame_by_group
    from marionette.core.retarget.geometric import RigInput, bind
    from marionette.core.rig import rotations as R

    t = 30
    ramp = np.linspace(0.0, 1.0, t)
    bend = R.matrix_from_quat(R.quat_from_axis_angle(np.array([1.0, 0.3, 0.0]), np.radians(35.0) * ramp))
    hips = R.matrix_from_quat(R.quat_from_axis_angle(np.array([0.0, 0.2, 1.0]), np.radians(12.0) * ramp))

    def twist(deg: float) -> np.ndarray:
        return R.matrix_from_quat(R.quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.radians(deg) * ramp))

    one, three = _spine_rig(1), _spine_rig(3)
    binding = bind(RigInput(*one), RigInput(*three))
    assert np.allclose(binding.align, np.eye(3), atol=1e-9)
    src = _bent(one[0], {"Hips": hips, "Spine": hips @ bend @ twist(30.0)}, t)
    tgt = _bent(three[0], {"Hips": hips, "Spine": hips @ bend @ twist(10.0), "Chest": hips @ bend @ twist(20.0), "UpperChest": hips @ bend @ twist(30.0)}, t)
    same = rotation_since_first_frame_by_group(binding, src, tgt)["trunk"]
    assert same["off"] < 0.01 and same["off_max"] < 0.01
    assert same["per_bone_off"] > 3.0  # bone for bone: the spine slot turned 10 of the source's 30 degrees
    assert same["source"] > 10.0

    # The chest turned 10 degrees too far about the spine from the second frame on.
    extra = R.matrix_from_quat(R.quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.radians(np.where(ramp > 0, 10.0, 0.0))))
    wrong = _bent(three[0], {"Hips": hips, "Spine": hips @ bend @ twist(10.0), "Chest": hips @ bend @ twist(20.0), "UpperChest": hips @ bend @ twist(30.0) @ extra}, t)
    caught = rotation_since_first_frame_by_group(binding, src, wrong)["trunk"]
    assert caught["off"] > 5.0 and abs(caught["off_max"] - 10.0) < 0.01

    alike = bind(RigInput(*three), RigInput(*three))
    per_bone = rotation_since_first_frame_by_group(alike, tgt, wrong)["trunk"]
    assert "per_bone_off" not in per_bone
    assert abs(per_bone["off"] - 10.0 / 4 * (t - 1) / t) < 0.01  # one bone of four, 10 degrees after the first frame

"""Planted feet (core/retarget/foot_plant.py): contacts found on the source, target ankles held on their
spot while the source foot is planted, nothing else touched."""

from __future__ import annotations

import numpy as np
import pytest
from test_retarget import rig_input, with_root_and_ik_feet

from marionette.core.measure.figures import foot_skating
from marionette.core.retarget.foot_plant import (
    DROP_EASE,
    DROP_SPEED,
    LEAD,
    MAX_DROP,
    REACH,
    Leg,
    hold_offsets,
    needed_drop,
    plant_legs,
    planted_frames,
    smooth_drop,
)
from marionette.core.retarget.geometric import (
    RetargetOptions,
    bind,
    ground_points,
    heights_along,
    retarget,
    source_placements,
)
from marionette.core.rig.samples import sample_humanoid, sample_walk

UP = np.array([0.0, 0.0, 1.0])
SOURCE = sample_humanoid()
WALK = sample_walk(SOURCE, frames=96)


def test_planted_frames_are_the_low_still_runs():
    fps, hip = 24.0, 1.0
    times = np.arange(60) / fps
    # Still on the ground for 0-19, a fast swing (2 hip heights/s, lifted) for 20-39, still
    # again for 40-59 but raised half a hip height from frame 50 (a foot on a box is not planted
    # when the ground is the floor), and a one-frame pause at 30 inside the swing.
    x = np.zeros(60)
    for f in range(20, 40):
        x[f] = x[f - 1] + (0.0 if f == 30 else 2.0 / fps)
    x[40:] = x[39]
    z = np.full(60, 0.08)
    z[20:40] = 0.2
    z[50:] = 0.6
    ankle = np.column_stack([x, np.zeros(60), z])
    planted = planted_frames(ankle, 0.0, UP, hip, times)
    # A frame is still when the foot rests towards either neighbour: 19 (it lifts off from there)
    # and 39 (it lands there) belong to the contacts; the one-frame pause at 30 is too short.
    expected = np.zeros(60, dtype=bool)
    expected[0:20] = True
    expected[39:50] = True
    assert np.array_equal(planted, expected)


def test_hold_offsets_hold_each_contact_on_its_spot_and_blend_smoothly_between():
    times = np.arange(72) / 24.0
    planted = np.zeros(72, dtype=bool)
    planted[20:30] = True
    planted[40:50] = True
    rng = np.random.default_rng(2)
    ankle = np.column_stack([np.cumsum(rng.uniform(0.0, 0.05, 72)), rng.normal(0.0, 0.01, 72), 0.1 + rng.uniform(0, 0.1, 72)])
    offset = hold_offsets(planted, times, ankle, UP)
    held = ankle + offset
    assert np.all(offset[:, 2] == 0.0)  # along the ground only
    for lo, hi in ((20, 30), (40, 50)):
        spot = ankle[lo:hi, :2].mean(axis=0)
        assert np.abs(held[lo:hi, :2] - spot).max() < 1e-12
    # Between the contacts: on the way from the shift the foot leaves with to the one it lands
    # with, never back, and without a jump at either end.
    a, b = offset[29], offset[40]
    u = (offset[30:40] - a) @ (b - a) / ((b - a) @ (b - a))
    assert np.abs(offset[30:40] - (a + u[:, None] * (b - a))).max() < 1e-12
    assert np.all(np.diff(np.concatenate([[0.0], u, [1.0]])) >= 0.0)
    assert u[0] < 0.05 and u[-1] > 0.95
    # Before the first contact and after the last, only the lead is moved.
    lead = int(round(LEAD * 24.0))
    assert np.all(offset[: 20 - lead] == 0.0) and np.any(offset[20 - lead + 1 : 20] != 0.0)
    assert np.all(offset[50 + lead :] == 0.0) and np.any(offset[50:50 + lead - 1] != 0.0)


def _plant_run(target, **options):
    off = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(**options))
    on = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(plant_feet=True, **options))
    r_off, r_on = retarget(off, WALK), retarget(on, WALK)
    fk = target.skeleton.forward_kinematics
    w_off = fk(r_off.clip.rotations, r_off.clip.translations)
    w_on = fk(r_on.clip.rotations, r_on.clip.translations)
    return on, r_off, r_on, w_off, w_on


def _source_contacts(binding):
    ws = source_placements(binding, WALK)
    up = binding.source_canonical.body[:, 2]
    ground = float(np.percentile(heights_along(ground_points(binding.source), ws, up).min(axis=-1), 5))
    out = {}
    for foot in ("foot.L", "foot.R"):
        ankle = ws[:, binding.source.slots[foot], :3, 3]
        out[foot] = planted_frames(ankle, ground, up, binding.source_hip_height, WALK.times)
    return ws, out


@pytest.mark.parametrize("target", [sample_humanoid(leg_scale=1.25), sample_humanoid(leg_scale=0.8, proportions=1.1)],
                         ids=["long legs", "short legs"])
def test_target_ankles_hold_still_while_the_source_foot_is_planted(target):
    binding, r_off, r_on, w_off, w_on = _plant_run(target)
    ws, contacts = _source_contacts(binding)
    up = binding.target_canonical.body[:, 2]
    h = binding.target_hip_height
    for foot, planted in contacts.items():
        assert planted.sum() >= 20, foot  # the walk has stance phases to hold
        ankle = w_on[:, binding.target.slots[foot], :3, 3]
        flat = ankle - np.outer(ankle @ up, up)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], planted.astype(int), [0]])))
        for start, stop in zip(edges[0::2], edges[1::2], strict=True):
            drift = np.linalg.norm(flat[start:stop] - flat[start:stop].mean(axis=0), axis=-1).max()
            assert drift < 1e-9 * h, (foot, start, stop, drift)
        # Heights stay the retarget's, and the foot keeps its orientation at every frame.
        ankle_off = w_off[:, binding.target.slots[foot], :3, 3]
        assert np.abs(ankle @ up - ankle_off @ up).max() < 1e-9 * h
        j = binding.target.slots[foot]
        assert np.abs(w_on[:, j, :3, :3] - w_off[:, j, :3, :3]).max() < 1e-9
    # The result says how many frames each foot was held, and whether the leg reached.
    for foot, planted in contacts.items():
        assert r_on.planted[foot]["held"] == int(planted.sum())
        assert r_on.planted[foot]["out_of_reach"] == 0  # every spot within reach: the holds above are exact
    assert r_off.planted == {}
    # Sliding as the report measures it (on its own contact rule): below the unplanted result's
    # and below the source's own.
    slide_off = foot_skating(binding, ws, w_off)
    slide_on = foot_skating(binding, ws, w_on)
    for foot in ("foot.L", "foot.R"):
        assert slide_on[f"{foot} slide"] < 0.6 * slide_off[f"{foot} slide"], foot
        assert slide_on[f"{foot} slide"] < slide_on[f"{foot} source slide"], foot


def test_planting_touches_only_the_legs_and_only_where_they_are_held():
    target = sample_humanoid(leg_scale=1.25)
    binding, r_off, r_on, w_off, w_on = _plant_run(target)
    _, contacts = _source_contacts(binding)
    sk = target.skeleton
    legs = {sk.index(n) for n in ("Thigh.L", "Shin.L", "Foot.L", "Thigh.R", "Shin.R", "Foot.R")}
    changed = np.flatnonzero(np.abs(r_on.clip.rotations - r_off.clip.rotations).max(axis=(0, 2)) > 0.0)
    assert set(changed.tolist()) <= legs and len(changed) > 0
    assert np.array_equal(r_on.clip.translations, r_off.clip.translations)
    hips = sk.index("Hips")
    assert np.array_equal(w_on[:, hips], w_off[:, hips])
    # Where a leg's ankle is not moved, the leg is exactly the unplanted one.
    up = binding.target_canonical.body[:, 2]
    for side in "LR":
        ankle = w_off[:, sk.index(f"Foot.{side}"), :3, 3]
        free = ~np.any(hold_offsets(contacts[f"foot.{side}"], WALK.times, ankle, up) != 0.0, axis=1)
        for name in ("Thigh", "Shin", "Foot"):
            j = sk.index(f"{name}.{side}")
            assert np.array_equal(r_on.clip.rotations[free, j], r_off.clip.rotations[free, j])
        moved = ~free
        assert np.abs(r_on.clip.rotations[moved, sk.index(f"Thigh.{side}")] - r_off.clip.rotations[moved, sk.index(f"Thigh.{side}")]).max() > 1e-3


def test_feet_parented_to_the_root_are_held_through_their_keyed_location():
    target = with_root_and_ik_feet(sample_humanoid(leg_scale=1.2))
    binding, r_off, r_on, w_off, w_on = _plant_run(target)
    _, contacts = _source_contacts(binding)
    up = binding.target_canonical.body[:, 2]
    for side in "LR":
        planted = contacts[f"foot.{side}"]
        foot, shin = target.skeleton.index(f"Foot.{side}"), target.skeleton.index(f"Shin.{side}")
        ankle = w_on[:, foot, :3, 3]
        flat = ankle - np.outer(ankle @ up, up)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], planted.astype(int), [0]])))
        for start, stop in zip(edges[0::2], edges[1::2], strict=True):
            assert np.linalg.norm(flat[start:stop] - flat[start:stop].mean(axis=0), axis=-1).max() < 1e-9
        # The shin still ends at the ankle: the foot's location follows the bent leg.
        shin_len = np.linalg.norm(w_off[:, foot, :3, 3] - w_off[:, shin, :3, 3], axis=-1)
        assert np.abs(np.linalg.norm(ankle - w_on[:, shin, :3, 3], axis=-1) - shin_len).max() < 1e-9


def test_feet_are_planted_on_a_result_merged_from_two_methods():
    from marionette.core.mapping.method_names import parse_method_table
    from marionette.core.retarget.binding_cache import BindingCache
    from marionette.core.retarget.methods import retarget_with_methods

    target = sample_humanoid(leg_scale=1.25)
    table = parse_method_table("geometric,legs=rest-space,hips=rest-space")
    runs = {
        plant: retarget_with_methods(BindingCache(), rig_input(SOURCE), rig_input(target), WALK, table, RetargetOptions(plant_feet=plant))
        for plant in (False, True)
    }
    assert runs[True].methods == runs[False].methods and runs[True].rest_space is not None
    binding = runs[True].result.binding
    _, contacts = _source_contacts(binding)
    up = binding.target_canonical.body[:, 2]
    fk = target.skeleton.forward_kinematics
    worlds = {p: fk(r.result.clip.rotations, r.result.clip.translations) for p, r in runs.items()}
    for side in "LR":
        j = target.skeleton.index(f"Foot.{side}")
        ankle = worlds[True][:, j, :3, 3]
        flat = ankle - np.outer(ankle @ up, up)
        planted = contacts[f"foot.{side}"]
        edges = np.flatnonzero(np.diff(np.concatenate([[0], planted.astype(int), [0]])))
        for start, stop in zip(edges[0::2], edges[1::2], strict=True):
            assert np.linalg.norm(flat[start:stop] - flat[start:stop].mean(axis=0), axis=-1).max() < 1e-9
        # Unplanted, the same merged result lets that foot move during the contacts.
        loose = worlds[False][:, j, :3, 3]
        loose = loose - np.outer(loose @ up, up)
        assert max(np.ptp(loose[a:b], axis=0).max() for a, b in zip(edges[0::2], edges[1::2], strict=True)) > 1e-3


@pytest.mark.parametrize("mode", ["IN_PLACE", "OBJECT", "ROOT_BONE"])
def test_held_feet_stay_put_on_the_ground_whoever_carries_the_travel(mode):
    """In place the ground runs back under the character and on the object the object carries
    the travel: a held foot is still where the ground is, not in the armature's own space."""
    target = with_root_and_ik_feet(sample_humanoid(leg_scale=1.25)) if mode == "ROOT_BONE" else sample_humanoid(leg_scale=1.25)
    binding = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(plant_feet=True, root_motion=mode))
    result = retarget(binding, WALK)
    world = target.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    _, contacts = _source_contacts(binding)
    up = binding.target_canonical.body[:, 2]
    carried_elsewhere = result.root_motion if mode in ("IN_PLACE", "OBJECT") else 0.0
    assert np.abs(result.root_motion).max() > 0.5  # the walk travels
    for side in "LR":
        ankle = world[:, target.skeleton.index(f"Foot.{side}"), :3, 3] + carried_elsewhere
        flat = ankle - np.outer(ankle @ up, up)
        planted = contacts[f"foot.{side}"]
        edges = np.flatnonzero(np.diff(np.concatenate([[0], planted.astype(int), [0]])))
        for start, stop in zip(edges[0::2], edges[1::2], strict=True):
            assert np.linalg.norm(flat[start:stop] - flat[start:stop].mean(axis=0), axis=-1).max() < 1e-9, (side, start)


def test_spots_out_of_the_legs_reach_are_counted():
    """Hips travelling twice as far as the legs step (a horizontal travel scale of 2): a held
    spot falls behind the leg's reach, the straight leg points at it and the result counts those
    frames."""
    target = sample_humanoid()
    binding = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(plant_feet=True, horizontal_scale=2.0))
    result = retarget(binding, WALK)
    world = target.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    for side in "LR":
        counts = result.planted[f"foot.{side}"]
        assert counts["out_of_reach"] > 0
        sk = target.skeleton
        hip, knee, ankle = (world[:, sk.index(f"{n}.{side}"), :3, 3] for n in ("Thigh", "Shin", "Foot"))
        length = np.linalg.norm(knee - hip, axis=-1) + np.linalg.norm(ankle - knee, axis=-1)
        straight = np.linalg.norm(ankle - hip, axis=-1) > length - 1e-9
        assert straight.sum() >= counts["out_of_reach"] // 2  # those legs are stretched straight


# Hips lowered where the legs cannot reach a held spot.


def test_needed_drop_brings_the_goal_just_within_reach_and_no_further():
    rng = np.random.default_rng(5)
    hip = rng.normal(0.0, 0.1, (200, 3))
    # Goals below the hips, some within a reach of 1, some beyond it (but not further along the
    # ground than the reach).
    across = rng.uniform(0.0, 0.95, 200)
    angle = rng.uniform(0.0, 2 * np.pi, 200)
    goal = hip + np.column_stack([across * np.cos(angle), across * np.sin(angle), -rng.uniform(0.2, 1.3, 200)])
    drop = needed_drop(hip, goal, np.ones(200), UP)
    within = np.linalg.norm(goal - hip, axis=-1) <= 1.0
    assert within.any() and (~within).any()
    assert np.all(drop[within] == 0.0)
    reached = np.linalg.norm(goal - (hip - drop[:, None] * UP), axis=-1)
    assert np.abs(reached[~within] - 1.0).max() < 1e-12  # on the reach: the smallest drop


def _drop_case():
    times = np.arange(120) / 24.0
    need = np.zeros(120)
    need[0] = 0.02  # at the clip's start
    need[30] = 0.05  # one frame alone
    need[60:75] = np.linspace(0.01, 0.04, 15)  # a run
    need[119] = 0.01  # at its end
    return times, need


def test_smooth_drop_covers_every_need_without_pops_and_is_zero_far_from_them():
    times, need = _drop_case()
    speed, dt = 0.3, 1.0 / 24.0
    drop = smooth_drop(need, times, speed)
    assert np.all(drop >= need - 1e-15)
    # No faster than the speed, and the speed itself eases in and out (no step from rest to
    # full speed in one frame).
    velocity = np.diff(drop) / dt
    assert np.abs(velocity).max() <= speed * (1.0 + 1e-9)
    assert np.abs(np.diff(velocity)).max() <= 0.75 * speed
    # Far from every frame that needs a drop the hips are exactly where they were.
    needing = np.flatnonzero(need > 0.0)
    reach = need[needing] / speed + 2 * DROP_EASE + dt
    far = np.all(np.abs(times[:, None] - times[needing][None, :]) > reach[None, :], axis=1)
    assert far.sum() > 20 and np.all(drop[far] == 0.0)
    close = np.any(np.abs(times[:, None] - times[needing][None, :]) <= DROP_EASE, axis=1)
    assert np.all(drop[close] > 0.0)  # and lowered all around those that do
    assert np.array_equal(smooth_drop(np.zeros(120), times, speed), np.zeros(120))


def _legs(sk):
    return [Leg(sk.index(f"Thigh.{s}"), sk.index(f"Shin.{s}"), sk.index(f"Foot.{s}")) for s in "LR"]


def _held_drift(flat, planted):
    edges = np.flatnonzero(np.diff(np.concatenate([[0], planted.astype(int), [0]])))
    return max(np.linalg.norm(flat[a:b] - flat[a:b].mean(axis=0), axis=-1).max() for a, b in zip(edges[0::2], edges[1::2], strict=True))


@pytest.mark.parametrize("kind, mode", [("plain", "HIPS"), ("ik feet", "ROOT_BONE"), ("plain", "IN_PLACE")])
def test_hips_come_down_where_a_held_spot_is_out_of_the_legs_reach(kind, mode):
    """The hips travel 1.2 times as far as the legs step: held unlowered, spots fall out of
    reach and the feet slide; with the hips lowered each held ankle stays on its spot, the hips
    come down along the up axis only, smoothly, and only around the frames that need it."""
    target = sample_humanoid() if kind == "plain" else with_root_and_ik_feet(sample_humanoid())
    sk = target.skeleton
    options = {"horizontal_scale": 1.2, "root_motion": mode}
    r_off = retarget(bind(rig_input(SOURCE), rig_input(target), RetargetOptions(**options)), WALK)
    binding = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(plant_feet=True, **options))
    r_on = retarget(binding, WALK)
    _, contacts = _source_contacts(binding)
    up, h = binding.target_canonical.body[:, 2], binding.target_hip_height
    drift = None if mode != "IN_PLACE" else r_on.root_motion
    planted = [contacts[f"foot.{s}"] for s in "LR"]
    # The pass as it was: held without lowering the hips.
    rot_old, tr_old, old = plant_legs(sk, _legs(sk), planted, r_off.clip.rotations, r_off.clip.translations, up, WALK.times, drift)
    fk = sk.forward_kinematics
    w_off, w_on, w_old = fk(r_off.clip.rotations, r_off.clip.translations), fk(r_on.clip.rotations, r_on.clip.translations), fk(rot_old, tr_old)
    carried = 0.0 if drift is None else drift
    for side, mask in zip("LR", planted, strict=True):
        j = sk.index(f"Foot.{side}")
        before, after = (w[:, j, :3, 3] + carried for w in (w_old, w_on))
        assert old.unreachable_frames[j] > 0  # previously out of reach ...
        assert _held_drift(before - np.outer(before @ up, up), mask) > 1e-3 * h  # ... and sliding
        assert r_on.planted[f"foot.{side}"]["out_of_reach"] == 0
        assert _held_drift(after - np.outer(after @ up, up), mask) < 1e-9 * h
        # Every ankle keeps its height, held or in the air: lowered hips bend the knees instead.
        assert np.abs((w_on[:, j, :3, 3] - w_off[:, j, :3, 3]) @ up).max() < 1e-9 * h
        # The leg keeps its lengths (the shin still ends at the ankle, a foot parented to the
        # root included).
        for a, b in (("Thigh", "Shin"), ("Shin", "Foot")):
            seg_on, seg_off = (np.linalg.norm(w[:, sk.index(f"{b}.{side}"), :3, 3] - w[:, sk.index(f"{a}.{side}"), :3, 3], axis=-1) for w in (w_on, w_off))
            assert np.abs(seg_on - seg_off).max() < 1e-9 * h
    # The hips move only down, along the up axis, by the drop the result reports at most.
    hips = sk.index("Hips")
    moved = w_on[:, hips, :3, 3] - w_off[:, hips, :3, 3]
    drop = -(moved @ up)
    assert np.abs(moved + np.outer(drop, up)).max() < 1e-12
    assert np.array_equal(w_on[:, hips, :3, :3], w_off[:, hips, :3, :3])
    assert drop.min() >= 0.0 and abs(drop.max() - r_on.hip_drop * h) < 1e-12 and 0.0 < drop.max() <= MAX_DROP * h
    assert r_on.lowered_frames == int((drop > 0.0).sum())
    # Smoothly: no faster than the speed limit from frame to frame.
    dt = float(np.diff(WALK.times).max())
    assert np.abs(np.diff(drop)).max() <= DROP_SPEED * h * dt * (1.0 + 1e-9)
    # Only around the frames whose spot the unlowered hips could not reach, measured here: the
    # spot (where the ankle is held) further from the hip joint than thigh plus shin.
    need = np.zeros(WALK.frame_count, dtype=bool)
    for side, mask in zip("LR", planted, strict=True):
        hip, knee, ankle = (w_off[:, sk.index(f"{n}.{side}"), :3, 3] for n in ("Thigh", "Shin", "Foot"))
        length = np.linalg.norm(knee - hip, axis=-1) + np.linalg.norm(ankle - knee, axis=-1)
        spot = w_on[:, sk.index(f"Foot.{side}"), :3, 3]
        out = mask & (np.linalg.norm(spot - hip, axis=-1) > length + 1e-9 * h)
        assert out.any()
        # There the hips came down far enough that the knee is not locked straight.
        lowered_hip = w_on[:, sk.index(f"Thigh.{side}"), :3, 3]
        assert np.all(np.linalg.norm(spot - lowered_hip, axis=-1)[out] <= REACH * length[out] + 1e-9 * h)
        need |= out
    assert need.any() and np.all(drop[need] > 0.0)
    window = MAX_DROP / DROP_SPEED + 2 * DROP_EASE + dt
    near = np.any(np.abs(WALK.times[:, None] - WALK.times[need][None, :]) <= window, axis=1)
    assert np.all(drop[~near] == 0.0)
    # Frames not lowered keep the hips' locals (and every bone off the legs) exactly.
    still = drop == 0.0
    off_legs = [i for i in range(len(sk)) if i not in {k for leg in _legs(sk) for k in (leg.thigh, leg.shin, leg.foot)}]
    assert np.array_equal(r_on.clip.translations[np.ix_(still, off_legs)], r_off.clip.translations[np.ix_(still, off_legs)])
    assert np.array_equal(r_on.clip.rotations[:, off_legs], r_off.clip.rotations[:, off_legs])


@pytest.mark.parametrize("target", [sample_humanoid(leg_scale=1.25), sample_humanoid(leg_scale=0.8, proportions=1.1)],
                         ids=["long legs", "short legs"])
def test_legs_that_reach_every_spot_leave_the_hips_alone(target):
    binding, r_off, r_on, w_off, w_on = _plant_run(target)
    assert r_on.hip_drop == 0.0 and r_on.lowered_frames == 0
    sk = target.skeleton
    _, contacts = _source_contacts(binding)
    up = binding.target_canonical.body[:, 2]
    planted = [contacts[f"foot.{s}"] for s in "LR"]
    args = (sk, _legs(sk), planted, r_off.clip.rotations, r_off.clip.translations, up, WALK.times)
    rot_a, tr_a, rep_a = plant_legs(*args)
    rot_b, tr_b, rep_b = plant_legs(*args, pelvis=sk.index("Hips"), hip_height=binding.target_hip_height)
    assert np.array_equal(rot_a, rot_b) and np.array_equal(tr_a, tr_b)
    assert rep_b.hip_drop == 0.0 and rep_b.unreachable_frames == rep_a.unreachable_frames


@pytest.mark.parametrize("kind, mode", [("plain", "HIPS"), ("ik feet", "ROOT_BONE")])
def test_the_pass_in_place_writes_the_keys_it_returns_on_copies(kind, mode):
    """The retarget lets the pass write into its own arrays: the keys are those of the pass on
    copies, bit for bit, hips lowered and feet keyed through their location included; by default
    the inputs are left as they were."""
    target = sample_humanoid() if kind == "plain" else with_root_and_ik_feet(sample_humanoid())
    sk = target.skeleton
    options = {"horizontal_scale": 1.2, "root_motion": mode}
    r_off = retarget(bind(rig_input(SOURCE), rig_input(target), RetargetOptions(**options)), WALK)
    binding = bind(rig_input(SOURCE), rig_input(target), RetargetOptions(plant_feet=True, **options))
    _, contacts = _source_contacts(binding)
    planted = [contacts[f"foot.{s}"] for s in "LR"]
    rot, tr = r_off.clip.rotations.copy(), r_off.clip.translations.copy()
    kw = {"pelvis": sk.index("Hips"), "hip_height": binding.target_hip_height}
    args = (sk, _legs(sk), planted)
    up = binding.target_canonical.body[:, 2]
    rot_a, tr_a, rep_a = plant_legs(*args, rot, tr, up, WALK.times, **kw)
    assert np.array_equal(rot, r_off.clip.rotations) and np.array_equal(tr, r_off.clip.translations)
    assert rep_a.lowered_frames > 0  # the case that rewrites the pelvis's translation
    rot_b, tr_b, rep_b = plant_legs(*args, rot, tr, up, WALK.times, **kw, in_place=True)
    assert rot_b is rot and tr_b is tr
    assert np.array_equal(rot_a, rot_b) and np.array_equal(tr_a, tr_b) and rep_a == rep_b

"""Native binding and the binding cache (docs/methods.md#native-binding-and-the-binding-cache): native exactly when names and layout agree,
keys handed over bit for bit; cache hits counted, every edit of what a binding depends on a miss,
and no stale binding ever handed out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from marionette.core.mapping.method_names import parse_method_table
from marionette.core.retarget.binding_cache import BindingCache, native_binding, native_refusal
from marionette.core.retarget.geometric import RetargetOptions, RigInput, bind
from marionette.core.retarget.methods import retarget_with_methods
from marionette.core.retarget.rest_space import bind_rest_space
from marionette.core.rig import rotations as R
from marionette.core.rig.clip import Clip
from marionette.core.rig.samples import SampleRig, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.rig_inputs import rig_input

SOURCE = sample_humanoid()
WALK = sample_walk(SOURCE, frames=24, name="Walk")
RUN = sample_walk(SOURCE, frames=20, speed=3.0, name="Run")



def with_rest(rig: SampleRig, rest: np.ndarray) -> SampleRig:
    sk = rig.skeleton
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    return SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest, sk.placement), rig.slots, rig.tails)


def rolled(rig: SampleRig, bone: str, degrees: float) -> SampleRig:
    """The same rig with one bone rolled about its own axis (same names, same positions)."""
    rest = rig.skeleton.rest_placements().copy()
    i = rig.skeleton.index(bone)
    rest[i, :3, :3] = rest[i, :3, :3] @ R.matrix_from_quat(R.quat_from_axis_angle([0, 1, 0], np.radians(degrees)))
    return with_rest(rig, rest)


def keys_identical(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# --- native binding --------------------------------------------------------------------------


def test_same_layout_binds_natively_and_hands_over_the_keys_bit_for_bit():
    twin = sample_humanoid(placement=np.diag([100.0, 100.0, 100.0, 1.0]))  # another object, scaled x100
    assert twin.skeleton is not SOURCE.skeleton and twin.skeleton.signature() == SOURCE.skeleton.signature()
    native = native_binding(WALK, SOURCE.skeleton, twin.skeleton)
    assert native is not None
    out = native.apply(WALK)
    for a, b in ((out.rotations, WALK.rotations), (out.translations, WALK.translations), (out.coverage, WALK.coverage)):
        assert keys_identical(a, b)
    # The runtime takes the native path whatever methods the table asks for: there is nothing to convert.
    outcome = retarget_with_methods(BindingCache(), rig_input(SOURCE), rig_input(twin), WALK, {"hand.L": "rest-space"})
    assert outcome.native and outcome.rest_space is None
    assert keys_identical(outcome.result.clip.rotations, WALK.rotations)
    assert keys_identical(outcome.result.clip.translations, WALK.translations)


def test_a_clip_naming_some_joints_in_another_order_binds_natively():
    names = ["Hand.R", "Hips", "Spine", "Thigh.L", "Shin.L"]
    clip = WALK.subset(names)
    out = native_binding(clip, SOURCE.skeleton, SOURCE.skeleton).apply(clip)
    assert out.names == SOURCE.skeleton.names
    cols = [SOURCE.skeleton.index(n) for n in names]
    assert keys_identical(np.ascontiguousarray(out.rotations[:, cols]), np.ascontiguousarray(clip.rotations))
    assert keys_identical(np.ascontiguousarray(out.translations[:, cols]), np.ascontiguousarray(clip.translations))
    others = np.setdiff1d(np.arange(len(SOURCE.skeleton)), cols)
    assert np.all(out.coverage[others] == 0.0) and np.all(out.coverage[cols] == 1.0)
    assert np.all(out.rotations[:, others] == [1.0, 0.0, 0.0, 0.0])


def test_same_names_with_other_rolls_is_not_native():
    other = rolled(SOURCE, "Forearm.L", 30.0)
    assert other.skeleton.names == SOURCE.skeleton.names
    assert native_binding(WALK, SOURCE.skeleton, other.skeleton) is None
    assert "different layout" in native_refusal(WALK, SOURCE.skeleton, other.skeleton)
    outcome = retarget_with_methods(BindingCache(), rig_input(SOURCE), rig_input(other), WALK)
    assert not outcome.native
    # Converted, not copied: the forearm's keys differ by the roll, its motion does not.
    i = SOURCE.skeleton.index("Forearm.L")
    key_change = np.degrees(R.quat_angle_between(outcome.result.clip.rotations[:, i], WALK.rotations[:, i]))
    assert key_change.max() > 5.0
    ws = SOURCE.skeleton.forward_kinematics(WALK.rotations, WALK.translations)
    wt = other.skeleton.forward_kinematics(outcome.result.clip.rotations, outcome.result.clip.translations)
    assert np.abs(ws[..., :3, 3] - wt[..., :3, 3]).max() < 1e-9


def test_other_names_other_parents_and_converting_options_are_not_native():
    renamed = sample_humanoid(names={"Spine": "Spine01"})
    assert "different joint names" in native_refusal(WALK, SOURCE.skeleton, renamed.skeleton)
    sk = SOURCE.skeleton
    reparented = Skeleton(sk.names, [*sk.parents[:-1], 0], sk.parent_frames)  # the last joint hangs from the hips
    assert "different layout" in native_refusal(WALK, sk, reparented)
    for opts in (RetargetOptions(root_motion="IN_PLACE"), RetargetOptions(scale=2.0), RetargetOptions(fingers=False)):
        assert native_binding(WALK, sk, sk, opts) is None
        assert "conversion" in native_refusal(WALK, sk, sk, opts)
    assert native_binding(WALK, sk, sk, RetargetOptions(scale=1.0)) is not None
    # Planted feet convert nothing on the clip's own rig: its feet are where the clip puts them.
    assert native_binding(WALK, sk, sk, RetargetOptions(plant_feet=True)) is not None
    stranger = dataclasses.replace(WALK.subset(["Hips"]), names=("NotABone",))
    assert "does not have" in native_refusal(stranger, sk, sk)


# --- the cache -------------------------------------------------------------------------------


def test_a_repeated_pair_hits_the_cache_and_is_counted():
    cache = BindingCache()
    target = sample_humanoid(proportions=0.9)
    first = retarget_with_methods(cache, rig_input(SOURCE), rig_input(target), WALK, parse_method_table("arms=rest-space"))
    assert (cache.hits, cache.misses) == (0, 2)  # one geometric and one rest-space binding made
    second = retarget_with_methods(cache, rig_input(SOURCE), rig_input(target), RUN, parse_method_table("arms=rest-space"))
    assert (cache.hits, cache.misses) == (2, 2)
    assert second.result.binding is first.result.binding and second.rest_space is first.rest_space
    # Inputs rebuilt from scratch (a new RigInput, new arrays, same values) still hit.
    again = sample_humanoid(proportions=0.9)
    cache.geometric(rig_input(SOURCE), rig_input(again))
    assert (cache.hits, cache.misses) == (3, 2)


def test_a_mapping_edit_misses_and_the_new_binding_is_used():
    cache = BindingCache()
    target = sample_humanoid()
    b1 = cache.geometric(rig_input(SOURCE), rig_input(target))
    edited = {k: v for k, v in target.slots.items() if k != "index_1.L"}
    b2 = cache.geometric(rig_input(SOURCE), rig_input(target, edited))
    assert (cache.hits, cache.misses) == (0, 2) and b2 is not b1
    assert "index_1.L" in b1.framed and "index_1.L" not in b2.framed
    # Source side edits count as well.
    src_edit = {k: v for k, v in SOURCE.slots.items() if k != "thumb_3.R"}
    cache.geometric(rig_input(SOURCE, src_edit), rig_input(target))
    assert cache.misses == 3
    # Back to the original mapping: the original binding is valid again and is the one returned.
    assert cache.geometric(rig_input(SOURCE), rig_input(target)) is b1
    assert (cache.hits, cache.misses) == (1, 3)


def test_a_rest_edit_misses_even_below_the_signatures_rounding():
    cache = BindingCache()
    b1 = cache.rest_space(rig_input(SOURCE), rig_input(SOURCE))
    turned = rolled(SOURCE, "UpperArm.R", 20.0)
    b2 = cache.rest_space(rig_input(SOURCE), rig_input(turned))
    assert turned.skeleton.signature() != SOURCE.skeleton.signature()
    k = b2.slots.index("upper_arm.R")
    assert np.degrees(np.arccos((np.trace(b2.carry[k]) - 1) / 2)) == pytest.approx(20.0, abs=1e-9)
    assert np.allclose(b1.carry[k], np.eye(3))
    # 1e-6 radians of roll: the layout signature (rounded) cannot see it, the cache still does.
    nudged = rolled(SOURCE, "UpperArm.R", np.degrees(1e-6))
    assert nudged.skeleton.signature() == SOURCE.skeleton.signature()
    b3 = cache.rest_space(rig_input(SOURCE), rig_input(nudged))
    assert b3 is not b1 and (cache.hits, cache.misses) == (0, 3)
    # Bone ends (tails) are read by the binding too.
    longer = SampleRig(SOURCE.skeleton, SOURCE.slots, SOURCE.tails * 1.01)
    cache.rest_space(rig_input(SOURCE), rig_input(longer))
    assert cache.misses == 4


def test_options_and_method_settings_are_part_of_the_key():
    cache = BindingCache()
    src, tgt = rig_input(SOURCE), rig_input(sample_humanoid(proportions=1.1))
    cache.rest_space(src, tgt)
    cache.rest_space(src, tgt, match_rest=True)
    cache.rest_space(src, tgt, translate=False)
    cache.rest_space(src, tgt, RetargetOptions(root_motion="IN_PLACE"))
    cache.geometric(src, tgt)
    assert (cache.hits, cache.misses) == (0, 5)
    assert cache.rest_space(src, tgt, match_rest=True).match_rest
    assert cache.hits == 1


def test_stale_bindings_are_never_reused_over_a_random_edit_sequence():
    """Random edits of the mapping, the target rest and the options: every binding the cache hands
    out equals one computed from scratch for the current inputs."""
    rng = np.random.default_rng(4)
    cache = BindingCache(capacity=4)
    target = sample_humanoid(proportions=0.95)
    slots = dict(target.slots)
    options = RetargetOptions()
    optional = ["thumb_3.L", "index_2.R", "toes.L", "little_1.R", "neck"]
    for step in range(24):
        kind = rng.integers(4)
        if kind == 0:
            slot = optional[rng.integers(len(optional))]
            slots = {k: v for k, v in slots.items() if k != slot} if slot in slots else {**slots, slot: target.slots[slot]}
        elif kind == 1:
            bone = target.skeleton.names[rng.integers(len(target.skeleton))]
            target = rolled(target, bone, float(rng.choice([0.0, 15.0, -40.0])))
        elif kind == 2:
            options = RetargetOptions(root_motion=str(rng.choice(["HIPS", "IN_PLACE"])))
        src, tgt = rig_input(SOURCE), RigInput(target.skeleton, slots, target.tails)
        cached = cache.rest_space(src, tgt, options)
        fresh = bind_rest_space(src, tgt, options)
        assert cached.slots == fresh.slots, step
        assert np.array_equal(cached.carry, fresh.carry), step
        assert cached.options == options and cached.target.skeleton.signature() == target.skeleton.signature(), step
        g_cached, g_fresh = cache.geometric(src, tgt, options), bind(src, tgt, options)
        assert g_cached.framed == g_fresh.framed, step
        assert all(np.array_equal(g_cached.carried[s], g_fresh.carried[s]) for s in g_fresh.framed), step
    assert cache.hits > 0 and cache.misses > 0 and len(cache) <= 4


def test_capacity_drops_the_least_recently_used():
    cache = BindingCache(capacity=2)
    rigs = [sample_humanoid(proportions=p) for p in (0.9, 1.0, 1.1)]
    a = cache.geometric(rig_input(SOURCE), rig_input(rigs[0]))
    cache.geometric(rig_input(SOURCE), rig_input(rigs[1]))
    assert cache.geometric(rig_input(SOURCE), rig_input(rigs[0])) is a  # refreshed
    cache.geometric(rig_input(SOURCE), rig_input(rigs[2]))  # drops rigs[1]
    assert len(cache) == 2 and (cache.hits, cache.misses) == (1, 3)
    cache.geometric(rig_input(SOURCE), rig_input(rigs[1]))
    assert cache.misses == 4
    with pytest.raises(ValueError):
        BindingCache(capacity=0)


def test_native_clip_with_scales_keeps_them():
    scales = np.ones(WALK.translations.shape)
    scales[:, 3] = 1.5
    clip = Clip(WALK.names, WALK.times, WALK.fps, WALK.rotations, WALK.translations, scales=scales)
    out = native_binding(clip, SOURCE.skeleton, SOURCE.skeleton).apply(clip)
    assert keys_identical(out.scales, clip.scales)

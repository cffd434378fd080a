"""Spring chains (docs/controls.md#springs): frame-rate independence, lengths, energy, resets, scrubbing, instances.

The chain is 1 m long (4 bones of 0.25 m) hanging from a carrier bone. The "walk" motion carries
it like a ponytail on a walking character: forward at 1.4 m/s, a 3 cm bob at 2 Hz, a 5 cm sway
and a 10 degree yaw at 1 Hz.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls import springs
from marionette.core.controls.springs import SpringChain, SpringSnapshot
from marionette.core.controls.stack import ControlStack, SpringControl
from marionette.core.errors import RigError
from marionette.core.rig.rotations import matrix_from_quat, quat_from_axis_angle
from tests.helpers.control_rigs import hanging_chain

SKELETON, PATH = hanging_chain(4, 1.0)
B = len(SKELETON)


def walk(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times, dtype=float)
    rot = np.zeros((len(t), B, 4))
    rot[..., 0] = 1.0
    rot[:, 0] = quat_from_axis_angle([0.0, 0.0, 1.0], math.radians(10.0) * np.sin(2 * np.pi * t))
    tr = np.zeros((len(t), B, 3))
    tr[:, 0, 0] = 0.05 * np.sin(2 * np.pi * 1.0 * t)
    tr[:, 0, 1] = -1.4 * t
    tr[:, 0, 2] = 0.03 * np.sin(2 * np.pi * 2.0 * t)
    return rot, tr


def stack_of(stiffness: float = 60.0, damping: float = 3.0, **kw) -> ControlStack:
    return ControlStack(SKELETON, [SpringControl("tail", SpringChain.build(PATH, stiffness=stiffness, damping=damping, **kw))])


def play(stack: ControlStack, fps: float, duration: float, motion=walk):
    times = np.arange(int(round(duration * fps)) + 1) / fps
    rot, tr = motion(times)
    out = stack.instance().evaluate(rot, tr, time=times)
    return times, out


def tip(out) -> np.ndarray:
    return out.reports["tail"].details["points"][:, -1]


def at(times: np.ndarray, ref_times: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``ref`` sampled at ``times`` (linear between reference frames; exact on them)."""
    return np.stack([np.interp(times, ref_times, ref[:, i]) for i in range(3)], axis=1)


def plain_substeps(chain: SpringChain, world_points: np.ndarray, dt: float) -> np.ndarray:
    """The scheme the spec rules out: ceil(dt * 240) steps capped at 8, of dt / n each, no
    carry. Same forces and constraint as the real one, so only the stepping differs."""
    x = [tuple(p) for p in world_points[0, 1:]]
    v = [(0.0, 0.0, 0.0)] * len(x)
    out = [world_points[0, -1]]
    for f in range(1, len(world_points)):
        prev, cur = world_points[f - 1], world_points[f]
        frame = springs._Frame(
            tuple(prev[0]), [tuple(a) for a in np.diff(prev, axis=0)], tuple(cur[0]), [tuple(a) for a in np.diff(cur, axis=0)]
        )
        n = min(math.ceil(dt * 240 - 1e-9), 8)
        for i in range(1, n + 1):
            springs._step(chain, frame, i / n, dt / n, x, v, frame.ends((i - 1) / n), True)
        out.append(np.array(x[-1]))
    return np.array(out)


def test_the_same_motion_at_24_25_30_60_fps_stays_within_a_millimetre_of_240_hz() -> None:
    stack = stack_of()
    ref_t, ref = play(stack, 240, 4.0)
    ref_tip = tip(ref)
    rot, tr = walk(ref_t)
    animated_tip = SKELETON.forward_kinematics(rot, tr)[:, -1, :3, 3] + SKELETON.forward_kinematics(rot, tr)[:, -1, :3, 1] * 0.25
    swing = np.linalg.norm(ref_tip - animated_tip, axis=1)
    deviation = {}
    for fps in (24, 25, 30, 60):
        times, out = play(stack, fps, 4.0)
        deviation[fps] = float(np.linalg.norm(tip(out) - at(times, ref_t, ref_tip), axis=1).max())
    # The scheme the spec rules out, at 24 fps, on the same motion and forces.
    chain = stack.control("tail").chain
    times = np.arange(4 * 24 + 1) / 24
    rot, tr = walk(times)
    from marionette.core.controls.chains import PathKinematics, PoseBuffers

    world = PathKinematics(SKELETON, PATH, PoseBuffers(SKELETON, rot, tr)).points()
    plain = float(np.linalg.norm(plain_substeps(chain, world, 1 / 24) - at(times, ref_t, ref_tip), axis=1).max())
    print(
        f"\nspring tip swing up to {swing.max() * 1e3:.0f} mm; deviation from 240 Hz: "
        + ", ".join(f"{f} fps {d * 1e3:.3f} mm" for f, d in deviation.items())
        + f"; ceil(dt*240) capped at 8 at 24 fps: {plain * 1e3:.2f} mm"
    )
    assert swing.max() > 0.05  # it does swing: the comparison is not of a chain that just follows
    assert max(deviation.values()) <= 1e-3
    assert plain > 3 * deviation[24]


@pytest.mark.parametrize(("fps", "reference"), [(24, 240), (30, 240), (60, 240), (25, 1200)])
def test_the_stepping_itself_does_not_depend_on_the_frame_rate(fps: int, reference: int) -> None:
    """Fed the very same piecewise-linear motion (keys at the frame rate), a run at the frame
    rate and a run at a multiple of it that commits the same 240 Hz steps agree to rounding:
    what is left in the test above is the animation's sampling, not the integration."""
    stack = stack_of(stiffness=40.0, damping=1.0)
    keys = np.arange(3 * fps + 1) / fps

    def keyed(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rot_k, tr_k = walk(keys)
        tr = np.stack([np.interp(times, keys, tr_k[:, 0, i]) for i in range(3)], axis=1)
        out_tr = np.zeros((len(times), B, 3))
        out_tr[:, 0] = tr
        out_rot = np.zeros((len(times), B, 4))
        out_rot[..., 0] = 1.0
        return out_rot, out_tr

    t_a, a = play(stack, fps, 3.0, keyed)
    t_b, b = play(stack, reference, 3.0, keyed)
    idx = np.round(t_a * reference).astype(int)
    gap = float(np.abs(tip(a) - tip(b)[idx]).max())
    print(f"\n{fps} fps vs {reference} fps on the same keyed motion: {gap:.2e} m")
    assert gap <= 1e-9


def test_segment_lengths_are_kept_and_the_written_pose_matches_the_simulation() -> None:
    stack = stack_of(stiffness=20.0, damping=1.0)
    times, out = play(stack, 30, 3.0)
    rot, tr = walk(times)
    before = SKELETON.forward_kinematics(rot, tr)[:, 1:, :3, 3]
    after = SKELETON.forward_kinematics(out.rotations, out.translations)
    pts = np.concatenate([after[:, 1:, :3, 3], (after[:, -1, :3, 3] + 0.25 * after[:, -1, :3, 1])[:, None]], axis=1)
    lengths = np.linalg.norm(np.diff(pts, axis=1), axis=-1)
    length_error = float(np.abs(lengths - 0.25).max())
    simulated = out.reports["tail"].details["points"]
    written_error = float(np.linalg.norm(pts - simulated, axis=-1).max())
    moved = float(np.linalg.norm(pts[:, 1:] - np.concatenate([before[:, 1:], pts[:, -1:]], axis=1)[:, :3].mean(), axis=-1).max())
    print(f"\nsegment length error {length_error:.1e} m, written vs simulated {written_error:.1e} m")
    assert length_error <= 1e-9
    assert written_error <= 1e-9
    assert moved > 0.0


def energy(chain: SpringChain, snap: SpringSnapshot) -> float:
    """Kinetic + spring + gravity energy per unit mass (the targets are the animated points)."""
    targets = np.cumsum(np.vstack([snap.root, snap.segments]), axis=0)[1:]
    x = np.array(snap.x)
    v = np.array(snap.v)
    k = np.array(chain.stiffness)
    return float(0.5 * np.sum(v * v) + 0.5 * np.sum(k * np.sum((x - targets) ** 2, axis=1)) - np.sum(x @ np.array(chain.gravity)))


@pytest.mark.slow
@pytest.mark.parametrize(("segments", "stiffness"), [(1, 60.0), (4, 20.0), (4, 60.0), (4, 300.0), (16, 60.0)])
def test_energy_does_not_grow_without_damping_over_ten_seconds(segments: int, stiffness: float) -> None:
    sk, path = hanging_chain(segments, 1.0)
    chain = SpringChain.build(path, stiffness=stiffness, damping=0.0)
    stack = ControlStack(sk, [SpringControl("tail", chain)])
    fps = 30
    times = np.arange(int(10.2 * fps) + 1) / fps
    rot = np.zeros((len(times), len(sk), 4))
    rot[..., 0] = 1.0
    tr = np.zeros((len(times), len(sk), 3))
    # A shove: the carrier moves 0.6 m in 0.15 s, then the animation stands still for 10 s.
    tr[:, 0, 0] = 0.6 * np.clip(times / 0.15, 0.0, 1.0)
    inst = stack.instance()
    values = []
    for i, t in enumerate(times):
        inst.evaluate(rot[i : i + 1], tr[i : i + 1], time=t)
        if t >= 0.2 - 1e-9:
            snap = inst.spring_state("tail")
            assert snap is not None
            values.append(energy(chain, snap))
    e = np.array(values)
    # Energy at rest (hanging at equilibrium) as the zero of the excess energy.
    settled = ControlStack(sk, [SpringControl("tail", SpringChain.build(path, stiffness=stiffness, damping=20.0))]).instance()
    for i, t in enumerate(times):
        settled.evaluate(rot[i : i + 1], tr[i : i + 1], time=t)
    snap = settled.spring_state("tail")
    assert snap is not None
    rest = energy(chain, snap)
    excess = e - rest
    rise = float((excess.max() - excess[0]) / excess[0])
    print(
        f"\n{segments} segment(s), stiffness {stiffness}: excess energy {excess[0]:.3f} after the shove, "
        f"largest rise {rise * 100:.2f} %, after 10 s {excess[-1] / excess[0] * 100:.1f} %"
    )
    assert excess[0] > 0.1
    assert rise <= 0.01
    assert excess[-1] <= excess[0]


def reasons(out) -> list[str]:
    return list(out.reports["tail"].details["reset"])


def test_first_frame_and_missing_time_reset_to_the_animation() -> None:
    stack = stack_of()
    rot, tr = walk(np.array([0.0, 0.1]))
    inst = stack.instance()
    out = inst.evaluate(rot[:1], tr[:1], time=0.0)
    assert reasons(out) == ["start"]
    np.testing.assert_array_equal(out.rotations, rot[:1])
    out = inst.evaluate(rot[1:], tr[1:])
    assert reasons(out) == ["no_time"]
    np.testing.assert_array_equal(out.rotations, rot[1:])


def test_a_chain_length_change_resets() -> None:
    stack = stack_of()
    times = np.arange(10) / 30
    rot, tr = walk(times)
    # The third bone stretches by 5 % at frame 6 (a translation along its parent's axis).
    tr[6:, 3] = [0.0, 0.0125, 0.0]
    out = stack.instance().evaluate(rot, tr, time=times)
    got = reasons(out)
    assert got[0] == "start" and got[6] == "length"
    assert all(r == "" for i, r in enumerate(got) if i not in (0, 6))
    # A change within LENGTH_CHANGE is absorbed by the length restore instead.
    tr[6:, 3] = [0.0, 0.25 * springs.LENGTH_CHANGE * 0.5, 0.0]
    assert reasons(stack.instance().evaluate(rot, tr, time=times))[6] == ""


def test_a_teleport_resets_to_the_target_with_zero_velocity() -> None:
    stack = stack_of()
    times = np.arange(12) / 30
    rot, tr = walk(times)
    tr[8:, 0, 0] += 20.0  # 20 m in one frame: more than 8 chain lengths
    inst = stack.instance()
    out = inst.evaluate(rot, tr, time=times)
    assert reasons(out)[8] == "strayed"
    np.testing.assert_allclose(out.rotations[8], rot[8], atol=1e-12)
    snap = inst.spring_state("tail")
    assert snap is not None
    assert np.all(np.isfinite(out.rotations))
    # Nothing of the old place survives: three frames later the chain is within centimetres
    # of the animation, as after a fresh start.
    fresh = stack.instance().evaluate(rot[8:], tr[8:], time=times[8:])
    np.testing.assert_allclose(out.rotations[8:], fresh.rotations, atol=1e-12)


def corrupt(inst, index: int, value: tuple[float, float, float]) -> None:
    """Put an end point of the stored state somewhere (what a numerical blow-up would do)."""
    st = inst._state("tail")
    snap = st.runtime.current
    x = list(snap.x)
    x[index] = value
    bad = SpringSnapshot(snap.time, tuple(x), snap.v, snap.leftover, snap.root, snap.segments, snap.anchor)
    st.runtime.current = bad
    st.runtime.cache[springs._key(snap.time)] = bad


@pytest.mark.parametrize(
    ("value", "reason"), [((math.nan, 0.0, 0.0), "non_finite"), ((math.inf, 1.0, 0.0), "non_finite"), ((0.0, -30.0, 2.0), "strayed")]
)
def test_a_non_finite_or_stray_end_point_resets_it_and_those_after_it(value, reason: str) -> None:
    stack = stack_of()
    times = np.arange(6) / 30
    rot, tr = walk(times)
    inst = stack.instance()
    inst.evaluate(rot[:4], tr[:4], time=times[:4])
    corrupt(inst, 1, value)
    out = inst.evaluate(rot[4:5], tr[4:5], time=times[4])
    assert reasons(out) == [reason]
    snap = inst.spring_state("tail")
    assert snap is not None
    x = np.array(snap.x)
    assert np.all(np.isfinite(x))
    # End points 1.. restarted from their animated places at the first step and moved on from
    # there for the rest of the frame: they end near the animation, not where they were put.
    world = np.cumsum(np.vstack([snap.root, snap.segments]), axis=0)[1:]
    assert np.linalg.norm(x[1:] - world[1:], axis=1).max() < 0.1
    assert np.all(np.isfinite(out.reports["tail"].details["points"]))
    next_out = inst.evaluate(rot[5:6], tr[5:6], time=times[5])
    assert reasons(next_out) == [""] and np.all(np.isfinite(next_out.rotations))


def test_scrubbing_back_and_replaying_matches_playing_straight_through() -> None:
    stack = stack_of()
    fps = 30
    times = np.arange(90) / fps
    rot, tr = walk(times)
    player = stack.instance()
    straight = np.concatenate([player.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations for f in range(90)])
    inst = stack.instance()
    for f in range(60):
        inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
    # Back to frame 20, play to the end; then random single frames already visited.
    replay = np.empty_like(straight)
    flags = []
    for f in range(20, 90):
        out = inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
        replay[f] = out.rotations[0]
        flags.append(bool(out.reports["tail"].details["recomputed"][0]))
    np.testing.assert_array_equal(replay[20:], straight[20:])
    assert flags[0] and not any(flags[1:])
    rng = np.random.default_rng(5)
    for f in rng.integers(1, 90, 25):
        again = inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations[0]
        np.testing.assert_array_equal(again, straight[f])
    # The same frame twice in a row (a redraw) is the same pose, not a second step.
    a = inst.evaluate(rot[50:51], tr[50:51], time=times[50]).rotations
    b = inst.evaluate(rot[50:51], tr[50:51], time=times[50]).rotations
    np.testing.assert_array_equal(a, b)


def test_a_jump_with_nothing_cached_resets_and_never_explodes() -> None:
    stack = stack_of(stiffness=10.0, damping=0.0)
    times = np.arange(40) / 24
    rot, tr = walk(times)
    inst = stack.instance()
    inst.evaluate(rot[:10], tr[:10], time=times[:10])
    far = inst.evaluate(rot[30:31], tr[30:31], time=times[30])
    assert reasons(far) == ["jump"]
    np.testing.assert_allclose(far.rotations, rot[30:31], atol=1e-12)
    inst.reset()
    # Time running backwards with dt only (no scene time): nothing cached before, a reset.
    inst.evaluate(rot[:5], tr[:5], dt=1 / 24)
    back = inst.evaluate(rot[2:3], tr[2:3], dt=-3 / 24)
    assert reasons(back)[0] in ("", "jump")
    assert np.all(np.isfinite(back.rotations))
    # A long stall (dt of a second) integrates only MAX_FRAME_TIME: still finite and near.
    inst.reset()
    inst.evaluate(rot[:5], tr[:5], dt=1 / 24)
    slow = inst.evaluate(rot[5:6], tr[5:6], dt=0.2)
    assert reasons(slow) == [""]
    assert int(slow.reports["tail"].iterations[0]) == round(springs.MAX_FRAME_TIME / springs.SUBSTEP)


def test_a_batch_of_frames_equals_one_call_per_frame() -> None:
    stack = stack_of()
    times = np.arange(40) / 25
    rot, tr = walk(times)
    batch = stack.instance().evaluate(rot, tr, time=times).rotations
    single = stack.instance()
    for f in range(40):
        # Same simulation; the batched writeback may differ from the single one in the last bit.
        np.testing.assert_allclose(single.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations[0], batch[f], atol=1e-15)
    with_dt = stack.instance().evaluate(rot, tr, dt=1 / 25).rotations
    np.testing.assert_allclose(with_dt, batch, atol=1e-12)


def test_two_objects_sharing_one_armature_keep_their_own_springs() -> None:
    stack = stack_of()
    times = np.arange(30) / 30
    rot, tr = walk(times)
    calm_rot, calm_tr = rot.copy(), tr.copy()
    calm_tr[:, 0] = 0.0
    one, two, solo = stack.instance(), stack.instance(), stack.instance()
    moved = np.eye(4)
    moved[:3, 3] = [5.0, 0.0, 0.0]
    for f in range(30):
        a = one.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
        two.evaluate(calm_rot[f : f + 1], calm_tr[f : f + 1], time=times[f], placement=moved)
        s = solo.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
        np.testing.assert_array_equal(a.rotations, s.rotations)
    assert one.spring_state("tail") != two.spring_state("tail")


def test_moving_the_object_drives_the_spring_like_moving_the_bone() -> None:
    stack = stack_of()
    times = np.arange(45) / 30
    rot, tr = walk(times)
    by_bone = stack.instance().evaluate(rot, tr, time=times).rotations
    # The same carrier motion given as the object's world matrix instead of the bone's.
    places = np.broadcast_to(np.eye(4), (45, 4, 4)).copy()
    places[:, :3, 3] = tr[:, 0]
    still = tr.copy()
    still[:, 0] = 0.0
    rot_still = rot.copy()
    rot_still[:, 0] = [1.0, 0.0, 0.0, 0.0]
    from marionette.core.rig.rotations import matrix_from_quat

    places[:, :3, :3] = matrix_from_quat(rot[:, 0])
    # With the carrier's head at the object's origin, moving and turning the object is the
    # same world motion as moving and turning the bone.
    places[:, :3, 3] += np.array([0.0, 0.0, 2.0]) - np.einsum("tij,j->ti", places[:, :3, :3], [0.0, 0.0, 2.0])
    by_object = stack.instance().evaluate(rot_still, still, time=times, placement=places).rotations
    np.testing.assert_allclose(by_object[:, 1:], by_bone[:, 1:], atol=1e-9)


def test_disabling_clears_the_spring() -> None:
    stack = stack_of()
    times = np.arange(10) / 30
    rot, tr = walk(times)
    inst = stack.instance()
    inst.evaluate(rot, tr, time=times)
    assert inst.spring_state("tail") is not None
    inst.set_enabled("tail", False)
    assert inst.spring_state("tail") is None
    inst.set_enabled("tail", True)
    out = inst.evaluate(rot[9:], tr[9:], time=times[9])
    assert reasons(out) == ["start"]


def test_a_non_finite_input_frame_is_skipped_and_leaves_the_state() -> None:
    stack = stack_of()
    times = np.arange(8) / 30
    rot, tr = walk(times)
    bad = rot.copy()
    bad[4, 2] = np.nan
    out = stack.instance().evaluate(bad, tr, time=times)
    assert out.reports["tail"].skipped.tolist() == [False] * 4 + [True] + [False] * 3
    assert np.all(np.isfinite(out.rotations[[0, 1, 2, 3, 5, 6, 7]]))


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(RigError):
        SpringChain.build(PATH, stiffness=-1.0)
    with pytest.raises(RigError):
        SpringChain.build(PATH, stiffness=1e6)  # unstable at the fixed step
    with pytest.raises(RigError):
        SpringChain.build(PATH, damping=[1.0, 2.0])
    with pytest.raises(RigError):
        SpringChain.build(PATH, gravity=[0.0, math.nan, 0.0])


def test_two_spring_chains_batched_move_as_each_alone() -> None:
    """Two independent chains (the index fingers of a walking humanoid) are stepped each on its
    own but share one batched writeback: frame by frame, live, each moves as it does alone in a
    stack of its own."""
    from marionette.core.controls.chains import JointPath
    from tests.helpers.control_rigs import humanoid_65, walk_cycle

    sk, _ = humanoid_65()
    times = np.arange(40) / 30.0
    rot, tr = walk_cycle(sk, times)
    chains = {
        side: SpringChain.build(JointPath.between(sk, f"finger1_0.{side}", f"finger1_2.{side}", end_offset=[0.0, 0.03, 0.0]), stiffness=200.0, damping=8.0)
        for side in "LR"
    }
    both = ControlStack(sk, [SpringControl(f"finger.{s}", c) for s, c in chains.items()])
    assert both.groups == ((0, 1),)
    alone = {s: ControlStack(sk, [SpringControl(f"finger.{s}", c)]) for s, c in chains.items()}
    together = both.instance()
    single = {s: st.instance() for s, st in alone.items()}
    worst = 0.0
    for f in range(len(times)):
        a = together.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
        for side, inst in single.items():
            b = inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
            joints = list(chains[side].path.joints)
            worst = max(worst, float(np.abs(a.rotations[:, joints] - b.rotations[:, joints]).max()))
            np.testing.assert_array_equal(a.reports[f"finger.{side}"].details["points"], b.reports[f"finger.{side}"].details["points"])
            assert a.reports[f"finger.{side}"].iterations.tolist() == b.reports[f"finger.{side}"].iterations.tolist()
    print(f"\ntwo fingers batched vs alone over {len(times)} live frames: rotations {worst:.1e} apart, simulated points equal")
    assert worst <= 1e-15


def test_a_live_frame_matches_the_batched_arrays() -> None:
    """A single frame (the live case) turns the simulated points back into rotations and
    diagnostics in plain floats: the same rotations, points, residuals, length errors, reset
    reasons and step counts as a batch of the same frames gives, to 1e-12, for two chains
    batched together on a walking humanoid whose object moves and turns."""
    from marionette.core.controls.chains import JointPath
    from tests.helpers.control_rigs import humanoid_65, walk_cycle

    sk, _ = humanoid_65()
    times = np.arange(60) / 30.0
    rot, tr = walk_cycle(sk, times)
    stack = ControlStack(
        sk,
        [
            SpringControl(
                f"finger.{side}",
                SpringChain.build(JointPath.between(sk, f"finger1_0.{side}", f"finger1_2.{side}", end_offset=[0.0, 0.03, 0.0]), stiffness=200.0, damping=8.0),
            )
            for side in "LR"
        ],
    )
    places = np.broadcast_to(np.eye(4), (len(times), 4, 4)).copy()
    places[:, :3, :3] = [matrix_from_quat(q) for q in quat_from_axis_angle([0.0, 0.0, 1.0], 0.8 * np.sin(2.0 * times))]
    places[:, :3, 3] = np.stack([0.3 * times, np.sin(times), 0.1 * times], axis=1)
    batch = stack.instance().evaluate(rot, tr, time=times, placement=places)
    live = stack.instance()
    for f in range(len(times)):
        one = live.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f], placement=places[f])
        np.testing.assert_allclose(one.rotations[0], batch.rotations[f], rtol=0, atol=1e-12)
        for name, report in one.reports.items():
            ref = batch.reports[name]
            for key in ("residual", "iterations", "ran", "skipped", "converged", "limited"):
                np.testing.assert_allclose(getattr(report, key), getattr(ref, key)[f : f + 1], rtol=0, atol=1e-12)
            for key in ("points", "length_error"):
                np.testing.assert_allclose(report.details[key], ref.details[key][f : f + 1], rtol=0, atol=1e-12)
            assert report.details["reset"].tolist() == ref.details["reset"][f : f + 1].tolist()
            assert report.details["recomputed"].tolist() == ref.details["recomputed"][f : f + 1].tolist()
    assert batch.reports["finger.L"].iterations.sum() > 0

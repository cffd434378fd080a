"""Ground adaptation (docs/controls.md#ground-feet) on analytic terrain: flat, slopes, stairs, a ledge.

The 65-bone humanoid walks a flat-ground cycle (``walk_cycle``) over terrain given as a height
field, probed with exact vertical rays. As a character controller would, the armature object is
carried at the terrain's mean height under the hips; the feet and pelvis adapt to the rest.
Measured at three points of each foot's sole (under the ankle, the ball, the toe tip):
penetration into the terrain over all frames, and the gap under the sole on planted frames.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.ground import MAX_TILT, GroundRig
from marionette.core.controls.stack import ControlStack, GroundControl
from marionette.core.errors import RigError
from marionette.core.rig.rotations import quat_angle_between, quat_from_axis_angle, quat_from_matrix
from tests.helpers.control_rigs import humanoid_65, walk_cycle

SKELETON, _ = humanoid_65()
B = len(SKELETON)
REST = SKELETON.rest_placements()
LEGS = [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"]
HIPS = SKELETON.index("hips")


def height_field(height, normal):
    """A ray cast onto the surface ``z = height(x, y)`` (vertical rays only, which is what the
    ground control casts), with ``normal(x, y)`` its unit normals; NaN height = nothing there."""

    def cast(origins: np.ndarray, directions: np.ndarray, distances: np.ndarray):
        assert np.allclose(directions, [0.0, 0.0, -1.0])
        x, y, top = origins.T
        h = height(x, y)
        hit = np.isfinite(h) & (h <= top) & (h >= top - distances)
        return hit, np.stack([x, y, np.where(hit, h, 0.0)], axis=1), normal(x, y)

    return cast


def flat(level: float = 0.0):
    return height_field(lambda x, y: np.full_like(x, level), lambda x, y: np.broadcast_to([0.0, 0.0, 1.0], (len(x), 3)))


def slope(degrees: float, uphill: tuple[float, float]):
    """A plane through the origin rising at ``degrees`` toward the horizontal ``uphill``."""
    t = math.tan(math.radians(degrees))
    d = np.array([uphill[0], uphill[1], 0.0])
    n = np.array([-t * d[0], -t * d[1], 1.0]) / math.hypot(t, 1.0)

    def height(x, y):
        return t * (x * d[0] + y * d[1])

    return height_field(height, lambda x, y: np.broadcast_to(n, (len(x), 3))), height


def stairs(rise: float = 0.15, depth: float = 0.3):
    """Steps climbing toward -Y (the walking direction): treads ``depth`` deep, ``rise`` high."""

    def height(x, y):
        return rise * np.floor(-y / depth)

    return height_field(height, lambda x, y: np.broadcast_to([0.0, 0.0, 1.0], (len(x), 3))), height


def sole_points(world: np.ndarray) -> list[np.ndarray]:
    """Per foot (L, R), the three sole points ``(T, 3, 3)``: under the ankle, the ball, the toe
    tip (on the rest floor, z = 0, carried by the foot and toe bones)."""
    out = []
    for side in "LR":
        f, t = SKELETON.index(f"foot.{side}"), SKELETON.index(f"toe.{side}")
        ankle, ball = REST[f, :3, 3], REST[t, :3, 3]
        local = [
            (f, np.linalg.solve(REST[f], [ankle[0], ankle[1], 0.0, 1.0])),
            (f, np.linalg.solve(REST[f], [ball[0], ball[1], 0.0, 1.0])),
            (t, np.linalg.solve(REST[t], [ball[0], ball[1] - 0.07, 0.0, 1.0])),
        ]
        out.append(np.stack([(world[:, j] @ p)[:, :3] for j, p in local], axis=1))
    return out


def adapt(cast, times, rot, tr, *, places=None, smooth=0.08, pelvis_smooth=0.15, **rig_kw):
    rig = GroundRig.build(SKELETON, LEGS, pelvis="hips", **rig_kw)
    stack = ControlStack(SKELETON, [GroundControl("ground", rig, smooth_time=smooth, pelvis_smooth_time=pelvis_smooth)])
    inst = stack.instance()
    inst.set_ground("ground", cast)
    return inst, inst.evaluate(rot, tr, dt=float(times[1] - times[0]), placement=places)


def measure(height, places, rot, tr, out) -> dict[str, float]:
    world = places[:, None] @ SKELETON.forward_kinematics(out.rotations, out.translations)
    animated = places[:, None] @ SKELETON.forward_kinematics(rot, tr)
    penetration = 0.0
    gap = 0.0
    planted_frames = 0
    for new, old in zip(sole_points(world), sole_points(animated), strict=True):
        below = height(new[..., 0], new[..., 1]) - new[..., 2]
        penetration = max(penetration, float(below.max()))
        # Planted: the animated sole under the ankle on the animation's floor.
        planted = old[:, 0, 2] - places[:, 2, 3] < 1e-6
        planted_frames += int(planted.sum())
        gap = max(gap, float(np.abs(below[planted, 0]).max()))
    hz, az = world[:, HIPS, 2, 3], animated[:, HIPS, 2, 3]
    feet = [SKELETON.index(f"foot.{s}") for s in "LR"]
    turn = quat_angle_between(quat_from_matrix(world[:, feet, :3, :3]), quat_from_matrix(animated[:, feet, :3, :3]))
    report = out.reports["ground"]
    return {
        "penetration": penetration,
        "gap": gap,
        "planted": planted_frames,
        "raised": float((hz - az).max()),
        "lowered": float((az - hz).max()),
        "pelvis": float(report.details["pelvis_offset"].max()),
        "tilt": float(report.details["tilt"].max()),
        "turn": float(turn.max()),
        "jitter": float(np.sqrt(np.mean(np.diff(hz, 2) ** 2))),
        "jitter_animated": float(np.sqrt(np.mean(np.diff(az, 2) ** 2))),
        "residual": float(report.residual.max()),
    }


def scene(height, follow, seconds: float = 3.0, fps: int = 30):
    times = np.arange(int(seconds * fps) + 1) / fps
    rot, tr = walk_cycle(SKELETON, times)
    hips = SKELETON.forward_kinematics(rot, tr)[:, HIPS, :3, 3]
    places = np.broadcast_to(np.eye(4), (len(times), 4, 4)).copy()
    places[:, 2, 3] = follow(hips[:, 0], hips[:, 1])
    return times, rot, tr, places


def line(name: str, m: dict[str, float]) -> str:
    return (
        f"{name:<18} penetration {m['penetration'] * 1e3:6.2f} mm, planted gap {m['gap'] * 1e3:5.2f} mm,"
        f" pelvis lowered up to {m['lowered'] * 1e3:5.1f} mm (highest vs animated {m['raised'] * 1e3:+.1f} mm),"
        f" tilt {math.degrees(m['tilt']):4.1f} deg, pelvis jitter {m['jitter'] * 1e3:.2f} mm"
        f" (animation {m['jitter_animated'] * 1e3:.2f})"
    )


def test_flat_ground_leaves_the_walk_as_it_was() -> None:
    times, rot, tr, places = scene(lambda x, y: np.zeros_like(x), lambda x, y: np.zeros_like(x))
    _, out = adapt(flat(), times, rot, tr, places=places)
    m = measure(lambda x, y: np.zeros_like(x), places, rot, tr, out)
    print("\n" + line("flat", m))
    np.testing.assert_allclose(out.rotations, rot, atol=1e-9)
    np.testing.assert_array_equal(out.translations, tr)
    assert m["penetration"] <= 1e-9 and m["gap"] <= 1e-9 and m["pelvis"] == 0.0


@pytest.mark.parametrize("uphill", [(0.0, -1.0), (1.0, 0.0)], ids=["along", "across"])
@pytest.mark.parametrize("degrees", [10.0, 20.0, 30.0])
def test_slopes_no_penetration_no_float_pelvis_never_raised(degrees: float, uphill) -> None:
    cast, height = slope(degrees, uphill)
    times, rot, tr, places = scene(height, height)
    _, out = adapt(cast, times, rot, tr, places=places)
    m = measure(height, places, rot, tr, out)
    print("\n" + line(f"{degrees:.0f} deg {'along' if uphill[1] else 'across'}", m))
    assert m["planted"] > 60
    assert m["penetration"] <= 5e-4
    assert m["gap"] <= 5e-4
    assert m["raised"] <= 1e-9 and m["pelvis"] <= 0.0
    assert abs(m["tilt"] - math.radians(degrees)) <= 1e-6  # planted feet lie on the slope
    assert m["turn"] <= MAX_TILT + 1e-9
    assert m["residual"] <= 1e-9


def test_a_slope_steeper_than_35_degrees_tilts_the_foot_35_degrees() -> None:
    cast, height = slope(45.0, (0.0, -1.0))
    times, rot, tr, places = scene(height, height)
    _, out = adapt(cast, times, rot, tr, places=places)
    m = measure(height, places, rot, tr, out)
    report = out.reports["ground"]
    print("\n" + line("45 deg along", m) + " (tilt capped: the toes dig in)")
    assert abs(m["tilt"] - MAX_TILT) <= 1e-9
    assert m["turn"] <= MAX_TILT + 1e-9
    assert report.details["capped"].all() and report.limited.all()
    assert m["raised"] <= 1e-9


def test_stairs() -> None:
    rise, depth = 0.15, 0.3
    cast, height = stairs(rise, depth)
    # The object rides the stairs' mean incline, half a step up (a controller's capsule).
    times, rot, tr, places = scene(height, lambda x, y: rise / depth * -y + rise / 2, seconds=4.0)
    _, out = adapt(cast, times, rot, tr, places=places)
    m = measure(height, places, rot, tr, out)
    world = places[:, None] @ SKELETON.forward_kinematics(out.rotations, out.translations)
    under_ankle = max(
        float((height(p[:, 0, 0], p[:, 0, 1]) - p[:, 0, 2]).max()) for p in sole_points(world)
    )
    print(
        "\n" + line("stairs 15/30 cm", m)
        + f"; under the ankle {under_ankle * 1e3:.2f} mm (one probe per foot: a toe over the next riser goes in)"
    )
    assert under_ankle <= 5e-4
    assert m["gap"] <= 5e-4
    assert m["raised"] <= 1e-9
    # Smoothing keeps the pelvis from stepping with the treads.
    assert m["jitter"] <= 5.0 * m["jitter_animated"]


def test_legs_read_from_placements_or_walked_down_the_path_agree() -> None:
    """Without child frames the legs are read from the pose's placements, with them by walking
    each leg's path: the same rig either way gives the same feet, lifts and pelvis to rounding,
    on stairs (lifts, tilts, a lowered pelvis), in one batch and frame by frame. The same rig
    with child frames: every joint's frame turned by its own rotation ``R`` (``C1 = R``, its
    children's ``C0`` premultiplied by it), which places every joint as before (``M = P C0 T
    inv(C1)``) and leaves the locals as they are."""
    from marionette.core.rig.rotations import matrix_from_quat
    from marionette.core.rig.skeleton import Skeleton

    turns = np.broadcast_to(np.eye(4), (B, 4, 4)).copy()
    turns[:, :3, :3] = matrix_from_quat(quat_from_axis_angle(np.random.default_rng(7).normal(size=(B, 3)), np.linspace(0.3, 2.5, B)))
    parents = SKELETON.parents
    c0 = np.where((parents >= 0)[:, None, None], turns[np.maximum(parents, 0)] @ SKELETON.parent_frames, SKELETON.parent_frames)
    framed = Skeleton(SKELETON.names, parents, c0, turns)
    assert framed.child_frames is not None  # so the legs are walked down their paths
    rise, depth = 0.15, 0.3
    cast, height = stairs(rise, depth)
    times, rot, tr, places = scene(height, lambda x, y: rise / depth * -y + rise / 2, seconds=1.0)
    np.testing.assert_allclose(framed.forward_kinematics(rot, tr)[..., :3, 3], SKELETON.forward_kinematics(rot, tr)[..., :3, 3], atol=1e-12)
    outs = []
    for sk in (SKELETON, framed):
        rig = GroundRig.build(sk, LEGS, pelvis="hips")
        for frames in (slice(None), [slice(t, t + 1) for t in range(len(times))]):
            inst = ControlStack(sk, [GroundControl("ground", rig, smooth_time=0.08, pelvis_smooth_time=0.15)]).instance()
            inst.set_ground("ground", cast)
            chunks = [frames] if isinstance(frames, slice) else frames
            got = [inst.evaluate(rot[c], tr[c], time=times[c], placement=places[c]) for c in chunks]
            out_rot = np.concatenate([o.rotations for o in got])
            outs.append(
                (
                    np.where(out_rot[..., :1] < 0.0, -out_rot, out_rot),  # q and -q: one rotation
                    np.concatenate([o.translations for o in got]),
                    np.concatenate([o.reports["ground"].details["lift"] for o in got]),
                )
            )
    reference = outs[0]
    lifted = float(np.abs(reference[2]).max())
    print(f"\nlegs from placements vs walked: stairs lift up to {lifted * 1e3:.1f} mm")
    assert lifted > 0.05
    for other in outs[1:]:
        for a, b in zip(reference, other, strict=True):
            np.testing.assert_allclose(b, a, rtol=0.0, atol=1e-12)


def standing(frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Standing still, knees a little bent (hips 8 cm low), soles flat on the floor."""
    return walk_cycle(SKELETON, np.zeros(frames), speed=0.0, lift=0.0, bob=0.0)


def test_a_ledge_one_ray_missing_leaves_that_foot_animated_and_the_pelvis_recovers_smoothly() -> None:
    fps, tau = 30, 0.15
    rot, tr = standing(90)
    # The left foot (x > 0) first stands on ground 10 cm lower; at frame 30 that ground goes
    # (a ledge: nothing within the probe), the right foot keeps its ground.
    step_down = height_field(
        lambda x, y: np.where(x > 0.0, -0.1, 0.0), lambda x, y: np.broadcast_to([0.0, 0.0, 1.0], (len(x), 3))
    )
    ledge = height_field(
        lambda x, y: np.where(x > 0.0, np.nan, 0.0), lambda x, y: np.broadcast_to([0.0, 0.0, 1.0], (len(x), 3))
    )
    rig = GroundRig.build(SKELETON, LEGS, pelvis="hips")
    stack = ControlStack(SKELETON, [GroundControl("ground", rig, smooth_time=0.08, pelvis_smooth_time=tau)])
    inst = stack.instance()
    inst.set_ground("ground", step_down)
    first = inst.evaluate(rot[:30], tr[:30], dt=1 / fps)
    inst.set_ground("ground", ledge)
    second = inst.evaluate(rot[30:], tr[30:], dt=1 / fps)
    pelvis = np.concatenate([r.reports["ground"].details["pelvis_offset"] for r in (first, second)])
    hits = np.concatenate([r.reports["ground"].details["hit"] for r in (first, second)])
    world = SKELETON.forward_kinematics(np.concatenate([first.rotations, second.rotations]), np.concatenate([first.translations, second.translations]))
    animated = SKELETON.forward_kinematics(rot, tr)
    left = SKELETON.index("foot.L")
    drop_before = float(animated[29, left, 2, 3] - world[29, left, 2, 3])
    left_error = float(np.abs(world[-1, left] - animated[-1, left]).max())
    recovery = np.diff(pelvis[29:])
    print(
        f"\nledge: left foot down {drop_before * 1e3:.1f} mm on the lower ground; after the ray misses,"
        f" pelvis from {pelvis[29] * 1e3:.1f} mm back to {pelvis[-1] * 1e3:.4f} mm in 2 s, largest step"
        f" {recovery.max() * 1e3:.2f} mm per frame; left foot {left_error:.1e} from its animation"
    )
    assert hits[:30].all() and not hits[30:, 0].any() and hits[30:, 1].all()
    assert abs(drop_before - 0.1) <= 1e-3
    assert pelvis.max() <= 0.0 and pelvis[29] < -0.05
    # Recovers monotonically, each frame at most the smoothing response of what remains.
    assert np.all(recovery >= -1e-12)
    assert recovery.max() <= (1 - math.exp(-1 / fps / tau)) * abs(pelvis[29]) + 1e-9
    assert abs(pelvis[-1]) <= 1e-4 and left_error <= 1e-4


def test_the_lift_is_bounded() -> None:
    rot, tr = standing(3)
    # A 40 cm block under the left foot, within the probe (50 cm), beyond a 20 cm bound.
    block = height_field(lambda x, y: np.where(x > 0.0, 0.4, 0.0), lambda x, y: np.broadcast_to([0.0, 0.0, 1.0], (len(x), 3)))
    _, out = adapt(block, np.arange(3) / 30, rot, tr, max_offset=0.2)
    lift = out.reports["ground"].details["lift"]
    assert np.allclose(lift[:, 0], 0.2) and np.allclose(lift[:, 1], 0.0)


def test_the_knee_bends_toward_the_rigs_facing() -> None:
    frames = 4
    rot, tr = standing(frames)
    # Turn the body 90 degrees left (about +Z in armature space) by the hips.
    turn = quat_from_axis_angle([0.0, 0.0, 1.0], math.pi / 2)
    hips_frame = REST[HIPS, :3, :3]
    # A local rotation of the hips that turns it about armature +Z: conjugate by its rest frame.
    from marionette.core.rig.rotations import quat_multiply

    q_rest = quat_from_matrix(hips_frame)
    rot[:, HIPS] = quat_multiply(quat_multiply(np.array([q_rest[0], *-q_rest[1:]]), turn), q_rest)
    block = flat(0.15)  # both feet lifted 15 cm: the knees must bend
    _, out = adapt(block, np.arange(frames) / 30, rot, tr)
    world = SKELETON.forward_kinematics(out.rotations, out.translations)
    forward = np.array([1.0, 0.0, 0.0])  # -Y turned 90 degrees about +Z
    for side in "LR":
        hip, knee, ankle = (world[:, SKELETON.index(f"{b}.{side}"), :3, 3] for b in ("thigh", "shin", "foot"))
        axis = (ankle - hip) / np.linalg.norm(ankle - hip, axis=1, keepdims=True)
        off = (knee - hip) - np.sum((knee - hip) * axis, axis=1, keepdims=True) * axis
        off /= np.linalg.norm(off, axis=1, keepdims=True)
        assert np.all(off @ forward > 0.95), side


def test_a_turned_object_probes_the_same_world_ground() -> None:
    """World up is +Z whatever the object's placement: the same walk on a slope, with the object
    and the terrain turned together about Z, gives the same armature-space pose."""
    cast, height = slope(20.0, (0.0, -1.0))
    times, rot, tr, places = scene(height, height, seconds=1.5)
    _, out = adapt(cast, times, rot, tr, places=places)
    yaw = np.eye(4)
    yaw[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    t = math.tan(math.radians(20.0))
    n = np.array([-t, 0.0, 1.0]) / math.hypot(t, 1.0)  # the slope turned: uphill toward +X
    turned = height_field(lambda x, y: t * x, lambda x, y: np.broadcast_to(n, (len(x), 3)))
    _, out2 = adapt(turned, times, rot, tr, places=yaw @ places)
    np.testing.assert_allclose(out2.rotations, out.rotations, atol=1e-9)
    np.testing.assert_allclose(out2.translations, out.translations, atol=1e-12)


def test_two_instances_keep_their_own_smoothing() -> None:
    rig = GroundRig.build(SKELETON, LEGS, pelvis="hips")
    stack = ControlStack(SKELETON, [GroundControl("ground", rig)])
    rot, tr = standing(1)
    cast_a, _ = slope(15.0, (1.0, 0.0))
    a, b, solo = stack.instance(), stack.instance(), stack.instance()
    a.set_ground("ground", cast_a)
    solo.set_ground("ground", cast_a)
    b.set_ground("ground", flat(-0.05))
    for k in range(20):
        ra = a.evaluate(rot, tr, dt=1 / 30)
        b.set_ground("ground", flat(-0.05 * (k % 3)))
        b.evaluate(rot, tr, dt=1 / 30)
        rs = solo.evaluate(rot, tr, dt=1 / 30)
        np.testing.assert_array_equal(ra.rotations, rs.rotations)
        np.testing.assert_array_equal(ra.translations, rs.translations)


def test_a_non_finite_frame_is_skipped_and_keeps_the_smoothing() -> None:
    rot, tr = standing(6)
    bad = rot.copy()
    bad[3, SKELETON.index("shin.L")] = np.nan
    cast, _ = slope(10.0, (1.0, 0.0))
    _, good = adapt(cast, np.arange(6) / 30, rot, tr)
    _, out = adapt(cast, np.arange(6) / 30, bad, tr)
    assert out.reports["ground"].skipped.tolist() == [False, False, False, True, False, False]
    keep = [0, 1, 2, 4, 5]
    np.testing.assert_allclose(out.rotations[keep], good.rotations[keep], atol=1e-12)


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(RigError, match="child"):
        GroundRig.build(SKELETON, [("thigh.L", "foot.L", "toe.L")])
    with pytest.raises(RigError, match="ancestor"):
        GroundRig.build(SKELETON, LEGS, pelvis="spine")
    with pytest.raises(RigError, match="35 degrees"):
        GroundRig.build(SKELETON, LEGS, max_tilt=math.radians(40.0))
    with pytest.raises(RigError, match="probe_height"):
        GroundRig.build(SKELETON, LEGS, probe_height=0.0)
    rig = GroundRig.build(SKELETON, LEGS, pelvis="hips")
    assert np.allclose(REST[HIPS, :3, :3] @ rig.forward, [0.0, -1.0, 0.0])  # inferred: faces -Y
    assert rig.facing_joint == HIPS
    assert GroundRig.build(SKELETON, LEGS).facing_joint == HIPS  # no pelvis: the thighs' parent


@pytest.mark.data
@pytest.mark.parametrize(("degrees", "uphill"), [(0.0, (0.0, 1.0)), (10.0, (0.0, 1.0)), (10.0, (1.0, 0.0)), (20.0, (0.0, 1.0))])
def test_a_motion_capture_walk_on_a_y_up_skeleton(degrees: float, uphill) -> None:
    """CMU 12_03 (31 joints, 120 fps, Y up, about 15 units a leg) read as is; the object turns
    Y up into Z up as Blender's importer does and rides the terrain under the hips."""
    from marionette.core.formats.bvh import read_bvh
    from tests.helpers.data import shared_file

    bvh = read_bvh(shared_file("bvh/cmu/12_03_motionbuilder.bvh"))
    sk, clip = bvh.skeleton(), bvh.clip()
    rot, tr = clip.rotations, clip.translations
    world = sk.forward_kinematics(rot, tr)
    feet = [sk.index("LeftFoot"), sk.index("RightFoot")]
    # The ankles' lowest height in the clip stands for the sole (the rest pose is not on the floor).
    sole_height = float(world[:, feet, 1, 3].min())
    rig = GroundRig.build(
        sk, [("LeftUpLeg", "LeftLeg", "LeftFoot"), ("RightUpLeg", "RightLeg", "RightFoot")],
        pelvis="Hips", up=(0.0, 1.0, 0.0), sole_height=sole_height, probe_height=10.0,
    )
    assert np.allclose(sk.rest_placements()[0, :3, :3] @ rig.forward, [0.0, 0.0, 1.0])  # BVH faces +Z
    cast, height = slope(degrees, uphill)
    y_up = np.eye(4)
    y_up[:3, :3] = [[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]
    hips = (y_up[None] @ world[:, 0])[:, :3, 3]
    places = np.broadcast_to(y_up, (len(rot), 4, 4)).copy()
    places[:, 2, 3] = height(hips[:, 0], hips[:, 1])
    inst = ControlStack(sk, [GroundControl("ground", rig)]).instance()
    inst.set_ground("ground", cast)
    out = inst.evaluate(rot, tr, dt=1 / clip.fps, placement=places)
    new = places[:, None] @ sk.forward_kinematics(out.rotations, out.translations)
    old = places[:, None] @ world
    soles = [(new[:, leg.foot] @ np.append(leg.sole, 1.0))[:, :3] for leg in rig.legs]
    closest = min(float((p[:, 2] - height(p[:, 0], p[:, 1])).min()) for p in soles)
    raised = float((new[:, 0, 2, 3] - old[:, 0, 2, 3]).max())
    report = out.reports["ground"]
    print(
        f"\nCMU 12_03 on {degrees:.0f} deg {'along' if uphill[1] else 'across'}: sole at least {closest:.3f} above the"
        f" ground, pelvis lowered up to {-(new[:, 0, 2, 3] - old[:, 0, 2, 3]).min():.2f} (raised {raised:+.1e}),"
        f" tilt up to {math.degrees(report.details['tilt'].max()):.1f} deg, leg residual {report.residual.max():.1e}"
    )
    assert closest >= -1e-9
    assert raised <= 1e-9
    assert report.details["tilt"].max() <= MAX_TILT
    assert report.residual.max() <= 1e-9
    if degrees == 0.0:
        np.testing.assert_array_equal(out.translations, tr)
        np.testing.assert_allclose(out.rotations, rot, atol=1e-9)


def test_a_floor_hit_in_single_precision_moves_nothing_and_a_real_step_still_does() -> None:
    """Blender's ray casts give hits in single precision: on the animation's own floor the hit
    heights are off by about a unit in the last place of the ray's height. That is rounding, not
    ground: the walk comes back bit for bit (no lift, no pelvis move). A floor a tenth of a
    millimetre higher is ground, and lifts the feet."""
    times, rot, tr, places = scene(lambda x, y: np.zeros_like(x), lambda x, y: np.zeros_like(x), seconds=1.0)

    def single_precision(level: float):
        def cast(origins, directions, distances):
            # Hits as Blender gives them: in float32, the height off by up to a unit in the last
            # place of the ray's height (either way).
            o = origins.astype(np.float32)
            ulp = np.spacing(np.abs(o[:, 2])) * np.where(np.arange(len(o)) % 2 == 0, 1.0, -1.0)
            z = (np.float32(level) + ulp).astype(np.float32)
            hit = z >= o[:, 2] - distances
            return hit, np.stack([o[:, 0], o[:, 1], z], axis=1).astype(np.float64), np.tile([0.0, 0.0, 1.0], (len(o), 1))

        return cast

    rounding = np.abs(single_precision(0.0)(np.array([[0.1, 0.2, 0.5107]]), None, np.array([1.0]))[1][0, 2])
    _, out = adapt(single_precision(0.0), times, rot, tr, places=places)
    _, raised = adapt(single_precision(1e-4), times, rot, tr, places=places)
    lift = raised.reports["ground"].details["lift"]
    print(f"\nsingle-precision floor (hit off by up to {rounding:.1e}): max change {np.abs(out.rotations - rot).max():.1e}; 0.1 mm step: lift {lift.max():.2e}")
    np.testing.assert_array_equal(out.rotations, rot)
    np.testing.assert_array_equal(out.translations, tr)
    assert np.all(out.reports["ground"].details["lift"] == 0.0)
    assert lift.max() > 0.9e-4

"""Spring colliders (docs/controls.md#colliders): chains dropped onto spheres, capsules and planes,
the rest they come to, inner colliders, frame-rate independence, scrubbing and bad input.

The rig is the springs' test chain: a carrier bone ``base`` at (0, 0, 2) whose axes are the
armature's (so an offset in its frame is a world offset) and a chain hanging from its head.
Penetration is measured independently of the integrator on the points it shows, at 240 fps
(one fixed step per frame, so every step is seen), and read from the integrator's own per-step
figure at the other rates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.colliders import Collider, ColliderGroup, select_groups
from marionette.core.controls.springs import SpringChain
from marionette.core.controls.stack import ControlStack, SpringControl
from marionette.core.errors import RigError
from marionette.core.rig.rotations import quat_from_axis_angle
from tests.helpers.control_rigs import hanging_chain

BASE = np.array([0.0, 0.0, 2.0])


def stack_of(segments: int, length: float, colliders, **kw) -> tuple[ControlStack, object]:
    sk, path = hanging_chain(segments, length)
    chain = SpringChain.build(path, colliders=colliders(sk), **kw)
    return ControlStack(sk, [SpringControl("tail", chain)]), sk


def still(sk, frames: int, tilt: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The carrier at rest; the chain's first bone turned ``tilt`` radians about world X (from
    hanging down toward -Y... and up to horizontal at pi / 2)."""
    rot = np.zeros((frames, len(sk), 4))
    rot[..., 0] = 1.0
    if tilt:
        # s0's rest axes: Y down the chain, Z toward -Y; a turn about its X swings it in the YZ plane.
        rot[:, 1] = quat_from_axis_angle([1.0, 0.0, 0.0], tilt)
    return rot, np.zeros((frames, len(sk), 3))


def depth_of(kind: str, points: np.ndarray, centre, radius: float, tail=None, normal=None) -> np.ndarray:
    """Penetration of each point (> 0 inside), computed here from the geometry alone."""
    if kind == "sphere":
        return radius - np.linalg.norm(points - centre, axis=-1)
    if kind == "inside_sphere":
        return np.linalg.norm(points - centre, axis=-1) - radius
    if kind == "plane":
        return -((points - centre) @ np.asarray(normal))
    a, b = np.asarray(centre), np.asarray(tail)
    t = np.clip(((points - a) @ (b - a)) / np.dot(b - a, b - a), 0.0, 1.0)
    return radius - np.linalg.norm(points - (a + t[..., None] * (b - a)), axis=-1)


DROPS = {
    # A 1 m chain of 4 held horizontal along -Y, falling onto what lies across the line it
    # would hang along, so that it comes to rest against it.
    "sphere": dict(offset=(0.0, -0.1, -0.75), radius=0.25),
    "capsule": dict(offset=(-0.4, -0.1, -0.75), tail=(0.4, -0.1, -0.75), radius=0.2),
    "plane": dict(offset=(0.0, 0.0, -0.7), normal=(0.0, 0.3, 1.0)),
}


def drop(kind: str, fps: int, seconds: float = 5.0):
    spec = DROPS[kind]

    def colliders(sk):
        return [Collider.build(sk, kind, "base", **spec)]

    stack, sk = stack_of(4, 1.0, colliders, stiffness=0.0, damping=3.0)
    frames = int(seconds * fps) + 1
    times = np.arange(frames) / fps
    rot, tr = still(sk, frames, math.pi / 2)
    out = stack.instance().evaluate(rot, tr, time=times)
    return out.reports["tail"], spec


@pytest.mark.parametrize("kind", sorted(DROPS))
def test_a_dropped_chain_never_ends_inside_the_collider_and_comes_to_rest_on_it(kind: str) -> None:
    report, spec = drop(kind, 240)
    pts = report.details["points"][:, 1:]  # the segment end points, every fixed step
    centre = BASE + spec["offset"]
    tail = None if "tail" not in spec else BASE + spec["tail"]
    normal = None if "normal" not in spec else np.asarray(spec["normal"]) / np.linalg.norm(spec["normal"])
    depth = depth_of(kind, pts, centre, spec.get("radius", 0.0), tail, normal)
    fall = float(np.linalg.norm(pts[0, -1] - pts[-1, -1]))
    touching = float(np.abs(depth[-1]).min())
    speed = float(np.linalg.norm(pts[-1] - pts[-2], axis=-1).max() * 240)
    # At 24 fps the integrator's own figure, after each of its fixed steps.
    slow, _ = drop(kind, 24)
    print(
        f"\n{kind}: the tip falls {fall:.3f} m; deepest at 240 fps {depth.max() * 1e3:.2e} mm, "
        f"reported per step at 24 fps {slow.details['step_penetration'].max() * 1e3:.2e} mm; at rest "
        f"{speed * 1e3:.2f} mm/s, closest point {touching * 1e3:.3f} mm from the surface"
    )
    assert fall > 0.3  # it did fall onto it
    assert depth.max() <= 1e-3
    assert slow.details["step_penetration"].max() <= 1e-3
    assert report.details["step_penetration"].max() <= 1e-3
    assert speed < 1e-3 and touching < 1e-3  # at rest, lying on it


@pytest.mark.parametrize("radius", [0.0, 0.04])
def test_a_pendulum_starting_inside_a_sphere_is_pushed_out_and_rests_where_it_touches(radius: float) -> None:
    """One 0.5 m segment hanging from (0, 0, 2), a 0.2 m sphere centred 0.15 m beside its
    animated end: the start is pushed out, and the end slides down to the lowest point of the
    circle where it touches the sphere (radius of the point included), in the plane of the
    pivot and the centre."""
    length, big = 0.5, 0.2 + radius
    centre = BASE + np.array([0.15, 0.0, -0.5])

    def colliders(sk):
        return [Collider.build(sk, "sphere", "base", offset=centre - BASE, radius=0.2)]

    stack, sk = stack_of(1, length, colliders, stiffness=0.0, damping=3.0, radius=radius)
    times = np.arange(6 * 24 + 1) / 24
    rot, tr = still(sk, len(times))
    out = stack.instance().evaluate(rot, tr, time=times)
    pts = out.reports["tail"].details["points"]
    # Two circles in the XZ plane: |x - p| = L, |x - c| = R'; the lower intersection.
    p, c = BASE[[0, 2]], centre[[0, 2]]
    d = np.linalg.norm(c - p)
    a = (length**2 - big**2 + d**2) / (2 * d)
    h = math.sqrt(length**2 - a**2)
    mid = p + a * (c - p) / d
    perp = np.array([-(c - p)[1], (c - p)[0]]) / d
    options = [mid + h * perp, mid - h * perp]
    rest2 = min(options, key=lambda q: q[1])
    rest = np.array([rest2[0], 0.0, rest2[1]])
    start_depth = big - np.linalg.norm(pts[0, -1] - centre)
    miss = float(np.linalg.norm(pts[-1, -1] - rest))
    print(
        f"\npoint radius {radius}: start pushed out (depth {start_depth:.1e}), rest {pts[-1, -1].round(4)} vs analytic "
        f"{rest.round(4)}: {miss * 1e3:.3f} mm"
    )
    assert np.all(np.isfinite(pts))
    assert start_depth <= 1e-9
    assert abs(np.linalg.norm(pts[0, -1] - BASE) - length) < 1e-9
    assert miss <= 1e-3


def test_a_chain_rooted_inside_a_sphere_stays_finite() -> None:
    """The pivot itself inside: nothing at the segment's length is allowed for the first end
    point, which goes as far out as it can; never NaN."""

    def colliders(sk):
        return [Collider.build(sk, "sphere", "base", offset=(0.0, 0.0, -0.3), radius=0.6)]

    stack, sk = stack_of(4, 1.0, colliders, stiffness=20.0, damping=2.0)
    times = np.arange(48) / 24
    rot, tr = still(sk, 48, 0.7)
    out = stack.instance().evaluate(rot, tr, time=times)
    pts = out.reports["tail"].details["points"]
    assert np.all(np.isfinite(pts)) and np.all(np.isfinite(out.rotations))
    # The tip (1 m from a pivot 0.3 m from the centre) gets out; the first end point cannot.
    assert np.linalg.norm(pts[-1, -1] - (BASE + [0.0, 0.0, -0.3])) >= 0.6 - 1e-6


def sway(sk, times: np.ndarray, amplitude: float = 0.4, yaw: float = 20.0) -> tuple[np.ndarray, np.ndarray]:
    """The carrier walking toward -Y at 1.4 m/s, swaying sideways and turning about Z."""
    rot, tr = still(sk, len(times))
    tr[:, 0, 0] = amplitude * np.sin(2 * np.pi * 1.2 * times)
    tr[:, 0, 1] = -1.4 * times
    rot[:, 0] = quat_from_axis_angle([0.0, 0.0, 1.0], math.radians(yaw) * np.sin(2 * np.pi * times))
    return rot, tr


def test_an_inner_sphere_keeps_the_chain_in() -> None:
    centre = (0.0, 0.0, -0.45)

    def inner(sk):
        return [Collider.build(sk, "inside_sphere", "base", offset=centre, radius=0.62)]

    runs = {}
    for name, colliders in (("inner", inner), ("free", lambda sk: [])):
        stack, sk = stack_of(4, 1.0, colliders, stiffness=20.0, damping=1.0, radius=0.02)
        times = np.arange(4 * 240 + 1) / 240
        rot, tr = sway(sk, times)
        out = stack.instance().evaluate(rot, tr, time=times)
        carrier = sk.forward_kinematics(rot, tr)[:, 0, :3, 3]
        pts = out.reports["tail"].details["points"][:, 1:]
        runs[name] = float((np.linalg.norm(pts - (carrier + centre)[:, None], axis=-1) + 0.02 - 0.62).max())
    print(f"\nfarthest beyond the inner sphere: with it {runs['inner'] * 1e3:.3e} mm, without {runs['free'] * 1e3:.0f} mm")
    assert runs["free"] > 0.05  # without it the chain does swing out
    assert runs["inner"] <= 1e-3


def leaning(sk):
    """A sphere across the line the chain hangs along (it starts inside and leans on it) and a
    bar behind it that its tip rests against."""
    return [
        Collider.build(sk, "sphere", "base", offset=(0.0, -0.12, -0.55), radius=0.2),
        Collider.build(sk, "capsule", "base", offset=(-0.3, 0.25, -0.75), tail=(0.3, 0.25, -0.75), radius=0.06),
    ]


def play(stack, sk, fps: int, seconds: float = 4.0):
    """The walk of the springs' tests (5 cm sway, 10 degree turn) at ``fps``."""
    times = np.arange(int(round(seconds * fps)) + 1) / fps
    rot, tr = sway(sk, times, 0.05, 10.0)
    return times, stack.instance().evaluate(rot, tr, time=times).reports["tail"]


def test_the_same_motion_with_colliders_at_24_25_30_60_fps_stays_within_a_millimetre_of_240_hz() -> None:
    stack, sk = stack_of(4, 1.0, leaning, stiffness=30.0, damping=3.0, radius=0.02)
    free, _ = stack_of(4, 1.0, lambda sk: [], stiffness=30.0, damping=3.0, radius=0.02)
    ref_t, ref = play(stack, sk, 240)
    _, loose = play(free, sk, 240)
    ref_tip = ref.details["points"][:, -1]
    pushed = float(np.linalg.norm(ref_tip - loose.details["points"][:, -1], axis=1).max())
    deviation = {}
    for fps in (24, 25, 30, 60):
        times, out = play(stack, sk, fps)
        at = np.stack([np.interp(times, ref_t, ref_tip[:, i]) for i in range(3)], axis=1)
        deviation[fps] = float(np.linalg.norm(out.details["points"][:, -1] - at, axis=1).max())
        assert out.details["step_penetration"].max() <= 1e-3
    print(
        f"\ncolliders move the tip up to {pushed * 1e3:.0f} mm; deviation from 240 Hz: "
        + ", ".join(f"{f} fps {d * 1e3:.3f} mm" for f, d in deviation.items())
    )
    assert pushed > 0.05  # the colliders do shape the motion
    assert max(deviation.values()) <= 1e-3


def test_scrubbing_with_colliders_replays_bit_for_bit() -> None:
    stack, sk = stack_of(4, 1.0, leaning, stiffness=30.0, damping=3.0, radius=0.02)
    fps = 30
    times = np.arange(90) / fps
    rot, tr = sway(sk, times, 0.3)
    player = stack.instance()
    straight = np.concatenate([player.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations for f in range(90)])
    inst = stack.instance()
    for f in range(60):
        inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
    replay = np.empty_like(straight)
    for f in range(20, 90):
        replay[f] = inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations[0]
    np.testing.assert_array_equal(replay[20:], straight[20:])
    for f in np.random.default_rng(3).integers(1, 90, 20):
        np.testing.assert_array_equal(inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f]).rotations[0], straight[f])
    # The batch of frames (the bake's route) equals the frames one by one (the live route).
    batch = stack.instance().evaluate(rot, tr, time=times).rotations
    np.testing.assert_allclose(batch, straight, atol=1e-12)


def test_bad_colliders_are_refused_with_the_reason() -> None:
    sk, path = hanging_chain(4, 1.0)
    with pytest.raises(RigError, match="'head'.*not in the armature"):
        Collider.build(sk, "sphere", "head", radius=0.1)
    with pytest.raises(RigError, match="radius must be above 0"):
        Collider.build(sk, "sphere", "base", radius=0.0)
    with pytest.raises(RigError, match="radius must be above 0"):
        Collider.build(sk, "inside_capsule", "base", tail=(0, 0, 1), radius=-0.1)
    with pytest.raises(RigError, match="needs a tail"):
        Collider.build(sk, "capsule", "base", radius=0.1)
    with pytest.raises(RigError, match="normal must not be zero"):
        Collider.build(sk, "plane", "base", normal=(0, 0, 0))
    with pytest.raises(RigError, match="unknown kind"):
        Collider.build(sk, "cube", "base", radius=0.1)
    with pytest.raises(RigError, match="no collider group called 'hair'"):
        select_groups([ColliderGroup("body", ())], ["hair"])
    with pytest.raises(RigError, match="radius of the spring"):
        SpringChain.build(path, radius=-0.01)
    with pytest.raises(RigError, match="one value per segment"):
        SpringChain.build(path, radius=[0.01, 0.02])


def test_groups_select_their_colliders_once() -> None:
    sk, _ = hanging_chain(4, 1.0)
    head = Collider.build(sk, "sphere", "base", radius=0.1, name="head")
    chest = Collider.build(sk, "capsule", "base", tail=(0, 0, -1), radius=0.1, name="chest")
    groups = [ColliderGroup("head", (head,)), ColliderGroup("body", (head, chest))]
    assert select_groups(groups, ["body", "head"]) == (head, chest)
    assert select_groups(groups, []) == ()


def test_collider_outlines_lie_on_their_surfaces() -> None:
    """What the viewport draws: every outline point is on the collider's surface."""
    from marionette.core.controls.colliders import depth, outline

    sk, _ = hanging_chain(4, 1.0)
    place_at = np.eye(4)
    place_at[:3, 3] = [0.3, -0.2, 0.5]
    cases = [
        Collider.build(sk, "sphere", "base", offset=(0.1, 0.2, 0.3), radius=0.25),
        Collider.build(sk, "inside_capsule", "base", offset=(0.0, 0.0, 0.0), tail=(0.2, 0.5, -0.1), radius=0.1),
        Collider.build(sk, "capsule", "base", offset=(0.0, 0.0, 0.0), tail=(0.0, 0.0, 0.4), radius=0.1),
        Collider.build(sk, "plane", "base", offset=(0.0, 0.0, -1.0), normal=(0.0, 1.0, 1.0)),
    ]
    from marionette.core.controls.colliders import place

    placed = place(cases, np.broadcast_to(place_at, (1, len(cases), 4, 4)))[0]
    for c in placed:
        segments = outline(c)
        points = segments.reshape(-1, 3)
        if c[0] == 2:  # a plane: the square lies on it, the normal line leaves it
            points = segments[:-1].reshape(-1, 3)
        off = max(abs(depth(c, p, 0.0)) for p in points)
        assert off < 1e-9, (c[0], off)


def test_skipping_tests_while_clear_changes_nothing(monkeypatch) -> None:
    """An end point's test is skipped while its clearance from the colliders outlasts what it
    and they moved since (carried from frame to frame), and only its nearest collider is tested
    and resolved while the others stay clear; with both off (every point tested against every
    collider at every step) the very same points come out, bit for bit, on the walk against the
    colliders, at a rate that divides 240 and one that does not."""
    from marionette.core.controls import springs

    stack, sk = stack_of(4, 1.0, leaning, stiffness=30.0, damping=3.0, radius=0.02)
    skipping = {fps: play(stack, sk, fps)[1] for fps in (24, 25)}
    calls = {"nearest": 0}
    nearest = springs.collide_nearest

    def counted(*args: object) -> object:
        calls["nearest"] += 1
        return nearest(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(springs, "collide_nearest", counted)
    play(stack, sk, 24)
    assert calls["nearest"] > 0
    monkeypatch.setattr(springs, "motion", lambda *a: math.inf)
    monkeypatch.setattr(springs, "collide_nearest", lambda *a: None)
    for fps, skipped in skipping.items():
        _, every = play(stack, sk, fps)
        np.testing.assert_array_equal(skipped.details["points"], every.details["points"])

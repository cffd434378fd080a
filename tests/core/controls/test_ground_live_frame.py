"""Ground adaptation of a single frame (the live preview) against the batched arrays.

One frame at a time, a skeleton without child frames is probed and smoothed in plain floats
(``core.controls.ground._adapt_one``); several frames at once take the arrays. Both must give the same
pose, diagnostics and smoothing memory, to 1e-12, on terrain that exercises every branch: the
animation's own floor (the legs kept as animated), slopes (tilted feet), stairs (lifts and a
lowered pelvis), rays that miss, hit beyond the probe or come back non-finite, a frame whose pose
is not finite, an object that moves, turns and scales, and weights 0, 1/2 and 1.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls import ground
from marionette.core.controls.ground import GroundMemory, GroundRig
from marionette.core.controls.stack import ControlStack, GroundControl
from marionette.core.rig.rotation_kernels import quat_mul
from marionette.core.rig.rotations import matrix_from_quat, quat_from_axis_angle
from tests.helpers.control_rigs import humanoid_65, small_quats, walk_cycle

SKELETON, _ = humanoid_65()
LEGS = [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"]
FPS = 30.0


def terrain(kind: str):
    """A ray cast (vertical rays) onto ``kind`` of ground, with faults laid out in space so the
    batched and the frame-by-frame runs meet the same ones."""

    def height(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if kind == "floor":
            return np.zeros_like(x)
        if kind == "slope":
            return 0.25 * x - 0.1 * y
        if kind == "stairs":
            return 0.12 * np.floor(-y / 0.25) + 0.03 * np.sin(4.0 * x)
        # "faulty": stairs with a hole, and stripes of bad answers.
        return np.where(np.abs(x + 0.1) < 0.06, np.nan, 0.12 * np.floor(-y / 0.25))

    def normal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if kind == "slope":
            n = np.array([-0.25, 0.1, 1.0]) / math.sqrt(0.25**2 + 0.1**2 + 1.0)
            return np.tile(n, (len(x), 1))
        if kind == "stairs":
            n = np.stack([-0.12 * np.cos(4.0 * x), np.zeros_like(x), np.ones_like(x)], axis=1)
            return n / np.linalg.norm(n, axis=1, keepdims=True)
        return np.tile([0.0, 0.0, 1.0], (len(x), 1))

    def cast(origins: np.ndarray, directions: np.ndarray, distances: np.ndarray):
        assert np.allclose(directions, [0.0, 0.0, -1.0])
        x, y, top = origins.T
        h = height(x, y)
        hit = np.isfinite(h) & (h <= top) & (h >= top - distances)
        points = np.stack([x, y, np.where(hit, h, 0.0)], axis=1)
        normals = normal(x, y)
        if kind == "faulty":
            stripe = np.floor(y / 0.07) % 5
            normals = np.where((stripe == 1)[:, None], 0.0, normals)  # a zero normal
            points[stripe == 2] = np.nan  # a non-finite hit
            points[stripe == 3, 2] -= 10.0  # a hit far beyond the probe
            hit = hit | (stripe == 3)
        return hit, points, normals

    return cast


def motion(frames: int, seed: int, *, on_floor: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A walk with noise on every joint, and the object moving, turning and scaling; or
    ``on_floor``, the walk as it is, the object kept on the world's floor (z = 0)."""
    rng = np.random.default_rng(seed)
    times = np.arange(frames) / FPS
    rot, tr = walk_cycle(SKELETON, times)
    if not on_floor:
        rot = quat_mul(rot, small_quats(rng, rot.shape[:2], 0.05))
        tr = tr + rng.normal(scale=0.005, size=tr.shape)
    places = np.broadcast_to(np.eye(4), (frames, 4, 4)).copy()
    turn = np.array([matrix_from_quat(q) for q in quat_from_axis_angle([0.0, 0.0, 1.0], 0.6 * np.sin(1.3 * times))])
    places[:, :3, :3] = turn * (1.0 + 0.1 * np.sin(times))[:, None, None]
    places[:, :3, 3] = np.stack([0.2 * times, -0.5 * times, (0.0 if on_floor else 0.04) * np.sin(3.0 * times)], axis=1)
    return rot, tr, places


def run(kind: str, frames: int, seed: int, *, one_by_one: bool, weight: float = 1.0, bad_frame: int | None = None):
    rot, tr, places = motion(frames, seed, on_floor=kind == "floor")
    if bad_frame is not None:
        rot[bad_frame, SKELETON.index("shin.R")] = np.nan
    rig = GroundRig.build(SKELETON, LEGS, pelvis="hips")
    stack = ControlStack(SKELETON, [GroundControl("ground", rig, smooth_time=0.08, pelvis_smooth_time=0.15)])
    inst = stack.instance()
    inst.set_ground("ground", terrain(kind))
    inst.set_weight("ground", weight)
    times = np.arange(frames) / FPS
    chunks = [slice(t, t + 1) for t in range(frames)] if one_by_one else [slice(None)]
    outs = [inst.evaluate(rot[c], tr[c], time=times[c], placement=places[c]) for c in chunks]
    memory = inst._states[0].runtime
    return outs, memory


def joined(outs, get):
    return np.concatenate([get(o) for o in outs])


def ground_field(outs, key: str) -> np.ndarray:
    """A field of the ground report (or of its details) over the frames of ``outs``."""
    reports = [o.reports["ground"] for o in outs]
    return np.concatenate([r.details[key] if key in r.details else getattr(r, key) for r in reports])


@pytest.mark.parametrize(
    ("kind", "weight", "bad_frame"),
    [("floor", 1.0, None), ("slope", 1.0, None), ("stairs", 1.0, 7), ("faulty", 1.0, None), ("stairs", 0.5, None), ("faulty", 0.0, 3)],
)
def test_a_live_frame_of_ground_feet_matches_the_batched_arrays(kind: str, weight: float, bad_frame: int | None) -> None:
    frames = 36
    batch, batch_memory = run(kind, frames, 11, one_by_one=False, weight=weight, bad_frame=bad_frame)
    live, live_memory = run(kind, frames, 11, one_by_one=True, weight=weight, bad_frame=bad_frame)
    b = batch[0]
    np.testing.assert_allclose(joined(live, lambda o: o.rotations), b.rotations, rtol=0, atol=1e-12)
    np.testing.assert_allclose(joined(live, lambda o: o.translations), b.translations, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(joined(live, lambda o: o.coverage), b.coverage)
    report = b.reports["ground"]
    for key in ("ran", "skipped", "iterations", "converged", "limited"):
        np.testing.assert_array_equal(ground_field(live, key), getattr(report, key))
    np.testing.assert_allclose(ground_field(live, "residual"), report.residual, rtol=0, atol=1e-12)
    for key, value in report.details.items():
        got = ground_field(live, key)
        assert got.shape == value.shape and got.dtype.kind == value.dtype.kind, key
        np.testing.assert_allclose(got, value, rtol=0, atol=1e-12, err_msg=key)
    if weight > 0.0:
        assert isinstance(live_memory, GroundMemory) and isinstance(batch_memory, GroundMemory)
        np.testing.assert_allclose(live_memory.normal, batch_memory.normal, rtol=0, atol=1e-12)
        np.testing.assert_allclose(live_memory.offset, batch_memory.offset, rtol=0, atol=1e-12)
        np.testing.assert_allclose(live_memory.pelvis, batch_memory.pelvis, rtol=0, atol=1e-12)
        # The terrain did what it was chosen for.
        details = report.details
        if kind == "floor":
            assert not details["lift"].any() and not details["tilt"].any() and report.ran.all()
        if kind == "slope":
            assert details["tilt"].max() > 0.1
        if kind == "stairs":
            assert np.nanmax(np.abs(details["lift"])) > 0.05 and np.nanmin(details["pelvis_offset"]) < -0.01
        if kind == "faulty":
            assert not details["hit"].all() and details["hit"].any()
        if bad_frame is not None:
            assert report.skipped.tolist() == [t == bad_frame for t in range(frames)]
    else:
        assert live_memory is None and batch_memory is None and not report.ran.any()


def test_the_single_frame_route_is_the_one_taken_and_skeletons_with_child_frames_take_the_arrays(monkeypatch) -> None:
    """The comparison above is between two routes: one frame goes through ``_adapt_one``
    unless the skeleton has child frames."""
    from marionette.core.rig.skeleton import Skeleton

    calls: list[int] = []
    original = ground._adapt_one

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ground, "_adapt_one", counted)
    run("stairs", 3, 2, one_by_one=True)
    assert len(calls) == 3
    run("stairs", 3, 2, one_by_one=False)
    assert len(calls) == 3
    c1 = np.broadcast_to(np.eye(4), (len(SKELETON), 4, 4)).copy()
    c1[-1, :3, 3] = 0.01  # any child frame other than the identity
    framed = Skeleton(SKELETON.names, SKELETON.parents, SKELETON.parent_frames, c1)
    assert framed.child_frames is not None
    inst = ControlStack(framed, [GroundControl("ground", GroundRig.build(framed, LEGS, pelvis="hips"))]).instance()
    inst.set_ground("ground", terrain("stairs"))
    rot, tr, places = motion(1, 3)
    inst.evaluate(rot, tr, time=np.zeros(1), placement=places)
    assert len(calls) == 3

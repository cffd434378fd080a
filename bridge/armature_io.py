"""Bulk bridge between Blender armatures and actions and core skeletons and clips.

Conventions (those of :mod:`core.rig.skeleton`, :mod:`core.rig.clip` and :mod:`core.rig.rotations`):

* Bone order. :func:`skeleton_from_armature` orders bones parents first, depth first
  (:meth:`Skeleton.from_rest_matrices`); every per-bone array here is in that order, whatever
  order Blender lists bones in. Bones are matched by name, never by position.
* Spaces. Skeleton space is the armature object's space (``bone.matrix_local``,
  ``pose_bone.matrix``); the skeleton's ``placement`` is ``object.matrix_world`` (which carries
  any parent's scale and rotation). A local transform is ``pose_bone.matrix_basis``
  (location, rotation, scale) of a bone with default inheritance.
* Matrices read with ``foreach_get`` arrive flattened column by column: they are transposed.
* A connected bone's location is ignored by Blender (its head sits on its parent's tail), so it
  reads as zero and is never written.
* Time. An action's frame numbers count at its own rate, the ``marionette_fps`` custom property
  written by :mod:`.file_import` and :func:`write_action` (else the scene's ``fps / fps_base``).
  A clip's ``times`` are seconds from its first sampled frame and ``first_frame`` is that frame's
  number, so ``clip.frame_numbers()`` gives back the action's frame numbers.

Reading is bulk: every F-curve's keys come out with ``foreach_get`` and are evaluated in numpy
exactly as Blender does (constant, linear and Bezier segments with Blender's handle correction,
constant or linear extrapolation). A curve numpy does not model (easing modes, F-curve modifiers,
baked samples, backwards handles) is evaluated by Blender for that curve alone
(``FCurve.evaluate``). When something outside the action shapes the pose -- bone constraints,
drivers on pose bones, bones that do not fully inherit their parent's transform, a layered
action -- the clip is read from Blender's evaluated pose instead (:func:`clip_from_evaluation`).

An action is read *alone*, at its own frame numbers: NLA tracks on the object, and the
influence or blending of its active action, are not part of that action's clip (the glTF
importer, for one, stacks every animation of a file in muted NLA tracks).

Nothing here modifies the action or the object it reads; :func:`write_action` only adds a new
action and assigns it.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix

from ..core.errors import ClipError, RigError
from ..core.rig.clip import Clip
from ..core.rig.rotations import (
    EULER_ORDERS,
    FloatArray,
    blender_axis_angle_from_quat,
    euler_from_quat,
    make_euler_continuous,
    make_quat_continuous,
    orthonormalize,
    parts_from_transform,
    quat_from_blender_axis_angle,
    quat_from_euler,
    transform_from_parts,
)
from ..core.rig.skeleton import Skeleton
from . import compat
from .file_import import FPS_PROPERTY, scene_fps

_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.([A-Za-z_]+)$')
_UNESCAPE = re.compile(r"\\(.)")
_CHANNEL_SIZE = {"location": 3, "rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "scale": 3}

# Keyframe.interpolation enum values (DNA eBezTriple_Interpolation).
_IPO_CONSTANT, _IPO_LINEAR, _IPO_BEZIER = 0, 1, 2
# Blender finds "the key at this frame" within this distance (BKE_fcurve_bezt_binarysearch_index).
_KEY_THRESHOLD = 1e-4
_FLT_EPSILON = 1.1920929e-07


# --- skeleton --------------------------------------------------------------------------------


def _armature(obj: Any) -> Any:
    """``obj`` checked to be an armature object with bones. Typed ``Any``: the stubs type
    ``Object.data`` as a union of every data type, which says nothing useful here."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        kind = getattr(obj, "type", type(obj).__name__)
        raise RigError(f"{getattr(obj, 'name', obj)!r} is not an armature object (it is {kind})")
    if len(obj.data.bones) == 0:
        raise RigError(f"armature object {obj.name!r} has no bones")
    return obj


def _matrices(buf: np.ndarray, n: int) -> FloatArray:
    """``(n, 4, 4)`` float64 from a flat column-major ``foreach_get`` buffer."""
    return buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)


def skeleton_from_armature(obj: bpy.types.Object) -> Skeleton:
    """The armature's bones as a core :class:`Skeleton`: rests from ``bone.matrix_local``,
    parents from the bone hierarchy, ``placement = obj.matrix_world``.

    The view layer is updated first when the object is in it, so a parent or transform changed
    since the last evaluation is reflected in the placement. Refuses (``RigError``, naming the
    object) anything that is not an armature with bones.
    """
    obj = _armature(obj)
    view_layer = bpy.context.view_layer
    if obj.name in view_layer.objects:
        view_layer.update()
    return _skeleton(obj)


#: Skeletons built lately, keyed by everything they are made of (names, parents, rests,
#: placement): reading a clip, retargeting it and writing the result build the same two rigs
#: several times. A Skeleton is immutable, so sharing one is safe.
_SKELETONS: dict[tuple[tuple[str, ...], tuple[str | None, ...], bytes, bytes], Skeleton] = {}


def _skeleton(obj: bpy.types.Object) -> Skeleton:
    """:func:`skeleton_from_armature` without the view-layer update (for readers and writers,
    which use the layout, not the placement)."""
    bones = obj.data.bones
    n = len(bones)
    buf = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    names = tuple(b.name for b in bones)
    parents = tuple(b.parent.name if b.parent is not None else None for b in bones)
    placement = np.array(obj.matrix_world, dtype=np.float64)
    key = (names, parents, buf.tobytes(), placement.tobytes())
    skeleton = _SKELETONS.get(key)
    if skeleton is None:
        skeleton = Skeleton.from_rest_matrices(names, list(parents), _matrices(buf, n), placement)
        if len(_SKELETONS) >= 16:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        _SKELETONS[key] = skeleton
    return skeleton


def _order(skeleton: Skeleton, names: Sequence[str]) -> np.ndarray:
    """For each skeleton joint, its index in ``names`` (a Blender collection's order)."""
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[n] for n in skeleton.names], dtype=np.int64)


def rest_heads_tails(obj: bpy.types.Object, skeleton: Skeleton | None = None) -> tuple[FloatArray, FloatArray]:
    """Skeleton-space rest heads and tails ``(B, 3)``, ``(B, 3)`` in the skeleton's bone order."""
    obj = _armature(obj)
    skeleton = skeleton or _skeleton(obj)
    bones = obj.data.bones
    n = len(bones)
    heads = np.empty(n * 3, dtype=np.float32)
    tails = np.empty(n * 3, dtype=np.float32)
    bones.foreach_get("head_local", heads)
    bones.foreach_get("tail_local", tails)
    idx = _order(skeleton, [b.name for b in bones])
    return heads.reshape(n, 3)[idx].astype(np.float64), tails.reshape(n, 3)[idx].astype(np.float64)


# --- F-curve evaluation ----------------------------------------------------------------------


@dataclass
class _Keys:
    """The keys of several F-curves, concatenated (curve ``c`` owns flat keys ``starts[c]`` to
    ``starts[c] + counts[c] - 1``), read with one ``foreach_get`` per curve and property.

    Key positions and values are read for every curve up front; interpolation modes and handles
    (:meth:`read_modes`) only for curves sampled between their keys, since a frame that falls on
    a key takes the key's value whatever the mode.
    """

    fcurves: list[Any]
    describe: Any
    starts: np.ndarray  # (C,) int64
    counts: np.ndarray  # (C,) int64
    x: np.ndarray  # (N,) key frames
    y: np.ndarray  # (N,) key values
    linear_extrapolation: np.ndarray  # (C,) bool
    #: Curves numpy does not model: Blender evaluates them (FCurve.evaluate), one by one.
    by_blender: np.ndarray  # (C,) bool
    ipo: np.ndarray  # (N,) Keyframe.interpolation values (valid where ``modes_read``)
    hl: np.ndarray  # (N, 2) left handles (valid for read curves with Bezier keys)
    hr: np.ndarray  # (N, 2) right handles
    modes_read: np.ndarray  # (C,) bool

    def read_modes(self, curves: np.ndarray) -> None:
        """Read interpolation modes (and handles where a key is Bezier) of ``curves``, and send
        to Blender the ones numpy does not model."""
        curves = np.asarray([c for c in curves if not self.modes_read[c] and self.counts[c] > 0], dtype=np.int64)
        if curves.size == 0:
            return
        starts, counts = self.starts, self.counts
        bezier = []
        for c in curves:
            s, k = int(starts[c]), int(counts[c])
            self.fcurves[c].keyframe_points.foreach_get("interpolation", self.ipo[s : s + k])
        self.modes_read[curves] = True
        for c in curves:
            s, k = int(starts[c]), int(counts[c])
            ipo = self.ipo[s : s + k]
            # Segment kinds numpy models: constant, linear, Bezier (easing modes go to Blender);
            # the last key's mode only matters for linear extrapolation.
            modes = ipo if self.linear_extrapolation[c] else ipo[:-1]
            if np.any((modes != _IPO_CONSTANT) & (modes != _IPO_LINEAR) & (modes != _IPO_BEZIER)):
                self.by_blender[c] = True
            if k > 1 and np.any(np.diff(self.x[s : s + k]) <= 0.0):
                self.by_blender[c] = True  # keys out of order: only Blender's own search answers
            if np.any(ipo == _IPO_BEZIER):
                bezier.append(c)
        for c in bezier:
            s, k = int(starts[c]), int(counts[c])
            hl = np.empty(2 * k, dtype=np.float32)
            hr = np.empty(2 * k, dtype=np.float32)
            kp = self.fcurves[c].keyframe_points
            kp.foreach_get("handle_left", hl)
            kp.foreach_get("handle_right", hr)
            self.hl[s : s + k] = hl.reshape(k, 2)
            self.hr[s : s + k] = hr.reshape(k, 2)
            h_ok = np.isfinite(self.hl[s : s + k]).all(axis=1) & np.isfinite(self.hr[s : s + k]).all(axis=1)
            if not np.all(h_ok):
                bad = int(np.flatnonzero(~h_ok)[0])
                raise ClipError(f"{self.describe(c)} has a non-finite Bezier handle at frame {self.x[s + bad]:g}")
            # A handle pointing backwards in time makes x(t) non-monotonic; Blender then takes
            # the first root of a cubic, which only Blender itself reproduces.
            x = self.x[s : s + k]
            seg = self.ipo[s : s + k - 1] == _IPO_BEZIER
            if np.any(seg & ((self.hr[s : s + k - 1, 0] < x[:-1]) | (self.hl[s + 1 : s + k, 0] > x[1:]))):
                self.by_blender[c] = True


def _curve_of_key(starts: np.ndarray, key: int) -> int:
    """The curve owning flat key index ``key`` (empty curves share a start with the next one;
    ``side="right"`` skips them)."""
    return int(np.searchsorted(starts, key, side="right") - 1)


def _read_keys(fcurves: Sequence[Any], describe: Any = None) -> _Keys:
    """Read every key position and value of ``fcurves`` in bulk.

    ``describe(c)`` names curve ``c`` in messages (bone and channel); a non-finite key is refused
    with a :class:`ClipError` naming the curve and the frame.
    """
    fcurves = list(fcurves)
    n_curves = len(fcurves)
    kps = [fc.keyframe_points for fc in fcurves]
    counts = np.fromiter((len(kp) for kp in kps), dtype=np.int64, count=n_curves)
    starts = np.zeros(n_curves, dtype=np.int64)
    if n_curves > 1:
        np.cumsum(counts[:-1], out=starts[1:])
    total = int(counts.sum())
    co = np.empty(2 * total, dtype=np.float32)
    by_blender = np.zeros(n_curves, dtype=bool)
    linear_ext = np.zeros(n_curves, dtype=bool)
    for c, kp in enumerate(kps):
        k = int(counts[c])
        if k == 0:
            # Baked samples (convert_to_samples) have no keys; Blender evaluates them. A curve
            # with neither is skipped by the callers (Blender leaves the channel alone).
            by_blender[c] = True
            continue
        s = int(starts[c])
        kp.foreach_get("co", co[2 * s : 2 * (s + k)])
        fc = fcurves[c]
        if fc.extrapolation == "LINEAR":
            linear_ext[c] = True
        if len(fc.modifiers) and any(not m.mute and m.active for m in fc.modifiers):
            by_blender[c] = True
    name = describe or (lambda c: f"F-curve {fcurves[c].data_path}[{fcurves[c].array_index}]")
    if not np.isfinite(co.sum(dtype=np.float64)):
        xy = co.reshape(total, 2)
        key = int(np.flatnonzero(~np.isfinite(xy).all(axis=1))[0])
        c = _curve_of_key(starts, key)
        frame = float(xy[key, 0])
        where = (
            f"frame {frame:g}"
            if np.isfinite(frame)
            else f"key {key - int(starts[c])} (whose frame is not finite either)"
        )
        raise ClipError(f"{name(c)} has a non-finite key at {where}")
    # One contiguous conversion; x and y are views of its columns.
    xy = co.astype(np.float64).reshape(total, 2)
    return _Keys(
        fcurves=fcurves,
        describe=name,
        starts=starts,
        counts=counts,
        x=xy[:, 0],
        y=xy[:, 1],
        linear_extrapolation=linear_ext,
        by_blender=by_blender,
        ipo=np.full(total, _IPO_LINEAR, dtype=np.int32),
        hl=np.zeros((total, 2)),
        hr=np.zeros((total, 2)),
        modes_read=np.zeros(n_curves, dtype=bool),
    )


def evaluate_fcurves(fcurves: Sequence[Any], frames: Any) -> FloatArray:
    """Values ``(C, T)`` of F-curves at ``frames`` as Blender evaluates them, in bulk."""
    keys = _read_keys(fcurves)
    return _evaluate(keys, np.asarray(frames, dtype=np.float64).reshape(-1))


def _evaluate(keys: _Keys, frames: np.ndarray) -> FloatArray:
    """Every curve at every frame, as ``fcurve_eval_keyframes`` computes it.

    Three paths: curves keyed exactly on the requested frames (the values are the keys, whatever
    the interpolation: the usual case for baked clips); curves Blender must evaluate (one
    ``FCurve.evaluate`` per frame); everything else vectorised over all curves and frames at
    once -- each curve's keys are shifted onto their own stretch of one axis so one
    ``searchsorted`` serves them all.
    """
    t = frames.shape[0]
    n_curves = keys.starts.shape[0]
    out = np.empty((n_curves, t))
    if t == 0 or n_curves == 0:
        return out
    todo = np.ones(n_curves, dtype=bool)
    same = ~keys.by_blender & (keys.counts == t)
    if np.all(same) and keys.x.shape[0] == n_curves * t:
        # Every curve keyed on exactly these frames, one after another (a baked clip): the keys
        # are the values, read as one (C, T) block.
        if np.all(np.abs(keys.x.reshape(n_curves, t) - frames[None, :]) < _KEY_THRESHOLD):
            return np.asarray(keys.y.reshape(n_curves, t))  # a view: callers gather rows from it
    if np.any(same):
        cs = np.flatnonzero(same)
        idx = keys.starts[cs][:, None] + np.arange(t)[None, :]
        hit = np.all(np.abs(keys.x[idx] - frames[None, :]) < _KEY_THRESHOLD, axis=1)
        out[cs[hit]] = keys.y[idx[hit]]
        todo[cs[hit]] = False
    picked = _values_on_keys(keys, np.flatnonzero(todo & ~keys.by_blender), frames)
    if picked is not None:
        cs, values = picked
        out[cs] = values
        todo[cs] = False
    keys.read_modes(np.flatnonzero(todo & ~keys.by_blender))
    for c in np.flatnonzero(todo & keys.by_blender):
        fc = keys.fcurves[c]
        out[c] = [fc.evaluate(float(f)) for f in frames]
    cs = np.flatnonzero(todo & ~keys.by_blender)
    if cs.size:
        out[cs] = _evaluate_general(keys, cs, frames)
    return out


def _values_on_keys(keys: _Keys, cs: np.ndarray, frames: np.ndarray) -> tuple[np.ndarray, FloatArray] | None:
    """Curves among ``cs`` whose keys (in increasing order) include every one of ``frames``, and
    their values there: the key values, whatever the interpolation (a result read back at some
    of the frames just keyed). ``None`` when no curve qualifies."""
    cs = cs[keys.counts[cs] > 0]
    if cs.size == 0:
        return None
    t = frames.shape[0]
    starts, counts = keys.starts[cs], keys.counts[cs]
    own = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, counts, strict=True)])
    x = keys.x[own]
    # Keys out of order (or repeated) need Blender's own search: leave such curves.
    first_of_curve = np.zeros(own.shape[0], dtype=bool)
    first_of_curve[np.cumsum(counts) - counts] = True
    rising = np.ones(own.shape[0], dtype=bool)
    rising[1:] = np.diff(x) > 2.0 * _KEY_THRESHOLD
    ordered = np.logical_and.reduceat(rising | first_of_curve, np.cumsum(counts) - counts)
    # One searchsorted for all curves: each curve's keys shifted onto their own stretch of an axis.
    lo = min(float(frames.min()), float(x.min()))
    width = float(np.ceil(max(float(frames.max()), float(x.max())) - lo + 4.0))
    shift = np.arange(cs.shape[0], dtype=np.float64) * width
    xs = (x - lo) + np.repeat(shift, counts)
    q = ((frames[None, :] - lo) + shift[:, None]).reshape(-1)
    pos = np.clip(np.searchsorted(xs, q, side="left"), 0, xs.shape[0] - 1)
    # The nearest key on either side of each query (within the curve: shifts keep curves apart).
    prev = np.clip(pos - 1, 0, xs.shape[0] - 1)
    near = np.where(np.abs(xs[prev] - q) < np.abs(xs[pos] - q), prev, pos)
    hit = (np.abs(xs[near] - q) < _KEY_THRESHOLD).reshape(cs.shape[0], t)
    good = ordered & hit.all(axis=1)
    if not np.any(good):
        return None
    values = keys.y[own[near]].reshape(cs.shape[0], t)
    return cs[good], values[good]


def _evaluate_general(keys: _Keys, cs: np.ndarray, frames: np.ndarray) -> FloatArray:
    t = frames.shape[0]
    n = cs.shape[0]
    starts = keys.starts[cs]
    counts = keys.counts[cs]
    first_of = starts  # per selected curve
    last_of = starts + counts - 1
    x, y, ipo = keys.x, keys.y, keys.ipo
    own = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, counts, strict=True)])
    lo = min(float(frames.min()), float(x[own].min()))
    width = float(np.ceil(max(float(frames.max()), float(x[own].max())) - lo + 4.0))
    shift = np.arange(n, dtype=np.float64) * width
    xs = (x[own] - lo) + np.repeat(shift, counts)
    q = ((frames[None, :] - lo) + shift[:, None]).reshape(-1)
    qc = np.repeat(np.arange(n), t)  # selected-curve index of each query
    f = np.tile(frames, n)
    first = first_of[qc]
    last = last_of[qc]
    # Global index of the last key at or before the query (searchsorted in the shifted keys).
    # Queries before their curve's first key land on another curve's key; they extrapolate and
    # never use ``a``.
    local_pos = np.searchsorted(xs, q, side="right") - 1
    a = np.clip(own[np.clip(local_pos, 0, own.shape[0] - 1)], first, last)
    val = np.empty(q.shape[0])

    before = f <= x[first]
    after = ~before & (f >= x[last])
    inside = ~(before | after)

    # Extrapolation (Blender: fcurve_eval_keyframes_extrapolate).
    lin_ext = keys.linear_extrapolation[cs][qc]
    for mask, end, neighbour, handles in ((before, first, first + 1, keys.hl), (after, last, last - 1, keys.hr)):
        if not np.any(mask):
            continue
        e = end[mask]
        ye = y[e]
        v = ye.copy()
        linear = lin_ext[mask] & (ipo[e] != _IPO_CONSTANT) & (counts[qc[mask]] > 1)
        dx = x[e] - f[mask]
        m = linear & (ipo[e] == _IPO_LINEAR)
        if np.any(m):
            nb = neighbour[mask][m]
            run = x[nb] - x[e[m]]
            slope = np.where(run != 0.0, (y[nb] - ye[m]) / np.where(run != 0.0, run, 1.0), 0.0)
            v[m] = ye[m] - slope * dx[m]
        m = lin_ext[mask] & (ipo[e] == _IPO_BEZIER)
        if np.any(m):
            h = handles[e[m]]
            run = x[e[m]] - h[:, 0]
            slope = np.where(run != 0.0, (ye[m] - h[:, 1]) / np.where(run != 0.0, run, 1.0), 0.0)
            v[m] = ye[m] - slope * dx[m]
        val[mask] = v

    if np.any(inside):
        ai = a[inside]
        fi = f[inside]
        bi = ai + 1
        xa, xb, ya, yb = x[ai], x[bi], y[ai], y[bi]
        res = ya.copy()  # constant segments, and exact hits on key a
        hit_a = np.abs(fi - xa) < _KEY_THRESHOLD
        hit_b = ~hit_a & (np.abs(xb - fi) < _KEY_THRESHOLD)
        res[hit_b] = yb[hit_b]
        free = ~(hit_a | hit_b)
        kind = ipo[ai]
        m = free & (kind == _IPO_LINEAR)
        if np.any(m):
            res[m] = ya[m] + (yb[m] - ya[m]) * (fi[m] - xa[m]) / (xb[m] - xa[m])
        m = free & (kind == _IPO_BEZIER)
        if np.any(m):
            res[m] = _bezier_values(keys, ai[m], fi[m])
        val[inside] = res
    return val.reshape(n, t)


def _bezier_values(keys: _Keys, a: np.ndarray, f: np.ndarray) -> FloatArray:
    """Values at ``f`` of the Bezier segments starting at keys ``a`` (Blender:
    BKE_fcurve_correct_bezpart, findzero, berekeny)."""
    x, y = keys.x, keys.y
    v1x, v1y = x[a], y[a]
    v4x, v4y = x[a + 1], y[a + 1]
    v2x, v2y = keys.hr[a, 0], keys.hr[a, 1]
    v3x, v3y = keys.hl[a + 1, 0], keys.hl[a + 1, 1]
    flat = (np.abs(v1y - v4y) < _FLT_EPSILON) & (np.abs(v2y - v3y) < _FLT_EPSILON) & (np.abs(v3y - v4y) < _FLT_EPSILON)
    # Handles longer than the segment would make the curve loop back in time: shorten them.
    span = v4x - v1x
    h1x, h1y = v1x - v2x, v1y - v2y
    h2x, h2y = v4x - v3x, v4y - v3y
    len1, len2 = np.abs(h1x), np.abs(h2x)
    some = len1 + len2 != 0.0
    fix1 = some & (len1 > span)
    fix2 = some & (len2 > span)
    fac1 = np.where(fix1, span / np.where(len1 > 0.0, len1, 1.0), 1.0)
    fac2 = np.where(fix2, span / np.where(len2 > 0.0, len2, 1.0), 1.0)
    v2x = np.where(fix1, v1x - fac1 * h1x, v2x)
    v2y = np.where(fix1, v1y - fac1 * h1y, v2y)
    v3x = np.where(fix2, v4x - fac2 * h2x, v3x)
    v3y = np.where(fix2, v4y - fac2 * h2y, v3y)
    # x(t) = c0 + c1 t + c2 t^2 + c3 t^3 is non-decreasing on [0, 1] once both handles lie
    # inside the segment (the Bernstein derivative stays >= 0): safeguarded Newton finds the root.
    c0 = v1x - f
    c1 = 3.0 * (v2x - v1x)
    c2 = 3.0 * (v1x - 2.0 * v2x + v3x)
    c3 = v4x - v1x + 3.0 * (v2x - v3x)
    n = f.shape[0]
    t = np.clip((f - v1x) / np.where(span > 0.0, span, 1.0), 0.0, 1.0)
    lo = np.zeros(n)
    hi = np.ones(n)
    for _ in range(60):
        g = c0 + t * (c1 + t * (c2 + t * c3))
        below = g < 0.0
        lo = np.where(below, t, lo)
        hi = np.where(below, hi, t)
        d = c1 + t * (2.0 * c2 + 3.0 * c3 * t)
        with np.errstate(divide="ignore", invalid="ignore"):
            tn = t - g / d
        ok = np.isfinite(tn) & (tn > lo) & (tn < hi)
        t_next = np.where(ok, tn, 0.5 * (lo + hi))
        done = np.abs(t_next - t) < 1e-14
        t = t_next
        if np.all(done):
            break
    e1 = 3.0 * (v2y - v1y)
    e2 = 3.0 * (v1y - 2.0 * v2y + v3y)
    e3 = v4y - v1y + 3.0 * (v2y - v3y)
    yv = v1y + t * (e1 + t * (e2 + t * e3))
    return np.where(flat, v1y, yv)


# --- reading actions -------------------------------------------------------------------------


def action_fps(action: bpy.types.Action | None) -> float:
    """The rate an action's frame numbers count at: ``marionette_fps``, else the scene's."""
    if action is not None:
        v = action.get(FPS_PROPERTY)
        if v is not None:
            try:
                fps = float(v)
            except (TypeError, ValueError):
                fps = 0.0
            if math.isfinite(fps) and fps > 0.0:
                return fps
    return scene_fps()


def _bone_curves(obj: bpy.types.Object, action: bpy.types.Action) -> tuple[Any, list[tuple[Any, str, str]]]:
    """The slot ``obj`` plays ``action`` through and its live pose-bone transform curves as
    ``(fcurve, bone, property)`` (muted curves and curves of muted groups are skipped, as
    Blender's animation system skips them)."""
    slot = compat.action_slot_for(action, obj)
    if compat.SLOTTED_ACTIONS and slot is None and len(action.slots) > 0:
        raise ClipError(
            f"action {action.name!r} has {len(action.slots)} slots and none is assigned to or named after "
            f"{obj.name!r}; assign the action to the object to choose one"
        )
    out = []
    bones = obj.pose.bones
    for fc in compat.action_fcurves(action, slot):
        if fc.mute or (fc.group is not None and fc.group.mute):
            continue
        m = _BONE_PATH.match(fc.data_path)
        if m is None:
            continue
        bone = m.group(1)
        if "\\" in bone:  # only an escaped name needs the substitution
            bone = _UNESCAPE.sub(r"\1", bone)
        prop = m.group(2)
        if prop not in _CHANNEL_SIZE or bone not in bones:
            continue
        if not 0 <= fc.array_index < _CHANNEL_SIZE[prop]:
            continue
        out.append((fc, bone, prop))
    return slot, out


def needs_evaluation(obj: bpy.types.Object, action: bpy.types.Action | None = None) -> list[str]:
    """Why the pose of ``obj`` cannot be read from the action's keys alone (empty: it can).

    Each reason names what shapes the pose: an active bone constraint, a driver on a pose bone,
    a bone that does not fully inherit its parent's transform, a layered action.
    """
    obj = _armature(obj)
    reasons = []
    for pb in obj.pose.bones:
        for c in pb.constraints:
            if not c.mute and c.influence > 0.0:
                reasons.append(f"bone {pb.name!r} has a {c.type} constraint ({c.name!r})")
                break
    ad = obj.animation_data
    if ad is not None:
        for d in ad.drivers:
            if d.data_path.startswith("pose.bones[") and not d.mute:
                reasons.append(f"a driver sets {d.data_path}[{d.array_index}]")
    for b in obj.data.bones:
        if not b.use_inherit_rotation:
            reasons.append(f"bone {b.name!r} does not inherit rotation")
        elif b.inherit_scale != "FULL":
            reasons.append(f"bone {b.name!r} inherits scale as {b.inherit_scale}")
        elif not b.use_local_location:
            reasons.append(f"bone {b.name!r} moves in armature space (Local Location off)")
    if action is not None and compat.action_is_layered(action):
        reasons.append(f"action {action.name!r} has several layers or strips")
    return reasons


def _default_frames(action: bpy.types.Action, keys: _Keys) -> np.ndarray:
    """Integer frames of the action's range: its manual range when set, else its keys'."""
    keyed = keys.counts > 0
    if action.use_frame_range:
        lo, hi = float(action.frame_start), float(action.frame_end)
    elif not np.any(keyed):  # only baked samples: Blender knows their range
        lo, hi = float(action.frame_range[0]), float(action.frame_range[1])
    else:
        lo = float(keys.x[keys.starts[keyed]].min())
        hi = float(keys.x[keys.starts[keyed] + keys.counts[keyed] - 1].max())
    start = math.ceil(lo - _KEY_THRESHOLD)
    stop = math.floor(hi + _KEY_THRESHOLD)
    if stop < start:  # a range narrower than a frame: take the frame it starts in
        stop = start
    return np.arange(start, stop + 1, dtype=np.float64)


def _describer(action: bpy.types.Action, entries: Sequence[tuple[Any, str, str]]) -> Any:
    def describe(c: int) -> str:
        fc, bone, prop = entries[c]
        return f"action {action.name!r}: bone {bone!r} ({prop}[{fc.array_index}])"

    return describe


def _check_frames(frames: Any, what: str) -> np.ndarray:
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.size == 0:
        raise ClipError(f"{what}: no frames to sample")
    if not np.all(np.isfinite(f)):
        raise ClipError(f"{what}: frame numbers must be finite")
    if f.size > 1 and not np.all(np.diff(f) > 0.0):
        raise ClipError(f"{what}: frame numbers must increase")
    return f


def _pose_values(obj: bpy.types.Object, skeleton: Skeleton) -> dict[str, FloatArray]:
    """Current pose-bone channel values, ``(B, n)`` per channel, in skeleton order."""
    pbs = obj.pose.bones
    n = len(pbs)
    idx = _order(skeleton, [pb.name for pb in pbs])
    out = {}
    for prop, size in _CHANNEL_SIZE.items():
        buf = np.empty(n * size, dtype=np.float32)
        pbs.foreach_get(prop, buf)
        out[prop] = buf.reshape(n, size)[idx].astype(np.float64)
    return out


def clip_from_action(
    obj: bpy.types.Object,
    action: bpy.types.Action,
    frames: Any = None,
    fps: float | None = None,
) -> Clip:
    """The clip ``action`` plays on ``obj``, sampled at ``frames`` (default: every integer frame
    of the action's range), read in bulk.

    ``fps`` is the rate the action's frame numbers count at (default :func:`action_fps`). Falls
    back to :func:`clip_from_evaluation` by itself when :func:`needs_evaluation` gives a reason.
    Refuses (``ClipError``) an action with no keys on the armature's bones and non-finite keys
    (naming bone and frame); refuses (``RigError``) an armature without bones.
    """
    obj = _armature(obj)
    if action is None:
        raise ClipError(f"no action given to read on {obj.name!r}")
    skeleton = _skeleton(obj)
    _slot, found = _bone_curves(obj, action)
    modes = {pb.name: pb.rotation_mode for pb in obj.pose.bones}
    entries = []
    for fc, bone, prop in found:
        if prop.startswith("rotation_"):
            mode = modes[bone]
            wanted = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
                mode, "rotation_euler"
            )
            if prop != wanted:
                continue  # keys of another rotation mode: Blender ignores them too
        if len(fc.keyframe_points) or len(fc.sampled_points):
            entries.append((fc, bone, prop))
    if not entries:
        if not any(len(fc.keyframe_points) for fc, _, _ in found):
            raise ClipError(f"action {action.name!r} has no keys on the bones of {obj.name!r}")
        raise ClipError(f"action {action.name!r} keys no channel that {obj.name!r}'s bones use")
    keys = _read_keys([e[0] for e in entries], _describer(action, entries))
    reasons = needs_evaluation(obj, action)
    rate = float(fps) if fps is not None else action_fps(action)
    if frames is None:
        frames = _default_frames(action, keys)
    frames = _check_frames(frames, f"action {action.name!r}")
    if reasons:
        return clip_from_evaluation(obj, action, frames, rate)

    values = _evaluate(keys, frames)
    t, b = frames.shape[0], len(skeleton)
    current = _pose_values(obj, skeleton)
    coverage = np.zeros(b)
    # Curve rows of each channel, scattered in one fancy assignment per channel.
    rows: dict[str, tuple[list[int], list[int], list[int]]] = {p: ([], [], []) for p in _CHANNEL_SIZE}
    for r, (fc, bone, prop) in enumerate(entries):
        j = skeleton.index(bone)
        rr, jj, kk = rows[prop]
        rr.append(r)
        jj.append(j)
        kk.append(fc.array_index)
        coverage[j] = 1.0

    def channel(prop: str, bones: np.ndarray | slice = slice(None)) -> FloatArray:
        """``(T, B', n)`` values of ``prop``: the keys where curves exist, the pose elsewhere."""
        size = _CHANNEL_SIZE[prop]
        arr = np.empty((t, b, size))
        arr[:] = current[prop][None]
        rr, jj, kk = rows[prop]
        if rr:
            arr[:, jj, kk] = values[rr].T
        return arr[:, bones]

    mode_of = [modes[n] for n in skeleton.names]
    kinds = set(mode_of)
    if kinds == {"QUATERNION"}:
        # The usual case, every bone in quaternions: the channel is the rotations (no copies).
        rotations = channel("rotation_quaternion")
        kinds = set()
    elif len(kinds) == 1 and mode_of[0] in EULER_ORDERS:
        # Every bone in one Euler order (a BVH import): converted whole, no selections.
        rotations = quat_from_euler(channel("rotation_euler"), mode_of[0])
        kinds = set()
    else:
        rotations = np.empty((t, b, 4))
    for mode in kinds:
        sel = np.array([m == mode for m in mode_of])
        if mode == "QUATERNION":
            rotations[:, sel] = channel("rotation_quaternion", sel)
        elif mode == "AXIS_ANGLE":
            rotations[:, sel] = quat_from_blender_axis_angle(channel("rotation_axis_angle", sel))
        elif mode in EULER_ORDERS:
            rotations[:, sel] = quat_from_euler(channel("rotation_euler", sel), mode)
        else:  # pragma: no cover - Blender has no other rotation mode
            raise RigError(f"unknown rotation mode {mode!r}")
    rotations, zero = _normalized(rotations)
    translations = channel("location")
    connected = np.array([obj.data.bones[n].use_connect for n in skeleton.names])
    if np.any(connected):
        # Blender ignores the location of a connected bone (its head is pinned to the parent's tail).
        translations[:, connected] = 0.0
    scales = None
    if rows["scale"][0] or np.any(current["scale"] != 1.0):
        scales = channel("scale")
        # Scale keys that are all one carry nothing; a clip without scales writes no scale curves.
        if np.all(np.abs(scales - 1.0) < 1e-6):
            scales = None
    clip = Clip(
        names=skeleton.names,
        times=(frames - frames[0]) / rate,
        fps=rate,
        rotations=rotations,
        translations=translations,
        scales=scales,
        coverage=coverage,
        name=action.name,
        first_frame=float(frames[0]),
    )
    return _validated(clip, zero)


def _normalized(q: FloatArray) -> tuple[FloatArray, bool]:
    """Unit quaternions (Blender normalises before use) and whether any was zero; ``q`` itself
    when it is unit already."""
    n = np.sqrt(np.einsum("...i,...i->...", q, q))
    zero = bool(np.any(n < 1e-12))
    if not zero and np.all(np.abs(n - 1.0) < 1e-12):
        return q, False
    return q / np.where(n < 1e-12, 1.0, n)[..., None], zero


def _validated(clip: Clip, suspect: bool = False) -> Clip:
    """``clip.validate()`` only when a cheap test finds something to name (it is the slow part
    of reading a clip): a non-finite value makes the sum non-finite."""
    total = clip.rotations.sum() + clip.translations.sum() + (0.0 if clip.scales is None else clip.scales.sum())
    if suspect or not np.isfinite(total):
        clip.validate()
    return clip


# --- evaluation through Blender --------------------------------------------------------------


def _in_view_layer(obj: bpy.types.Object) -> None:
    view_layer = bpy.context.view_layer
    if obj.name not in view_layer.objects:
        view_layer.update()  # objects linked since the last update are not listed until a sync
    if obj.name not in view_layer.objects:
        raise RigError(f"armature {obj.name!r} is not in the current view layer, so Blender cannot evaluate it")


def _frame_of(f: float) -> tuple[int, float]:
    i = math.floor(f)
    return int(i), float(f - i)


def evaluated_pose_matrices(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """Blender's evaluated skeleton-space bone matrices ``(T, B, 4, 4)`` (``pose_bone.matrix``:
    constraints, drivers, IK and NLA included) at ``frames``, in skeleton order. The scene's
    current frame is restored afterwards."""
    return _evaluate_frames(obj, frames, skeleton, world=False)


def evaluated_world_matrices(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """Like :func:`evaluated_pose_matrices` but in world space (``matrix_world @ matrix``, with
    the object's world matrix of each frame)."""
    return _evaluate_frames(obj, frames, skeleton, world=True)


def evaluated_world_positions(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """World positions ``(T, B, 3)`` of every bone's head at ``frames``, as Blender evaluates
    them (reference for tests), in skeleton order."""
    return evaluated_world_matrices(obj, frames, skeleton)[..., :3, 3]


def _evaluate_frames(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None, world: bool) -> FloatArray:
    obj = _armature(obj)
    _in_view_layer(obj)
    skeleton = skeleton or _skeleton(obj)
    f = _check_frames(frames, f"evaluating {obj.name!r}")
    scene = bpy.context.scene
    pbs = obj.pose.bones
    n = len(pbs)
    idx = _order(skeleton, [pb.name for pb in pbs])
    buf = np.empty(n * 16, dtype=np.float32)
    out = np.empty((f.shape[0], n, 4, 4))
    keep = (scene.frame_current, scene.frame_subframe)
    try:
        for k, fr in enumerate(f):
            i, sub = _frame_of(float(fr))
            scene.frame_set(i, subframe=sub)
            pbs.foreach_get("matrix", buf)
            m = _matrices(buf, n)
            if world:
                m = np.array(obj.matrix_world, dtype=np.float64) @ m
            out[k] = m
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return out[:, idx]


@dataclass
class _ObjectAnimationState:
    """What evaluating an action on an object touches, so it can be put back exactly."""

    had_animation_data: bool
    action: Any
    slot: Any
    use_nla: bool
    influence: float
    blend: str
    extrapolation: str
    pose_position: str
    channels: dict[str, np.ndarray]

    @classmethod
    def capture(cls, obj: bpy.types.Object) -> _ObjectAnimationState:
        ad = obj.animation_data
        pbs = obj.pose.bones
        channels = {}
        for prop, size in _CHANNEL_SIZE.items():
            buf = np.empty(len(pbs) * size, dtype=np.float32)
            pbs.foreach_get(prop, buf)
            channels[prop] = buf
        return cls(
            had_animation_data=ad is not None,
            action=ad.action if ad else None,
            slot=(ad.action_slot if ad and compat.SLOTTED_ACTIONS else None),
            use_nla=ad.use_nla if ad else True,
            influence=ad.action_influence if ad else 1.0,
            blend=ad.action_blend_type if ad else "REPLACE",
            extrapolation=ad.action_extrapolation if ad else "HOLD",
            pose_position=obj.data.pose_position,
            channels=channels,
        )

    def restore(self, obj: bpy.types.Object) -> None:
        if obj.data.pose_position != self.pose_position:
            obj.data.pose_position = self.pose_position
        if not self.had_animation_data:
            obj.animation_data_clear()
        else:
            ad = obj.animation_data
            if ad.action != self.action or (compat.SLOTTED_ACTIONS and ad.action_slot != self.slot):
                compat.assign_action(obj, self.action, self.slot)
            ad.use_nla = self.use_nla
            ad.action_influence = self.influence
            ad.action_blend_type = self.blend
            ad.action_extrapolation = self.extrapolation
        pbs = obj.pose.bones
        for prop, buf in self.channels.items():
            pbs.foreach_set(prop, buf)


def clip_from_evaluation(
    obj: bpy.types.Object,
    action: bpy.types.Action | None,
    frames: Any = None,
    fps: float | None = None,
) -> Clip:
    """The clip read from Blender's evaluated pose at each frame (``scene.frame_set`` and
    ``pose.bones.foreach_get('matrix')``), converted to core local transforms through the
    skeleton (:meth:`Skeleton.local_from_world`), so the core model reproduces the evaluated
    pose whatever constraints, drivers or inheritance settings made it.

    With an ``action`` it is played alone (assigned with its slot, NLA off, full influence) and
    ``frames`` default to the action's range; with ``None`` the object is evaluated as it stands
    (its action, NLA, everything) over the scene's frame range. An armature shown at its rest
    position is evaluated in pose position. The object's action, slot, NLA settings and pose
    values, the armature's pose position and the scene's current frame are restored afterwards.
    """
    obj = _armature(obj)
    _in_view_layer(obj)
    skeleton = _skeleton(obj)
    scene = bpy.context.scene
    ad = obj.animation_data
    if ad is not None and ad.use_tweak_mode:
        raise ClipError(f"{obj.name!r} is in NLA tweak mode; leave it before reading an action")
    slot = None
    if action is not None:
        slot, found = _bone_curves(obj, action)
        found = [e for e in found if len(e[0].keyframe_points) or len(e[0].sampled_points)]
        if not found:
            raise ClipError(f"action {action.name!r} has no keys on the bones of {obj.name!r}")
        keys = _read_keys([e[0] for e in found], _describer(action, found))  # refuses non-finite keys
        rate = float(fps) if fps is not None else action_fps(action)
        if frames is None:
            frames = _default_frames(action, keys)
        name = action.name
    else:
        rate = float(fps) if fps is not None else scene_fps()
        if frames is None:
            frames = np.arange(scene.frame_start, scene.frame_end + 1, dtype=np.float64)
        name = ad.action.name if ad is not None and ad.action is not None else obj.name
    frames = _check_frames(frames, f"evaluating {obj.name!r}")

    state = _ObjectAnimationState.capture(obj)
    try:
        if obj.data.pose_position != "POSE":
            obj.data.pose_position = "POSE"
        if action is not None:
            compat.assign_action(obj, action, slot)
            ad = obj.animation_data
            ad.use_nla = False
            ad.action_influence = 1.0
            ad.action_blend_type = "REPLACE"
            ad.action_extrapolation = "HOLD"
        pose = evaluated_pose_matrices(obj, frames, skeleton)
    finally:
        state.restore(obj)
        # Re-evaluate at the restored frame with the restored action and values.
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)

    local = skeleton.local_from_world(pose)
    rotations, translations, scales = parts_from_transform(local)
    # Drop float32 noise from the matrices read back: a pose without scale has none.
    has_scale = not np.allclose(scales, 1.0, rtol=0.0, atol=1e-5)
    clip = Clip(
        names=skeleton.names,
        times=(frames - frames[0]) / rate,
        fps=rate,
        rotations=make_quat_continuous(rotations, axis=0),
        translations=translations,
        scales=scales if has_scale else None,
        coverage=np.ones(len(skeleton)),
        name=name,
        first_frame=float(frames[0]),
    )
    return _validated(clip)


# --- writing actions -------------------------------------------------------------------------


#: Data path of the curve :func:`write_action` copies the others from (no property has it).
_TEMPLATE_PATH = "marionette_key_template"


def _special_inheritance(bone: Any) -> bool:
    return (not bone.use_inherit_rotation) or bone.inherit_scale != "FULL" or (not bone.use_local_location)


def write_action(
    obj: bpy.types.Object,
    clip: Clip,
    name: str,
    frames: Any = None,
    replace: bool = False,
    fps: float | None = None,
) -> bpy.types.Action:
    """Key ``clip`` into a new action on ``obj`` (a new slot, assigned explicitly) and return it.

    * Only bones with ``coverage > 0`` are keyed, each in its pose bone's own rotation mode
      (quaternion keys hemisphere-continuous, Euler keys free of 2-pi jumps), with location, and
      scale when the clip has scales; one F-curve group per bone; LINEAR keys. A location that is
      zero in every frame and in the pose now, or a scale that is one throughout, gets no curve
      (the pose is the same); a connected bone gets no location curve, since Blender ignores its
      location (its head sits on the parent's tail), so its clip translation should be zero.
    * ``fps`` is the rate the new action's frame numbers count at (default: the scene's), stored
      as ``marionette_fps``; ``frames`` default to ``clip.frame_numbers(fps)`` (the clip's timing
      kept on that rate). Pass ``fps=clip.fps`` to keep the clip's own frame numbers.
    * An existing action called ``name`` is left alone and the new one gets a unique name, unless
      ``replace``: then the new action takes the name and the old one's users, and the old one is
      removed. The object's previous action, if this leaves it without users, gets a fake user
      so it is not lost on save.
    * Bones that do not fully inherit their parent's transform get keys that put them where the
      clip's (fully inheriting) core model puts them, via ``Bone.convert_local_to_pose``.

    Keys are written in bulk (``keyframe_points.add`` then ``foreach_set``).
    """
    obj = _armature(obj)
    problem = linked_problem(obj)
    if problem is not None:
        raise RigError(problem)
    skeleton = _skeleton(obj)
    _validated(clip)
    pbs = obj.pose.bones
    covered = [int(i) for i in np.flatnonzero(np.asarray(clip.coverage) > 0.0)]
    if not covered:
        raise ClipError(f"clip {clip.name!r} drives no bone (every coverage is zero)")
    missing = [clip.names[i] for i in covered if clip.names[i] not in pbs]
    if missing:
        listed = ", ".join(repr(m) for m in missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise ClipError(f"clip {clip.name!r} drives bones that {obj.name!r} does not have: {listed}")
    rate = float(fps) if fps is not None else scene_fps()
    if not (math.isfinite(rate) and rate > 0.0):
        raise ClipError(f"frame rate must be positive, got {fps}")
    f = clip.frame_numbers(rate) if frames is None else np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.shape != (clip.frame_count,):
        raise ClipError(f"clip {clip.name!r} has {clip.frame_count} frames but {f.shape[0]} frame numbers were given")
    f = _check_frames(f, f"writing clip {clip.name!r}")
    f32 = f.astype(np.float32)
    if f32.size > 1 and not np.all(np.diff(f32) > 0.0):
        raise ClipError(
            f"clip {clip.name!r}: frame numbers collide at single precision; use fewer or wider-spaced frames"
        )

    t = clip.frame_count
    names = [clip.names[i] for i in covered]
    every = len(covered) == len(clip.names)
    rot, zero = _normalized(clip.rotations if every else clip.rotations[:, covered])
    if zero:
        clip.validate()  # names the bone with a zero quaternion
    # Most clips are continuous already (readers and retargets keep them so); only flip signs
    # when some consecutive pair lies in opposite hemispheres.
    if t > 1 and np.any(np.einsum("tbi,tbi->tb", rot[1:], rot[:-1]) < 0.0):
        rot = make_quat_continuous(rot, axis=0)
    loc = clip.translations if every else clip.translations[:, covered]
    sca = None if clip.scales is None else (clip.scales if every else clip.scales[:, covered])
    overrides = _inheritance_overrides(obj, skeleton, clip, covered)
    if overrides:
        # Never write into the clip's own arrays.
        rot, loc = rot.copy(), loc.copy()
        sca = None if sca is None else sca.copy()
    for i, (q, l_, s_) in overrides.items():
        k = covered.index(i)
        rot[:, k], loc[:, k] = q, l_
        if s_ is not None:
            if sca is None:
                sca = np.ones_like(loc)
            sca[:, k] = s_

    # Which channels each bone gets.
    current = _pose_values(obj, skeleton)
    cur_loc = current["location"][[skeleton.index(n) for n in names]]
    cur_scale = current["scale"][[skeleton.index(n) for n in names]]
    arm_bones = obj.data.bones
    connected = np.array([arm_bones[n].use_connect for n in names])
    # Blender ignores a connected bone's location (its head sits on the parent's tail); a
    # location that is zero now and in every frame, or a scale that is one, needs no curve.
    # "Zero" is judged against the rig's size: importers leave pose noise (~1e-7) behind.
    heads = skeleton.rest_placements()[:, :3, 3]
    tiny = 1e-7 * max(float(np.ptp(heads, axis=0).max()), 1e-12)
    want_loc = ~connected & ~(np.all(np.abs(loc) < tiny, axis=(0, 2)) & np.all(np.abs(cur_loc) < tiny, axis=1))
    want_scale = np.zeros(len(names), dtype=bool)
    if sca is not None:
        want_scale = ~(np.all(np.abs(sca - 1.0) < 1e-9, axis=(0, 2)) & np.all(cur_scale == 1.0, axis=1))
    mode_of = {pb.name: pb.rotation_mode for pb in pbs}  # one pass: a lookup by name searches the bones
    modes = [mode_of[n] for n in names]

    # Blocks of values (T, bones, n) per channel kind, and the curve rows they fill.
    blocks: list[tuple[str, np.ndarray, np.ndarray]] = []  # (property, bone positions, values)
    sel = np.flatnonzero(want_loc)
    if sel.size:
        blocks.append(("location", sel, loc[:, sel]))
    for mode in sorted(set(modes)):
        sel = np.array([k for k, m in enumerate(modes) if m == mode])
        if mode == "QUATERNION":
            blocks.append(("rotation_quaternion", sel, rot[:, sel]))
        elif mode == "AXIS_ANGLE":
            aa = np.stack([blender_axis_angle_from_quat(rot[:, k], carry=True) for k in sel], axis=1)
            blocks.append(("rotation_axis_angle", sel, aa))
        else:
            e = make_euler_continuous(euler_from_quat(rot[:, sel], mode), mode, axis=0)
            blocks.append(("rotation_euler", sel, e))
    sel = np.flatnonzero(want_scale)
    if sel.size and sca is not None:
        blocks.append(("scale", sel, sca[:, sel]))
    # Curves bone by bone (location, rotation, scale), so each bone's group reads in order.
    order = {"location": 0, "rotation_quaternion": 1, "rotation_axis_angle": 1, "rotation_euler": 1, "scale": 2}
    specs = sorted(
        (
            (int(bk), order[prop], prop, k, bi)
            for bi, (prop, bsel, vals) in enumerate(blocks)
            for bk in bsel
            for k in range(vals.shape[2])
        ),
    )
    # Each block as contiguous float32 rows (bone, component, frame): one conversion pass, then
    # every curve copies one row into a single reused [frame, value, ...] buffer.
    rows_of = [np.ascontiguousarray(vals.transpose(1, 2, 0), dtype=np.float32) for _p, _s, vals in blocks]
    where = {(bi, int(bk)): pos for bi, (_p, bsel, _v) in enumerate(blocks) for pos, bk in enumerate(bsel)}
    co = np.empty(2 * t, dtype=np.float32)
    co[0::2] = f32

    action = _new_action(name, replace)
    try:
        action[FPS_PROPERTY] = rate
        slot = compat.new_action_slot(action, obj)
        bag = compat.channelbag(action, slot, create=True)
        linear = [_IPO_LINEAR] * t
        paths = [f'pose.bones["{bpy.utils.escape_identifier(n)}"].' for n in names]
        # Where Blender copies F-curves (slotted actions), every curve is a copy of one template
        # keyed on the frames with LINEAR interpolation, its values then written over: adding the
        # keys and setting their interpolation curve by curve costs more than the copy. The
        # template is removed at the end; the curves are the same as made one by one.
        copy = getattr(bag.fcurves, "new_from_fcurve", None) if compat.SLOTTED_ACTIONS and hasattr(bag, "groups") else None
        template = None
        if copy is not None:
            template = bag.fcurves.new(_TEMPLATE_PATH, index=0)
            co[1::2] = 0.0
            template.keyframe_points.add(t)
            template.keyframe_points.foreach_set("co", co)
            template.keyframe_points.foreach_set("interpolation", linear)
        groups: dict[str, Any] = {}
        for bk, _o, prop, k, bi in specs:
            if template is None:
                fc = compat.new_fcurve(bag, paths[bk] + prop, k, names[bk])
                fc.keyframe_points.add(t)
            else:
                template.array_index = k  # the copy takes its index (and must not exist yet)
                fc = copy(template, data_path=paths[bk] + prop)
                group = groups.get(names[bk])
                if group is None:
                    group = groups[names[bk]] = bag.groups.new(names[bk])
                fc.group = group
            kp = fc.keyframe_points
            co[1::2] = rows_of[bi][where[(bi, bk)], k]
            kp.foreach_set("co", co)
            # Sorted, unique LINEAR keys need no fcurve.update() (which would double the time):
            # handles play no part in LINEAR segments.
            if template is None:
                kp.foreach_set("interpolation", linear)
        if template is not None:
            bag.fcurves.remove(template)
    except Exception:
        bpy.data.actions.remove(action)
        raise
    previous = obj.animation_data.action if obj.animation_data else None
    compat.assign_action(obj, action, slot)
    if previous is not None and previous != action and previous.users == 0 and not previous.use_fake_user:
        previous.use_fake_user = True
    return action


def linked_problem(obj: Any) -> str | None:
    """Why ``obj`` cannot keep a new animation, or ``None``: an object linked from a library file
    (not overridden) accepts an action in memory, and loses it when the file is saved and opened
    again."""
    if getattr(obj, "library", None) is not None and getattr(obj, "override_library", None) is None:
        return (
            f"armature {obj.name!r} is linked from {obj.library.filepath!r}, so an action given to it would be lost "
            "on save; make a library override of it (Object > Library Override > Make) and use that"
        )
    return None


def _new_action(name: str, replace: bool) -> bpy.types.Action:
    old = bpy.data.actions.get(name)
    action = bpy.data.actions.new(name)
    if replace and old is not None and old != action:
        old.user_remap(action)
        bpy.data.actions.remove(old)
        action.name = name
    return action


def _inheritance_overrides(
    obj: bpy.types.Object, skeleton: Skeleton, clip: Clip, covered: list[int]
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """For covered bones that do not fully inherit, the ``matrix_basis`` parts (quaternion,
    location, scale or ``None``) that put them where the clip's core model places them."""
    bones = obj.data.bones
    special = [i for i in covered if _special_inheritance(bones[clip.names[i]])]
    if not special:
        return {}
    t, b = clip.frame_count, len(skeleton)
    # Full local transforms for FK: the clip's where it has the bone, the current pose elsewhere.
    pbs = obj.pose.bones
    buf = np.empty(len(pbs) * 16, dtype=np.float32)
    pbs.foreach_get("matrix_basis", buf)
    current = _matrices(buf, len(pbs))[_order(skeleton, [pb.name for pb in pbs])]
    local = np.broadcast_to(current[None], (t, b, 4, 4)).copy()
    clip_local = transform_from_parts(clip.rotations, clip.translations, clip.scales)
    for i, nm in enumerate(clip.names):
        j = skeleton.find(nm)
        if j is not None:
            local[:, j] = clip_local[:, i]
    pose = skeleton.forward_kinematics_from_locals(local)
    out = {}
    for i in special:
        bone = bones[clip.names[i]]
        j = skeleton.index(bone.name)
        rest = bone.matrix_local
        parent = bone.parent
        p = skeleton.index(parent.name) if parent is not None else -1
        basis = np.empty((t, 4, 4))
        for k in range(t):
            kwargs = {}
            if parent is not None:
                kwargs = {"parent_matrix": Matrix(pose[k, p].tolist()), "parent_matrix_local": parent.matrix_local}
            m = bone.convert_local_to_pose(Matrix(pose[k, j].tolist()), rest, invert=True, **kwargs)
            basis[k] = np.array(m, dtype=np.float64)
        q, loc, sca = parts_from_transform(basis)
        q = make_quat_continuous(q, axis=0)
        has_scale = clip.scales is not None or not np.allclose(sca, 1.0, rtol=0.0, atol=1e-6)
        out[i] = (q, loc, sca if has_scale else None)
    return out


# --- building armatures ----------------------------------------------------------------------


def create_armature(
    skeleton: Skeleton,
    name: str,
    tails: Any = None,
    collection: bpy.types.Collection | None = None,
) -> bpy.types.Object:
    """A new armature object whose bones have ``skeleton``'s rest placements and parents, placed
    at ``skeleton.placement``, linked to ``collection`` (default: the active collection).

    Bone lengths come from ``tails`` (``(B, 3)`` skeleton-space points; only their distance to
    the head is used, the direction is the rest's Y axis) or, by default, from the distance to
    the children's heads (a leaf takes half its parent's length). Every bone is at least 1/1000
    of the skeleton's size long, since Blender deletes zero-length bones. Local transforms of a
    clip on ``skeleton`` map one to one onto the new bones when the skeleton has no child-side
    frames (``C1 = I``), as for any skeleton read from Blender.
    """
    rest = skeleton.rest_placements()
    heads = rest[:, :3, 3]
    n = len(skeleton)
    extent = float(np.linalg.norm(heads.max(axis=0) - heads.min(axis=0))) if n > 1 else 0.0
    floor = max(1e-3 * extent, 1e-4) if extent > 0.0 else 0.1
    if tails is not None:
        tl = np.asarray(tails, dtype=np.float64)
        if tl.shape != (n, 3):
            raise RigError(f"tails must have shape ({n}, 3), got {tl.shape}")
        lengths = np.linalg.norm(tl - heads, axis=1)
    else:
        lengths = np.zeros(n)
        for i in range(n):
            kids = skeleton.children(i)
            d = [float(np.linalg.norm(heads[c] - heads[i])) for c in kids]
            d = [x for x in d if x > floor]
            if d:
                lengths[i] = float(np.mean(d))
        for i in range(n):  # leaves after their parents (parents come first)
            if lengths[i] <= floor:
                p = int(skeleton.parents[i])
                lengths[i] = 0.5 * lengths[p] if p >= 0 else 0.1 * max(extent, 1.0)
    lengths = np.maximum(lengths, floor)

    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    (collection or bpy.context.collection or bpy.context.scene.collection).objects.link(obj)
    obj.matrix_world = Matrix(np.asarray(skeleton.placement).tolist())
    view_layer = bpy.context.view_layer
    previous_active = view_layer.objects.active
    previous_mode = previous_active.mode if previous_active is not None else "OBJECT"
    if previous_mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    view_layer.objects.active = obj
    try:
        bpy.ops.object.mode_set(mode="EDIT")
        ebs = arm.edit_bones
        made = []
        rot = orthonormalize(rest[:, :3, :3])
        for i, nm in enumerate(skeleton.names):
            eb = ebs.new(nm)
            eb.head = (0.0, 0.0, 0.0)
            eb.tail = (0.0, float(lengths[i]), 0.0)
            m = np.eye(4)
            m[:3, :3] = rot[i]
            m[:3, 3] = heads[i]
            eb.matrix = Matrix(m.tolist())
            made.append(eb)
        for i, eb in enumerate(made):
            p = int(skeleton.parents[i])
            if p >= 0:
                eb.parent = made[p]
                eb.use_connect = False
        bpy.ops.object.mode_set(mode="OBJECT")
    except Exception:
        if obj.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        bpy.data.objects.remove(obj)
        bpy.data.armatures.remove(arm)
        raise
    finally:
        if previous_active is not None and previous_active.name in view_layer.objects:
            view_layer.objects.active = previous_active
            if previous_mode != "OBJECT":
                bpy.ops.object.mode_set(mode=previous_mode)
    return obj

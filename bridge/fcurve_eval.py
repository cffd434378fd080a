"""F-curves evaluated in numpy exactly as Blender does: every curve's keys come out in bulk with
``foreach_get`` (constant, linear and Bezier segments with Blender's handle correction, constant
or linear extrapolation); a curve numpy does not model is evaluated by Blender for that curve
alone (``FCurve.evaluate``). Conventions: :mod:`.skeleton_read`.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..core.errors import ClipError
from ..core.rig.rotations import (
    FloatArray,
)

# Keyframe.interpolation enum values (DNA eBezTriple_Interpolation).
_IPO_CONSTANT, _IPO_LINEAR, _IPO_BEZIER = 0, 1, 2
# Blender finds "the key at this frame" within this distance (BKE_fcurve_bezt_binarysearch_index).
_KEY_THRESHOLD = 1e-4
_FLT_EPSILON = 1.1920929e-07


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
    co: np.ndarray  # (2N,) float32 as read: frame, value, frame, value, ...
    linear_extrapolation: np.ndarray  # (C,) bool
    #: Curves numpy does not model: Blender evaluates them (FCurve.evaluate), one by one.
    by_blender: np.ndarray  # (C,) bool
    modes_read: np.ndarray  # (C,) bool

    # Made when first used (a clip read again unchanged uses none of them): fresh arrays of a
    # clip's size cost their page faults.
    @cached_property
    def _xy(self) -> np.ndarray:
        return self.co.astype(np.float64).reshape(-1, 2)  # one contiguous conversion

    @property
    def x(self) -> np.ndarray:
        """``(N,)`` key frames."""
        return self._xy[:, 0]

    @property
    def y(self) -> np.ndarray:
        """``(N,)`` key values."""
        return self._xy[:, 1]

    @cached_property
    def ipo(self) -> np.ndarray:
        """``(N,)`` Keyframe.interpolation values (valid where ``modes_read``)."""
        return np.full(self.co.size // 2, _IPO_LINEAR, dtype=np.int32)

    @cached_property
    def hl(self) -> np.ndarray:
        """``(N, 2)`` left handles (valid for read curves with Bezier keys)."""
        return np.zeros((self.co.size // 2, 2))

    @cached_property
    def hr(self) -> np.ndarray:
        """``(N, 2)`` right handles."""
        return np.zeros((self.co.size // 2, 2))

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
    return _Keys(
        fcurves=fcurves,
        describe=name,
        starts=starts,
        counts=counts,
        co=co,
        linear_extrapolation=linear_ext,
        by_blender=by_blender,
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


def _check_frames(frames: Any, what: str) -> np.ndarray:
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.size == 0:
        raise ClipError(f"{what}: no frames to sample")
    if not np.all(np.isfinite(f)):
        raise ClipError(f"{what}: frame numbers must be finite")
    if f.size > 1 and not np.all(np.diff(f) > 0.0):
        raise ClipError(f"{what}: frame numbers must increase")
    return f


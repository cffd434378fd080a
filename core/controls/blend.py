"""Blending a group's candidates into the working pose by their weights (docs/controls.md#the-stack): slerp for
rotations, linear for translations, only where a candidate changes a joint, coverage raised to
the weight there; frames with a non-finite candidate are skipped as a whole. Members of a group
are independent, so their blends go in together, with a plain-float route for the usual live
frame at full weight."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import RigError
from ..rig.rotations import FloatArray, quat_slerp
from .chains import PoseBuffers
from .kinds.base import BoolArray, Candidate, ControlReport


@dataclass(frozen=True)
class Layout:
    """The joints a group's candidates write, side by side in member order: which members
    rotate (``rot_members``) and move (``tr_members``), the joints (a list for the pose's
    bookkeeping, an index array for numpy) and each member's column count."""

    rot_members: tuple[int, ...]
    rot_cols: list[int]
    rot_index: NDArray[np.intp]
    rot_widths: tuple[int, ...]
    tr_members: tuple[int, ...]
    tr_cols: list[int]
    tr_index: NDArray[np.intp]
    tr_widths: tuple[int, ...]

    @classmethod
    def of(cls, written: list[tuple[int, ...]], moved: list[tuple[int, ...]]) -> Layout:
        rot_m = tuple(m for m, w in enumerate(written) if w)
        tr_m = tuple(m for m, w in enumerate(moved) if w)
        rot_cols = [j for m in rot_m for j in written[m]]
        tr_cols = [j for m in tr_m for j in moved[m]]
        return cls(
            rot_m, rot_cols, np.array(rot_cols, dtype=np.intp), tuple(len(written[m]) for m in rot_m),
            tr_m, tr_cols, np.array(tr_cols, dtype=np.intp), tuple(len(moved[m]) for m in tr_m),
        )


def apply_group(
    lay: Layout, weights: list[float], outputs: list[Candidate], pose: PoseBuffers, cov: FloatArray
) -> list[ControlReport]:
    """Blend the candidates of one group into the pose by their weights; returns the
    reports with frames whose candidate was not finite marked skipped.

    Members of a group are independent (none writes what another reads), so their blends
    go in together: the same as running them one after the other."""
    frames = pose.frames
    if frames == 1 and _apply_one(lay, weights, outputs, pose, cov):
        return [o.report for o in outputs]
    moves = [outputs[m].translations for m in lay.tr_members]
    rot_cand = _joined([outputs[m].rotations for m in lay.rot_members])
    tr_cand = _joined([t for t in moves if t is not None])
    if len(moves) != sum(t is not None for t in moves):
        raise RigError("a control that moves joints gave no translations")
    # The usual frame: every candidate finite and no control skipped it. One reduction per
    # array for the whole group (a live frame pays per numpy call), the per-frame masks
    # only when that fails.
    skipped = _joined([o.report.skipped for o in outputs], axis=0)
    usable = (
        not skipped.any()
        and (rot_cand is None or bool(np.isfinite(rot_cand).all()))
        and (tr_cand is None or bool(np.isfinite(tr_cand).all()))
    )
    # None marks "every frame usable", so the report stands as is.
    oks: list[BoolArray | None] = [None] * len(outputs)
    if not usable:
        for m, out in enumerate(outputs):
            ok = ~out.report.skipped & np.isfinite(out.rotations).all(axis=(1, 2))
            if out.translations is not None:
                ok &= np.isfinite(out.translations).all(axis=(1, 2))
            oks[m] = None if ok.all() else ok
    partial = any(o is not None for o in oks)
    if rot_cand is not None:
        w = [weights[m] for m, width in zip(lay.rot_members, lay.rot_widths, strict=True) for _ in range(width)]
        masks = _column_masks([(oks[m], k) for m, k in zip(lay.rot_members, lay.rot_widths, strict=True)], frames) if partial else None
        _blend(pose.rotations, cov, lay.rot_cols, lay.rot_index, rot_cand, w, masks, pose.set_rotations, rotation=True)
    if tr_cand is not None:
        w = [weights[m] for m, width in zip(lay.tr_members, lay.tr_widths, strict=True) for _ in range(width)]
        masks = _column_masks([(oks[m], k) for m, k in zip(lay.tr_members, lay.tr_widths, strict=True)], frames) if partial else None
        _blend(pose.translations, cov, lay.tr_cols, lay.tr_index, tr_cand, w, masks, pose.set_translations, rotation=False)
    if not partial:
        return [o.report for o in outputs]
    result: list[ControlReport] = []
    for out, ok_or_none in zip(outputs, oks, strict=True):
        report = out.report
        if ok_or_none is not None:
            report = ControlReport(
                name=report.name,
                ran=ok_or_none & report.ran,
                skipped=~ok_or_none,
                residual=report.residual,
                iterations=report.iterations,
                converged=report.converged & ok_or_none,
                limited=report.limited & ok_or_none,
                details=report.details,
            )
        result.append(report)
    return result


def _joined(arrays: list[FloatArray] | list[BoolArray], axis: int = 1) -> Any:
    """The arrays side by side along ``axis`` (``None`` for none; one is used as it is)."""
    if not arrays:
        return None
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=axis)


def _blend(
    values: FloatArray,
    cov: FloatArray,
    cols: list[int],
    index: NDArray[np.intp],
    cand: FloatArray,
    weights: list[float],
    masks: BoolArray | None,
    write: Callable[..., None],
    rotation: bool,
) -> None:
    """Blend candidates ``(T, C, w)`` of columns ``cols`` (``index`` the same as an array) into
    ``values`` (through ``write``) by their weights, where they differ from the current values
    (and ``masks`` allows), and raise those columns' coverage to the weights.

    The usual live frame changes every column at full weight: it writes the candidates as they
    are, which is what the masked blend gives then, in a third of the numpy calls."""
    old = values[:, index]
    changed = (cand != old).any(axis=-1)
    if masks is not None:
        changed &= masks
    full = min(weights) >= 1.0
    if changed.all():
        w = np.array(weights)
        write(cols, cand if full else _weighted(old, cand, w, rotation), index=index)
        cov[:, index] = np.maximum(cov[:, index], w)
        return
    if not changed.any():
        return
    w = np.array(weights)
    blended = cand if full else _weighted(old, cand, w, rotation)
    write(cols, np.where(changed[..., None], blended, old), index=index)
    before = cov[:, index]
    cov[:, index] = np.where(changed, np.maximum(before, w), before)


def _apply_one(lay: Layout, weights: list[float], outputs: list[Candidate], pose: PoseBuffers, cov: FloatArray) -> bool:
    """:func:`apply_group` of one frame where every candidate is usable at full
    weight (the usual live frame), in plain floats: the same values written and the same
    coverage; ``False`` (nothing done) for the other cases, which take the general route."""
    if min(weights) < 1.0 or any(bool(o.report.skipped[0]) for o in outputs):
        return False
    moves = [outputs[m].translations for m in lay.tr_members]
    rot_rows: list[list[float]] = [r for m in lay.rot_members for r in outputs[m].rotations[0].tolist()]
    tr_rows: list[list[float]] = []
    for t in moves:
        if t is None:
            return False
        tr_rows.extend(t[0].tolist())
    if not all(math.isfinite(v) for rows in (rot_rows, tr_rows) for row in rows for v in row):
        return False
    if rot_rows:
        _blend_one(pose.rotations, cov, lay.rot_cols, lay.rot_index, rot_rows, [weights[m] for m, width in zip(lay.rot_members, lay.rot_widths, strict=True) for _ in range(width)], pose.set_rotations)
    if tr_rows:
        _blend_one(pose.translations, cov, lay.tr_cols, lay.tr_index, tr_rows, [weights[m] for m, width in zip(lay.tr_members, lay.tr_widths, strict=True) for _ in range(width)], pose.set_translations)
    return True


def _blend_one(
    values: FloatArray,
    cov: FloatArray,
    cols: list[int],
    index: NDArray[np.intp],
    rows: list[list[float]],
    weights: list[float],
    write: Callable[..., None],
) -> None:
    """:func:`_blend` of one frame at full weight: candidates written where they differ from
    the current values, coverage raised to the weights there."""
    old: list[list[float]] = values[0, index].tolist()
    changed = [a != b for a, b in zip(rows, old, strict=True)]
    if not any(changed):
        return
    if not all(changed):
        rows = [a if c else b for a, b, c in zip(rows, old, changed, strict=True)]
    write(cols, np.array([rows]), index=index)
    before: list[float] = cov[0, index].tolist()
    cov[0, index] = [max(b, w) if c else b for b, w, c in zip(before, weights, changed, strict=True)]


def _weighted(old: FloatArray, cand: FloatArray, w: FloatArray, rotation: bool) -> FloatArray:
    """Each column moved from ``old`` toward ``cand`` by its weight ``w`` ``(C,)``: slerp for
    rotations, linear for translations; weight 1 gives the candidate itself."""
    if rotation:
        out: FloatArray = np.where((w >= 1.0)[:, None], cand, quat_slerp(old, cand, w))
    else:
        out = np.where((w >= 1.0)[:, None], cand, old + w[:, None] * (cand - old))
    return out


def _column_masks(masks: list[tuple[BoolArray | None, int]], frames: int) -> BoolArray:
    """Per-frame masks of consecutive column runs ``(mask (T,) or None = all frames, width)``
    laid out ``(T, C)``."""
    full = np.ones(frames, dtype=bool)
    return np.concatenate(
        [np.broadcast_to((full if m is None else m)[:, None], (frames, w)) for m, w in masks], axis=1
    )

"""The clip container: per-frame local transforms of named joints.

A clip holds, for ``T`` frames and ``B`` joints, local rotations ``(T, B, 4)`` (w-first unit
quaternions), local translations ``(T, B, 3)``, optional scales ``(T, B, 3)``, the frame times in
seconds ``(T,)`` and the clip's own frame rate. Local means the joint's attachment frame of
:mod:`core.rig.skeleton` (for a Blender bone, ``pose_bone.matrix_basis``).

``coverage`` ``(B,)`` in ``[0, 1]`` says how much of each joint the clip drives: an unmapped joint
has coverage 0 and its keys mean nothing, so writers skip it and later layers may drive it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ClipError
from .rotations import FloatArray, make_quat_continuous, quat_normalize, quat_slerp


@dataclass(frozen=True)
class Clip:
    names: tuple[str, ...]
    times: FloatArray
    fps: float
    rotations: FloatArray
    translations: FloatArray
    scales: FloatArray | None = None
    coverage: FloatArray | None = None
    name: str = "Clip"
    #: Frame number (in the clip's own rate) of ``times[0]``, so a writer can keep frame numbers.
    first_frame: float = 1.0

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        object.__setattr__(self, "names", names)
        b = len(names)
        times = np.asarray(self.times, dtype=np.float64).reshape(-1)
        t = times.shape[0]
        rot = np.asarray(self.rotations, dtype=np.float64)
        tr = np.asarray(self.translations, dtype=np.float64)
        if rot.shape != (t, b, 4):
            raise ClipError(f"clip {self.name!r}: rotations must have shape ({t}, {b}, 4), got {rot.shape}")
        if tr.shape != (t, b, 3):
            raise ClipError(f"clip {self.name!r}: translations must have shape ({t}, {b}, 3), got {tr.shape}")
        sc = None
        if self.scales is not None:
            sc = np.asarray(self.scales, dtype=np.float64)
            if sc.shape != (t, b, 3):
                raise ClipError(f"clip {self.name!r}: scales must have shape ({t}, {b}, 3), got {sc.shape}")
        cov = np.ones(b) if self.coverage is None else np.asarray(self.coverage, dtype=np.float64).reshape(-1)
        if cov.shape != (b,):
            raise ClipError(f"clip {self.name!r}: coverage must have shape ({b},), got {cov.shape}")
        fps = float(self.fps)
        if not np.isfinite(fps) or fps <= 0.0:
            raise ClipError(f"clip {self.name!r}: frame rate must be positive, got {self.fps}")
        if t > 1 and not np.all(np.diff(times) > 0.0):
            raise ClipError(f"clip {self.name!r}: frame times must increase")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "rotations", rot)
        object.__setattr__(self, "translations", tr)
        object.__setattr__(self, "scales", sc)
        object.__setattr__(self, "coverage", cov)
        object.__setattr__(self, "fps", fps)

    @property
    def frame_count(self) -> int:
        return int(self.times.shape[0])

    @property
    def duration(self) -> float:
        return float(self.times[-1] - self.times[0]) if self.frame_count else 0.0

    @classmethod
    def from_frames(
        cls,
        names: Sequence[str],
        rotations: ArrayLike,
        translations: ArrayLike,
        fps: float,
        first_frame: float = 1.0,
        frames: ArrayLike | None = None,
        **kwargs: object,
    ) -> Clip:
        """Build a clip from samples at frame numbers (default: consecutive from ``first_frame``)."""
        rot = np.asarray(rotations, dtype=np.float64)
        f = np.arange(rot.shape[0], dtype=np.float64) + first_frame if frames is None else np.asarray(frames, dtype=np.float64)
        return cls(
            names=tuple(names),
            times=(f - f[0]) / fps if f.size else f,
            fps=fps,
            rotations=rot,
            translations=translations,  # type: ignore[arg-type]
            first_frame=float(f[0]) if f.size else first_frame,
            **kwargs,  # type: ignore[arg-type]
        )

    def frame_numbers(self, fps: float | None = None, keep_frames: bool = True) -> FloatArray:
        """Frame numbers at rate ``fps`` (default: the clip's own) for each sample."""
        rate = self.fps if fps is None else float(fps)
        # Frame 1 is where time starts (Blender's and the importers' convention), so a clip that
        # starts on frame 1 starts on frame 1 at any rate.
        start = self._frame_at_rate(rate) if keep_frames else 1.0
        return start + (self.times - self.times[0]) * rate if self.frame_count else self.times.copy()

    def _frame_at_rate(self, rate: float) -> float:
        return 1.0 + (self.first_frame - 1.0) * rate / self.fps

    def validate(self) -> Clip:
        """Refuse clips no one can use: no frames or non-finite keys (naming bone and frame)."""
        if self.frame_count == 0:
            raise ClipError(f"clip {self.name!r} has no frames")
        for what, arr in (("rotation", self.rotations), ("translation", self.translations), ("scale", self.scales)):
            if arr is None or np.isfinite(arr).all():  # the usual case, checked cheaply
                continue
            bad = ~np.isfinite(arr).all(axis=-1)
            if bad.any():
                f, b = (int(v) for v in np.argwhere(bad)[0])
                raise ClipError(
                    f"clip {self.name!r} has a non-finite {what} key on bone {self.names[b]!r} "
                    f"at frame {self.frame_numbers()[f]:g} ({int(bad.sum())} such keys in all)"
                )
        norms = np.sqrt(np.einsum("...i,...i->...", self.rotations, self.rotations))  # faster than linalg.norm
        if np.any(norms < 1e-9):
            f, b = (int(v) for v in np.argwhere(norms < 1e-9)[0])
            raise ClipError(f"clip {self.name!r} has a zero rotation quaternion on bone {self.names[b]!r}")
        return self

    def normalized(self) -> Clip:
        """Unit quaternions, continuous over time (no hemisphere flips between frames)."""
        return replace(self, rotations=make_quat_continuous(quat_normalize(self.rotations), axis=0))

    def subset(self, names: Sequence[str]) -> Clip:
        idx = [self.names.index(n) for n in names]
        return replace(
            self,
            names=tuple(names),
            rotations=self.rotations[:, idx],
            translations=self.translations[:, idx],
            scales=None if self.scales is None else self.scales[:, idx],
            coverage=None if self.coverage is None else self.coverage[idx],
        )

    def take(self, frames: ArrayLike) -> Clip:
        """The clip at the given frame indices (increasing), timing kept."""
        idx = np.asarray(frames, dtype=np.int64)
        return replace(
            self,
            times=self.times[idx],
            rotations=self.rotations[idx],
            translations=self.translations[idx],
            scales=None if self.scales is None else self.scales[idx],
            first_frame=float(self.frame_numbers()[idx[0]]) if idx.size else self.first_frame,
        )

    def resample(self, fps: float) -> Clip:
        """Resample to ``fps`` over the same duration (slerp rotations, lerp the rest).

        This is how a 120 fps clip keeps its timing on a 24 fps scene: it gets a fifth of the
        frames, not five times the duration. The new samples fall on whole frames of the new rate:
        a clip that starts between them (an FBX keyed from 1/30 s, read at 24 fps, starts on frame
        1.8) is sampled from the next whole frame on, so every key lands on a frame Blender plays.
        """
        fps = float(fps)
        if fps <= 0.0 or not np.isfinite(fps):
            raise ClipError(f"cannot resample clip {self.name!r} to {fps} fps")
        if abs(fps - self.fps) < 1e-9 or self.frame_count < 2:
            return replace(self, fps=fps, first_frame=self._frame_at_rate(fps))
        start = self._frame_at_rate(fps)
        first = float(np.ceil(start - 1e-6))
        lead = (first - start) / fps
        if lead * fps < 1e-6 or float(self.times[-1] - self.times[0]) < lead:
            first, lead = start, 0.0
        new_t, i0, u = resample_grid(self.times, fps, lead)
        rot, tr, sc = interpolate_frames(make_quat_continuous(self.rotations, axis=0), self.translations, self.scales, i0, u)
        return replace(
            self,
            times=new_t,
            fps=fps,
            rotations=make_quat_continuous(rot, axis=0),
            translations=tr,
            scales=sc,
            first_frame=first,
        )


def resample_grid(times: FloatArray, fps: float, lead: float = 0.0) -> tuple[FloatArray, NDArray[np.int64], FloatArray]:
    """Where :meth:`Clip.resample` samples frames at ``times`` (at least two): the new times at
    ``fps`` over the same duration, from ``lead`` seconds after the first, and for each the frame
    ``i0`` before it and the share ``u`` of the way to the next one."""
    n = int(np.floor((float(times[-1] - times[0]) - lead) * fps + 1e-6)) + 1
    new_t = times[0] + lead + np.arange(n) / fps
    pos = np.interp(new_t, times, np.arange(times.shape[0], dtype=np.float64))
    i0 = np.clip(np.floor(pos).astype(np.int64), 0, times.shape[0] - 2)
    return new_t, i0, pos - i0


def interpolate_frames(
    rotations: FloatArray, translations: FloatArray, scales: FloatArray | None, i0: NDArray[np.int64], u: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    """Frames between rows ``i0`` and ``i0 + 1`` at shares ``u``: rotations (continuous over
    time) slerped, the rest lerped. Every output frame depends on its two rows alone, so a long
    clip can be resampled a piece at a time (a piece's rotations negated, as continuity from
    another first frame makes them, come out exactly negated)."""
    n, b = u.shape[0], rotations.shape[1]
    rot = quat_slerp(rotations[i0], rotations[i0 + 1], np.broadcast_to(u[:, None], (n, b)))

    def lerp(a: FloatArray) -> FloatArray:
        return a[i0] * (1.0 - u)[:, None, None] + a[i0 + 1] * u[:, None, None]

    return rot, lerp(translations), None if scales is None else lerp(scales)

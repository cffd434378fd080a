"""VMD motion files (MikuMikuDance, "Vocaloid Motion Data") read without Blender, and their bone
keys sampled at any frame.

What is kept, and in which convention:

* Everything is kept *as the file says it*: MMD space (left-handed, +Y up, lengths in MMD
  units), rotations as the file's quaternions ``(x, y, z, w)``, frames at MMD's 30 per second,
  float32 values widened to float64. Each bone key is local to the bone's rest in the model it
  was made for (a position offset and a rotation); turning that into a rig's poses happens
  where the model is known.
* **Bone keys**, one :class:`VmdTrack` per bone name, in frame order (two keys of one bone on one
  frame: the later in the file wins, as MMD does): the position and rotation, each channel's
  interpolation curve and the key's physics flag.
* **Interpolation**: each key carries four cubic Bézier curves, for X, Y and Z of the position
  and for the rotation, from ``(0, 0)`` to ``(1, 1)`` through two control points stored as
  0-127. A key's curves shape the span *from the previous key to it*. The 64 interpolation
  bytes hold four rows of 16, row ``c`` starting with channel ``c``'s ``x1``; a channel's
  ``(x1, y1, x2, y2)`` are its row's bytes 0, 4, 8 and 12. MMD writes the rest of the rows
  shifted copies, and uses bytes 2 and 3 of the first row as the physics flag: ``99, 15`` there
  marks a key whose bone is *not* simulated (physics off) from that key on.
* **Property keys** (visibility and each IK's on/off per frame) are kept; **morph** keys are kept
  by name (frames and weights); **camera, light and self-shadow** keys are counted and kept
  aside, not applied.
* Names are Shift-JIS (code page 932), cut at the first NUL (what follows is padding).

Refusals raise :class:`~core.errors.FileFormatError` naming the file, the section and the byte
offset; every count is checked against the bytes left before anything is read. A file may end
after the morph or the self-shadow section (older writers stop there).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..errors import FileFormatError
from ..rig.rotations import FloatArray
from .file_bytes import read_bytes

#: The signatures of the two versions (the old one has 10-byte model names).
SIGNATURE = b"Vocaloid Motion Data 0002"
OLD_SIGNATURE = b"Vocaloid Motion Data file"
#: MMD's frame rate.
FPS = 30.0
#: Bytes 2 and 3 of a bone key's interpolation block when the key turns physics off.
PHYSICS_OFF = (99, 15)

_BONE = np.dtype([("name", "S15"), ("frame", "<u4"), ("position", "<f4", (3,)), ("rotation", "<f4", (4,)), ("curves", "u1", (64,))])
_MORPH = np.dtype([("name", "S15"), ("frame", "<u4"), ("weight", "<f4")])
#: Fixed record sizes of the sections only counted.
_CAMERA, _LIGHT, _SHADOW = 61, 28, 9
#: Per channel (X, Y, Z, rotation): the bytes of x1, y1, x2, y2 in a key's 64-byte block.
_CURVE_BYTES = np.array([[16 * c + k for k in (0, 4, 8, 12)] for c in range(4)])
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class VmdTrack:
    """One bone's keys, in frame order."""

    name: str
    frames: NDArray[np.int64]  # (K,)
    positions: FloatArray  # (K, 3) offsets from the bone's rest, MMD space
    rotations: FloatArray  # (K, 4) quaternions (x, y, z, w), local to the bone's rest
    #: (K, 4, 4): per key, per channel (X, Y, Z, rotation), the curve's (x1, y1, x2, y2) in 0..1.
    curves: FloatArray
    physics: NDArray[np.bool_]  # (K,) False where the key turns the bone's physics off

    def sample(self, frames: NDArray[np.float64] | list[float]) -> tuple[FloatArray, FloatArray]:
        """Positions ``(F, 3)`` and unit rotations ``(F, 4)`` (x, y, z, w) at ``frames``
        (fractions allowed), with the keys' curves; held before the first key and after the last."""
        f = np.asarray(frames, dtype=np.float64).reshape(-1)
        keys = self.frames.astype(np.float64)
        nxt = np.clip(np.searchsorted(keys, f, side="right"), 1, max(len(keys) - 1, 1))
        prev = nxt - 1
        if len(keys) == 1:
            return np.repeat(self.positions, f.size, axis=0), np.repeat(_unit(self.rotations), f.size, axis=0)
        span = keys[nxt] - keys[prev]
        t = np.clip((f - keys[prev]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
        w = bezier(self.curves[nxt], t[:, None])  # (F, 4)
        pos = self.positions[prev] + w[:, :3] * (self.positions[nxt] - self.positions[prev])
        return pos, slerp(self.rotations[prev], self.rotations[nxt], w[:, 3])


@dataclass(frozen=True)
class VmdProperty:
    """A property key: the model shown or hidden, and IKs switched on or off, from ``frame`` on."""

    frame: int
    visible: bool
    ik: dict[str, bool]


@dataclass(frozen=True)
class VmdMotion:
    """A VMD file's content (module docstring)."""

    path: str
    model_name: str
    tracks: dict[str, VmdTrack]
    morphs: dict[str, tuple[NDArray[np.int64], FloatArray]] = field(default_factory=dict)
    properties: tuple[VmdProperty, ...] = ()
    #: Keys read but not applied: camera, light and self-shadow.
    set_aside: dict[str, int] = field(default_factory=dict)

    @property
    def frame_range(self) -> tuple[int, int]:
        """The first and last bone key frames (``(0, 0)`` without bone keys)."""
        if not self.tracks:
            return 0, 0
        return min(int(t.frames[0]) for t in self.tracks.values()), max(int(t.frames[-1]) for t in self.tracks.values())

    def ik_enabled(self, ik: str, frame: float) -> bool:
        """Whether IK ``ik`` is on at ``frame``: the last property key at or before it that names
        it says (on when none does, as in MMD)."""
        state = True
        for prop in self.properties:
            if prop.frame > frame:
                break
            state = prop.ik.get(ik, state)
        return state


def bezier(curves: FloatArray, t: FloatArray, steps: int = 32) -> FloatArray:
    """MMD's interpolation: for curves ``(..., 4)`` of ``(x1, y1, x2, y2)`` in 0..1 from ``(0, 0)``
    to ``(1, 1)``, the curve's ``y`` where its ``x`` is ``t`` (broadcast). ``x`` rises with the
    curve's parameter (control points inside the unit square), so the parameter is found by
    bisection, ``steps`` halvings (2^-32: exact in float32 terms)."""
    x1, y1, x2, y2 = (curves[..., k] for k in range(4))
    t = np.broadcast_to(np.asarray(t, dtype=np.float64), np.broadcast_shapes(np.shape(t), x1.shape))
    lo, hi = np.zeros_like(t), np.ones_like(t)
    for _ in range(steps):
        s = 0.5 * (lo + hi)
        below = _cubic(x1, x2, s) < t
        lo, hi = np.where(below, s, lo), np.where(below, hi, s)
    return _cubic(y1, y2, 0.5 * (lo + hi))


def _cubic(p1: FloatArray, p2: FloatArray, s: FloatArray) -> FloatArray:
    u = 1.0 - s
    return 3.0 * u * u * s * p1 + 3.0 * u * s * s * p2 + s * s * s


def _unit(q: FloatArray) -> FloatArray:
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(n > 0, q / np.where(n > 0, n, 1.0), np.array([0.0, 0.0, 0.0, 1.0]))


def slerp(a: FloatArray, b: FloatArray, w: FloatArray) -> FloatArray:
    """Spherical interpolation of unit quaternions ``(..., 4)`` by weights ``w`` (the shorter way)."""
    a, b = _unit(a), _unit(b)
    d = np.einsum("...i,...i->...", a, b)
    b = np.where(d[..., None] < 0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    sin = np.sin(theta)
    near = sin < 1e-8
    wa = np.where(near, 1.0 - w, np.sin((1.0 - w) * theta) / np.where(near, 1.0, sin))
    wb = np.where(near, w, np.sin(w * theta) / np.where(near, 1.0, sin))
    return _unit(wa[..., None] * a + wb[..., None] * b)


def read_vmd(path: str | os.PathLike[str]) -> VmdMotion:
    """Read a VMD file. Raises :class:`FileFormatError` naming the file, section and offset."""
    return parse_vmd(read_bytes(path), os.fspath(path))


def _name(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("cp932", errors="replace")


class _Cursor:
    """The bytes, a position and the section being read: every read checks the bytes left."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.path, self.pos, self.section = data, path, 0, "header"

    def fail(self, what: str, at: int | None = None) -> FileFormatError:
        return FileFormatError(f"{self.path}: VMD {self.section} section, byte {self.pos if at is None else at}: {what}")

    def left(self) -> int:
        return len(self.data) - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise self.fail(f"the file ends inside {what} ({n} bytes needed, {self.left()} left): truncated or not a VMD file")

    def count(self, size: int, what: str) -> int:
        """A record count, checked against the bytes left for records of at least ``size`` bytes."""
        at = self.pos
        self.need(4, f"the number of {what}")
        n = int(_U32.unpack_from(self.data, self.pos)[0])
        self.pos += 4
        if n * size > self.left():
            raise self.fail(f"{n} {what} need at least {n * size} bytes, {self.left()} left: truncated or corrupt", at)
        return n

    def records(self, dtype: np.dtype[np.void], n: int) -> NDArray[np.void]:
        out = np.frombuffer(self.data, dtype=dtype, count=n, offset=self.pos)
        self.pos += n * dtype.itemsize
        return out

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def parse_vmd(data: bytes, path: str = "<vmd>") -> VmdMotion:
    """Parse the bytes of a VMD file; ``path`` is only used in messages."""
    c = _Cursor(bytes(data), path)
    signature = c.take(30, "the signature")
    if signature.startswith(SIGNATURE):
        model = _name(c.take(20, "the model name"))
    elif signature.startswith(OLD_SIGNATURE):
        model = _name(c.take(10, "the model name"))
    else:
        raise c.fail(f"not a VMD file (it starts with {signature[:25]!r}, not {SIGNATURE.decode()!r})", 0)

    c.section = "bone keys"
    bones = c.records(_BONE, c.count(_BONE.itemsize, "bone keys"))
    tracks = _tracks(bones, c)

    c.section = "morph keys"
    morphs: dict[str, tuple[NDArray[np.int64], FloatArray]] = {}
    rows = c.records(_MORPH, c.count(_MORPH.itemsize, "morph keys"))
    names = np.array([_name(n) for n in rows["name"].tolist()], dtype=object)
    for name in dict.fromkeys(names.tolist()):
        sel = rows[names == name]
        order = np.argsort(sel["frame"], kind="stable")
        morphs[name] = (sel["frame"][order].astype(np.int64), sel["weight"][order].astype(np.float64))

    set_aside: dict[str, int] = {}
    for section, size in (("camera keys", _CAMERA), ("light keys", _LIGHT), ("self-shadow keys", _SHADOW)) if c.left() else ():
        c.section = section  # the three come together
        n = c.count(size, section)
        c.pos += n * size
        set_aside[section.split()[0]] = n

    c.section = "property keys"
    properties: list[VmdProperty] = []
    if c.left():
        for _ in range(c.count(9, "property keys")):
            at = c.pos
            frame, visible = struct.unpack("<IB", c.take(5, "a property key"))
            iks = c.count(21, "IK states")
            states = {_name(c.take(20, "an IK name")): c.take(1, "an IK state")[0] != 0 for _ in range(iks)}
            if len(states) != iks:
                raise c.fail(f"a property key names one IK twice ({iks} states, {len(states)} IKs)", at)
            properties.append(VmdProperty(int(frame), bool(visible), states))
        properties.sort(key=lambda p: p.frame)
    return VmdMotion(path, model, tracks, morphs, tuple(properties), set_aside)


def _tracks(bones: NDArray[np.void], c: _Cursor) -> dict[str, VmdTrack]:
    """One track per bone name, in order of first appearance, keys in frame order (on a frame
    keyed twice, the later record)."""
    if not np.all(np.isfinite(bones["position"])) or not np.all(np.isfinite(bones["rotation"])):
        bad = int(np.flatnonzero(~(np.isfinite(bones["position"]).all(1) & np.isfinite(bones["rotation"]).all(1)))[0])
        raise c.fail(f"bone key {bad} ({_name(bones['name'][bad])!r}) holds a value that is not a number")
    tracks: dict[str, VmdTrack] = {}
    names = np.array([_name(n) for n in bones["name"].tolist()], dtype=object)  # padding after the NUL differs
    for name in dict.fromkeys(names.tolist()):
        rows = bones[names == name]
        frames = rows["frame"].astype(np.int64)
        # The last record of each frame, in frame order.
        order = np.lexsort((np.arange(len(rows)), frames))
        last = np.append(frames[order][1:] != frames[order][:-1], True)
        rows = rows[order[last]]
        curves = rows["curves"][:, _CURVE_BYTES].astype(np.float64) / 127.0
        physics = ~((rows["curves"][:, 2] == PHYSICS_OFF[0]) & (rows["curves"][:, 3] == PHYSICS_OFF[1]))
        tracks[name] = VmdTrack(
            name,
            rows["frame"].astype(np.int64),
            rows["position"].astype(np.float64),
            rows["rotation"].astype(np.float64),
            curves,
            physics,
        )
    return tracks

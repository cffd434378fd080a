"""BVH motion-capture files read into numpy, without Blender.

What a BVH file says, and how it is kept here:

* Joints are listed depth-first, parents before children; that order is kept (``names``,
  ``parents`` with ``-1`` for a root; several roots are allowed). A name written with spaces is
  joined with underscores and a repeated name gets a ``.001``-style suffix, as Blender's importer
  does, so joint names match the bones Blender would create.
* ``OFFSET`` is the joint's head relative to its parent's head, in file units. An ``End Site``
  offset is kept per joint in ``end_sites`` (NaN rows for joints without one).
* ``CHANNELS`` are kept per joint as written (normalised to ``Xposition`` ... ``Zrotation``);
  ``channel_starts[j]`` is the first MOTION column of joint ``j``.
* Rotation channels are in degrees and are applied in the order listed, the first one outermost:
  ``Zrotation Xrotation Yrotation`` means ``R = Rz @ Rx @ Ry`` on column vectors. In Blender's
  naming (first letter applied first) that is the Euler order ``"YXZ"``: the file order reversed.
* Position channels *replace* the offset on the axes they carry and the other axes keep the
  offset (the reading of Blender's importer and of most tools for full position triples).
* ``motion`` is ``(frames, channels)`` float64 exactly as in the file (degrees, file units); the
  methods convert. Quaternions follow :mod:`core.rig.rotations`: w-first Hamilton, column vectors.

Frame ``k`` (0-based row) is the file's frame ``k + 1`` at ``fps = 1 / frame_time``.

Every problem raises :class:`~core.errors.FileFormatError` naming the file and the line.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..errors import FileFormatError
from ..rig.clip import Clip, interpolate_frames, resample_grid
from ..rig.rotations import FloatArray, make_quat_continuous, quat_from_euler
from ..rig.skeleton import Skeleton

IntArray = NDArray[np.int64]

#: Frame times accepted (seconds): 100,000 frames per second to one frame every 10 s. Beyond them a
#: clip resampled to a scene's rate has no frames or countless ones.
MIN_FRAME_TIME, MAX_FRAME_TIME = 1e-5, 10.0

CHANNEL_NAMES = ("Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation", "Zrotation")
_CHANNEL_LOOKUP = {c.lower(): c for c in CHANNEL_NAMES}
#: File frames :meth:`BvhData.clip_at_rate` converts at once (a 28-minute take at 120 fps is 200,000).
CHUNK_FRAMES = 20_000


@dataclass(frozen=True, eq=False)
class BvhData:
    """The complete content of one BVH file (see the module docstring for conventions)."""

    path: str
    names: tuple[str, ...]
    parents: IntArray
    offsets: FloatArray
    end_sites: FloatArray
    channels: tuple[tuple[str, ...], ...]
    channel_starts: IntArray
    frame_time: float
    motion: FloatArray
    declared_frames: int
    #: 1-based line number of each joint's ROOT/JOINT line, for messages.
    lines: IntArray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=np.int64))

    # --- sizes -------------------------------------------------------------------------------

    @property
    def fps(self) -> float:
        """``1 / frame_time``, snapped to a whole (or NTSC ``n * 1000/1001``) rate within 0.01%:
        frame times are written with 5 to 7 digits (``.0083333`` is 120 fps, not 120.0005)."""
        raw = 1.0 / self.frame_time
        for nice in (round(raw), round(raw * 1.001) / 1.001):
            if nice > 0 and abs(raw - nice) <= 1e-4 * nice:
                return float(nice)
        return raw

    @property
    def frame_count(self) -> int:
        return int(self.motion.shape[0])

    @property
    def channel_count(self) -> int:
        return int(self.motion.shape[1])

    @property
    def joint_count(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return (
            f"BvhData({os.path.basename(self.path)!r}: {self.joint_count} joints, "
            f"{self.frame_count} frames at {self.fps:g} fps, {self.channel_count} channels)"
        )

    # --- channel layout ----------------------------------------------------------------------

    def channel_index(self, joint: int, channel: str) -> int | None:
        """MOTION column of ``channel`` (e.g. ``"Zrotation"``) of ``joint``, or ``None``."""
        chans = self.channels[joint]
        if channel not in chans:
            return None
        return int(self.channel_starts[joint]) + chans.index(channel)

    def rotation_order(self, joint: int) -> str:
        """Blender Euler order of the joint's rotation (the file's channel order reversed).

        Axes the file does not rotate about are appended: their angle is always zero, so where
        they go does not change the rotation.
        """
        axes = [c[0] for c in self.channels[joint] if c.endswith("rotation")]
        axes += [a for a in "XYZ" if a not in axes]
        return "".join(axes[::-1])

    def has_position(self, joint: int) -> bool:
        return any(c.endswith("position") for c in self.channels[joint])

    def has_rotation(self, joint: int) -> bool:
        return any(c.endswith("rotation") for c in self.channels[joint])

    # --- values ------------------------------------------------------------------------------

    def euler_angles(self, rows: slice = slice(None)) -> FloatArray:
        """``(F, J, 3)`` rotation angles in radians, indexed by axis X, Y, Z (0 where absent), of
        the frames ``rows`` (default all)."""
        return np.radians(self._gather(3, rows))

    def local_rotations(self, rows: slice = slice(None)) -> FloatArray:
        """``(F, J, 4)`` quaternions of each joint relative to its parent (frames ``rows``)."""
        angles = self.euler_angles(rows)
        out = np.empty(angles.shape[:2] + (4,))
        orders = [self.rotation_order(j) for j in range(self.joint_count)]
        for order in sorted(set(orders)):
            sel = np.array([o == order for o in orders])
            out[:, sel] = quat_from_euler(angles[:, sel], order)
        return out

    def local_translations(self, rows: slice = slice(None)) -> FloatArray:
        """``(F, J, 3)`` joint heads relative to the parent's head: the offset, replaced by the
        position channels on the axes the joint has them (frames ``rows``)."""
        pos = self._gather(0, rows)
        has = self._channel_mask(0)
        return np.where(has[None], pos, self.offsets[None])

    def rest_positions(self) -> FloatArray:
        """``(J, 3)`` joint heads with every channel at zero rotation and offsets as written."""
        out = np.array(self.offsets, dtype=np.float64)
        for j, p in enumerate(self.parents):
            if p >= 0:
                out[j] += out[p]
        return out

    def skeleton(self, placement: FloatArray | None = None) -> Skeleton:
        """The joint layout as a core :class:`Skeleton`: ``C0`` is the translation by the joint's
        offset, ``C1`` identity, so a local transform is ``[R | translation - offset]``."""
        c0 = np.broadcast_to(np.eye(4), (self.joint_count, 4, 4)).copy()
        c0[:, :3, 3] = self.offsets
        return Skeleton(self.names, self.parents, c0, None, placement)

    def clip(self, name: str | None = None) -> Clip:
        """The motion as a core :class:`Clip` on :meth:`skeleton`, keeping the file's frame
        numbers (first frame 1) and rate."""
        if self.frame_count == 0:
            raise FileFormatError(f"{self.path}: the BVH file has no frames of motion")
        nm = name if name is not None else os.path.splitext(os.path.basename(self.path))[0]
        return Clip.from_frames(
            self.names,
            self.local_rotations(),
            self.local_translations() - self.offsets[None],
            fps=self.fps,
            first_frame=1.0,
            name=nm,
        )

    def clip_at_rate(self, fps: float | None = None, name: str | None = None, chunk_frames: int = CHUNK_FRAMES) -> Clip:
        """``clip(name).resample(fps)`` (``fps=None``: the file's rate), the same values to the
        last bit, converted ``chunk_frames`` file frames at a time: a long take never holds its
        angles, quaternions and offsets at the file's rate all at once, only the file's motion
        and the result."""
        if self.frame_count < 2 or fps is None or abs(float(fps) - self.fps) < 1e-9:
            return self._clip_by_rows(name, chunk_frames).resample(self.fps if fps is None else fps)
        fps = float(fps)
        if not np.isfinite(fps) or fps <= 0.0:
            return self.clip(name).resample(fps)  # refused there, with its message
        rate = self.fps
        new_t, i0, u = resample_grid(np.arange(self.frame_count, dtype=np.float64) / rate, fps)
        rot = np.empty((new_t.shape[0], self.joint_count, 4))
        tr = np.empty((new_t.shape[0], self.joint_count, 3))
        step = max(1, int(chunk_frames * fps / rate))
        for o0 in range(0, new_t.shape[0], step):
            o = slice(o0, min(o0 + step, new_t.shape[0]))
            lo, hi = int(i0[o][0]), int(i0[o][-1]) + 2
            # Continuity from this piece's first frame: its slerps come out negated or not, as a
            # whole; the pass over the result below makes the whole continuous again, as resample does.
            piece = make_quat_continuous(self.local_rotations(slice(lo, hi)), axis=0, copy=False)
            rot[o], tr[o], _ = interpolate_frames(
                piece, self.local_translations(slice(lo, hi)) - self.offsets[None], None, i0[o] - lo, u[o]
            )
        nm = name if name is not None else os.path.splitext(os.path.basename(self.path))[0]
        return Clip(
            names=self.names,
            times=new_t,
            fps=fps,
            rotations=make_quat_continuous(rot, axis=0, copy=False),
            translations=tr,
            name=nm,
            first_frame=1.0,
        )

    def _clip_by_rows(self, name: str | None, chunk_frames: int) -> Clip:
        """:meth:`clip`, converted ``chunk_frames`` frames at a time into the result."""
        if self.frame_count == 0:
            return self.clip(name)  # refused there, with its message
        rot = np.empty((self.frame_count, self.joint_count, 4))
        tr = np.empty((self.frame_count, self.joint_count, 3))
        for r0 in range(0, self.frame_count, max(1, chunk_frames)):
            rows = slice(r0, r0 + max(1, chunk_frames))
            rot[rows] = self.local_rotations(rows)
            tr[rows] = self.local_translations(rows) - self.offsets[None]
        nm = name if name is not None else os.path.splitext(os.path.basename(self.path))[0]
        return Clip.from_frames(self.names, rot, tr, fps=self.fps, first_frame=1.0, name=nm)

    # --- helpers -----------------------------------------------------------------------------

    def _channel_columns(self, base: int) -> IntArray:
        """``(J, 3)`` MOTION columns of the X/Y/Z position (base 0) or rotation (base 3)
        channels; ``-1`` where absent."""
        cols = np.full((self.joint_count, 3), -1, dtype=np.int64)
        for j, chans in enumerate(self.channels):
            for k, c in enumerate(chans):
                idx = CHANNEL_NAMES.index(c) - base
                if 0 <= idx < 3:
                    cols[j, idx] = int(self.channel_starts[j]) + k
        return cols

    def _channel_mask(self, base: int) -> NDArray[np.bool_]:
        return self._channel_columns(base) >= 0

    def _gather(self, base: int, rows: slice = slice(None)) -> FloatArray:
        cols = self._channel_columns(base)
        motion = self.motion[rows]
        out = np.zeros((motion.shape[0], self.joint_count, 3))
        has = cols >= 0
        out[:, has] = motion[:, cols[has]]
        return out


# --- reading ---------------------------------------------------------------------------------


def read_bvh(path: str | os.PathLike[str]) -> BvhData:
    """Read a BVH file completely. Raises :class:`FileFormatError` naming the file and line."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            # Handed over without a name kept here: parse_bvh lets go of the bytes once decoded
            # (a 28-minute take is 150 MB of text, held three ways at once otherwise).
            return parse_bvh(f.read(), path)
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read the file ({exc.strerror or exc})") from exc


def parse_bvh(content: bytes | str, path: str = "<bvh>") -> BvhData:
    """Parse BVH text (``bytes`` or ``str``); ``path`` is only used in messages."""
    if isinstance(content, bytes):
        if b"\x00" in content[:4096]:
            raise FileFormatError(f"{path}: not a BVH file (binary content)")
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            # Joint names in old files are often Latin-1; every byte decodes there.
            text = content.decode("latin-1")
    else:
        text = content
    content = ""  # the bytes are not needed past here, nor the text past the split
    lines = text.splitlines()
    del text
    parser = _HierarchyParser(lines, path)
    parser.parse()
    motion = _parse_motion(lines, parser.motion_line, parser.channel_total, parser.declared_frames, path)
    if not parser.names:
        raise FileFormatError(f"{path}: the HIERARCHY section has no joints")
    return BvhData(
        path=path,
        names=tuple(parser.names),
        parents=np.array(parser.parents, dtype=np.int64),
        offsets=np.array(parser.offsets, dtype=np.float64).reshape(-1, 3),
        end_sites=np.array(parser.end_sites, dtype=np.float64).reshape(-1, 3),
        channels=tuple(parser.channels),
        channel_starts=np.array(parser.channel_starts, dtype=np.int64),
        frame_time=parser.frame_time,
        motion=motion,
        declared_frames=parser.declared_frames,
        lines=np.array(parser.joint_lines, dtype=np.int64),
    )


class _HierarchyParser:
    """Recursive-descent reader of the HIERARCHY section and the MOTION header, token by token
    with line numbers (the section is small; only the MOTION block needs to be fast)."""

    def __init__(self, lines: list[str], path: str) -> None:
        self.lines = lines
        self.path = path
        self.tokens: list[tuple[str, int]] = []  # (token, 0-based line)
        self.pos = 0
        self.names: list[str] = []
        self.parents: list[int] = []
        self.offsets: list[list[float]] = []
        self.end_sites: list[list[float]] = []
        self.channels: list[tuple[str, ...]] = []
        self.channel_starts: list[int] = []
        self.joint_lines: list[int] = []
        self.channel_total = 0
        self.declared_frames = 0
        self.frame_time = 0.0
        self.motion_line = len(lines)
        self.ends_in_hierarchy = False
        self._seen: set[str] = set()

    def fail(self, line: int, what: str) -> FileFormatError:
        if self.ends_in_hierarchy and self.tokens and line >= self.tokens[-1][1] and "truncated" not in what:
            # A broken last line of a file without MOTION is almost always a cut-off file.
            what += " (the file ends here: truncated)"
        return FileFormatError(f"{self.path}, line {line + 1}: {what}")

    def parse(self) -> None:
        # Tokenise up to the MOTION keyword only; the motion block is parsed separately.
        motion_at = None
        for i, ln in enumerate(self.lines):
            parts = ln.split()
            if parts and parts[0].upper() == "MOTION":
                motion_at = i
                break
            self.tokens.extend((p, i) for p in parts)
        if not self.tokens:
            raise FileFormatError(f"{self.path}: empty file, not a BVH file")
        self.ends_in_hierarchy = motion_at is None
        tok, line = self.tokens[0]
        if tok.upper() != "HIERARCHY":
            raise self.fail(line, f"not a BVH file (expected HIERARCHY, found {tok[:40]!r})")
        self.pos = 1
        while self.pos < len(self.tokens):
            tok, line = self.tokens[self.pos]
            if tok.upper() != "ROOT":
                raise self.fail(line, f"expected ROOT, found {tok[:40]!r}")
            self._joint(-1)
        if motion_at is None:
            last = self.tokens[-1][1] if self.tokens else 0
            raise self.fail(last, "the file ends inside the HIERARCHY section (no MOTION section): truncated")
        self._motion_header(motion_at)

    # Tokens -----------------------------------------------------------------------------------

    def _next(self, what: str) -> tuple[str, int]:
        if self.pos >= len(self.tokens):
            last = self.tokens[-1][1] if self.tokens else 0
            raise self.fail(last, f"the file ends where {what} was expected: truncated HIERARCHY")
        t = self.tokens[self.pos]
        self.pos += 1
        return t

    def _expect(self, word: str) -> int:
        tok, line = self._next(repr(word))
        if tok.upper() != word.upper():
            raise self.fail(line, f"expected {word!r}, found {tok[:40]!r}")
        return line

    def _number(self, what: str) -> float:
        tok, line = self._next(what)
        try:
            v = float(tok)
        except ValueError:
            raise self.fail(line, f"{what} must be a number, found {tok[:40]!r}") from None
        if not np.isfinite(v):
            raise self.fail(line, f"{what} is not finite ({tok})")
        return v

    def _offset(self) -> list[float]:
        self._expect("OFFSET")
        return [self._number("an OFFSET value") for _ in range(3)]

    # Structure --------------------------------------------------------------------------------

    def _joint(self, parent: int) -> None:
        _, line = self._next("ROOT or JOINT")
        # The name is the rest of the keyword's line (spaces joined like Blender's importer).
        parts: list[str] = []
        while self.pos < len(self.tokens) and self.tokens[self.pos][1] == line and self.tokens[self.pos][0] != "{":
            parts.append(self.tokens[self.pos][0])
            self.pos += 1
        if not parts:
            raise self.fail(line, "a joint has no name")
        name = "_".join(parts)
        if name in self._seen:
            base, k = name, 1
            while (name := f"{base}.{k:03d}") in self._seen:
                k += 1
        self._seen.add(name)
        self._expect("{")
        index = len(self.names)
        self.names.append(name)
        self.parents.append(parent)
        self.joint_lines.append(line + 1)
        self.end_sites.append([np.nan, np.nan, np.nan])
        self.offsets.append(self._offset())
        cline = self._expect("CHANNELS")
        count_f = self._number("the CHANNELS count")
        count = int(count_f)
        if count != count_f or count < 0 or count > 6:
            raise self.fail(cline, f"joint {name!r} declares {count_f:g} channels (0 to 6 allowed)")
        chans = []
        for _ in range(count):
            tok, ln = self._next("a channel name")
            c = _CHANNEL_LOOKUP.get(tok.lower())
            if c is None:
                raise self.fail(ln, f"joint {name!r}: unknown channel {tok[:40]!r}")
            if c in chans:
                raise self.fail(ln, f"joint {name!r}: channel {c} listed twice")
            chans.append(c)
        self.channels.append(tuple(chans))
        self.channel_starts.append(self.channel_total)
        self.channel_total += count
        while True:
            tok, ln = self._next("JOINT, End Site or '}'")
            up = tok.upper()
            if up == "}":
                return
            if up == "JOINT":
                self.pos -= 1
                self._joint(index)
            elif up == "END":
                self._expect("Site")
                # Some exporters name the end site; Blender ignores that too.
                while (
                    self.pos < len(self.tokens) and self.tokens[self.pos][1] == ln and self.tokens[self.pos][0] != "{"
                ):
                    self.pos += 1
                self._expect("{")
                self.end_sites[index] = self._offset()
                self._expect("}")
            else:
                raise self.fail(ln, f"expected JOINT, End Site or '}}' in joint {name!r}, found {tok[:40]!r}")

    def _motion_header(self, motion_at: int) -> None:
        i = motion_at + 1
        n = len(self.lines)

        def next_line(what: str) -> tuple[int, list[str]]:
            nonlocal i
            while i < n and not self.lines[i].split():
                i += 1
            if i >= n:
                raise self.fail(n - 1, f"the file ends before {what}: truncated MOTION header")
            out = (i, self.lines[i].split())
            i += 1
            return out

        ln, parts = next_line("the 'Frames:' line")
        if len(parts) != 2 or parts[0].lower() != "frames:":
            raise self.fail(ln, f"expected 'Frames: <count>', found {' '.join(parts)[:60]!r}")
        try:
            frames_f = float(parts[1])
        except ValueError:
            raise self.fail(ln, f"the frame count must be a whole number, found {parts[1][:40]!r}") from None
        if not np.isfinite(frames_f) or frames_f < 0 or frames_f != int(frames_f):
            raise self.fail(ln, f"the frame count must be a whole number, found {parts[1][:40]!r}")
        self.declared_frames = int(frames_f)
        ln, parts = next_line("the 'Frame Time:' line")
        if len(parts) != 3 or parts[0].lower() != "frame" or parts[1].lower() != "time:":
            raise self.fail(ln, f"expected 'Frame Time: <seconds>', found {' '.join(parts)[:60]!r}")
        try:
            ft = float(parts[2])
        except ValueError:
            raise self.fail(ln, f"the frame time must be a number, found {parts[2][:40]!r}") from None
        if not np.isfinite(ft) or ft <= 0.0:
            raise self.fail(ln, f"the frame time must be a positive number of seconds, found {parts[2][:40]!r}")
        if not MIN_FRAME_TIME <= ft <= MAX_FRAME_TIME:  # a clip played at a scene's rate would have no or countless frames
            raise self.fail(
                ln, f"the frame time must be between {MIN_FRAME_TIME:g} and {MAX_FRAME_TIME:g} seconds, found {parts[2][:40]!r}"
            )
        self.frame_time = ft
        self.motion_line = i


def _parse_motion(lines: list[str], start: int, channels: int, declared: int, path: str) -> FloatArray:
    """The MOTION rows as ``(frames, channels)``.

    The fast path is one C-level conversion of the whole block (``np.loadtxt`` over the lines;
    blank lines are skipped). Anything it does not accept, or a result of the wrong size, goes to
    a line-by-line diagnosis so the message names the offending line.
    """
    body = lines[start:]
    if channels == 0:
        for k, ln in enumerate(body):
            if ln.split():
                raise FileFormatError(
                    f"{path}, line {start + k + 1}: the hierarchy has no channels but the motion has values"
                )
        return np.zeros((declared, 0))
    if not any(ln.strip() for ln in body):
        values = np.zeros((0, channels))
    else:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = np.loadtxt(body, dtype=np.float64, ndmin=2, comments=None)
        except ValueError:
            _diagnose_motion(body, start, channels, declared, path)
            raise  # not reached: the diagnosis always raises
    if values.shape[1] != channels or not np.all(np.isfinite(values)):
        _diagnose_motion(body, start, channels, declared, path)
    if values.shape[0] < declared:
        _diagnose_motion(body, start, channels, declared, path)
    return values


def _diagnose_motion(body: list[str], start: int, channels: int, declared: int, path: str) -> None:
    """Find and report the first bad MOTION line (slow; only runs on a broken file)."""
    rows = [k for k, ln in enumerate(body) if ln.split()]
    for k in rows:
        toks = body[k].split()
        for tok in toks:
            try:
                v = float(tok)
            except ValueError:
                raise FileFormatError(f"{path}, line {start + k + 1}: {tok[:40]!r} is not a number") from None
            if not np.isfinite(v):
                raise FileFormatError(f"{path}, line {start + k + 1}: the value {tok} is not finite")
        if len(toks) != channels:
            what = "truncated: the last frame" if k == rows[-1] and len(toks) < channels else "a frame"
            raise FileFormatError(
                f"{path}, line {start + k + 1}: {what} has {len(toks)} values, the hierarchy needs {channels}"
            )
    if len(rows) < declared:
        end = start + (rows[-1] + 1 if rows else 0)
        raise FileFormatError(
            f"{path}, line {end}: truncated: the file declares {declared} frames but holds {len(rows)}"
        )
    raise FileFormatError(f"{path}: the MOTION section could not be read")


# --- orientation -----------------------------------------------------------------------------


def detect_up_axis(bvh: BvhData) -> str:
    """``"Y"`` or ``"Z"``: the file's up axis, from its own rest hierarchy.

    Humanoid BVH files are Y-up by convention, but some tools (MakeHuman, 3ds Max exports) write
    Z-up. X is lateral in both conventions and is not a candidate; of Y and Z, the body's long
    axis is up. Two cues are multiplied so that neither decides alone: the rest pose's extent
    along the axis (height against depth; an arms-out rest facing X could tie it with the arm
    span) and the summed bone-segment lengths along it (legs and spine run up, only the arms run
    across; helper joints with odd offsets can bring it close to a tie).
    """
    rest = bvh.rest_positions()
    has_end = np.all(np.isfinite(bvh.end_sites), axis=1)
    points = np.concatenate([rest, rest[has_end] + bvh.end_sites[has_end]], axis=0)
    extent = points.max(axis=0) - points.min(axis=0)
    segments = np.concatenate([bvh.offsets[bvh.parents >= 0], bvh.end_sites[has_end]], axis=0)
    along = np.abs(segments).sum(axis=0)
    score = extent * along
    return "Z" if score[2] > score[1] else "Y"

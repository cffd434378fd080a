"""PMX 2.0 / 2.1 model files (MikuMikuDance) read without Blender: the bones in full, the rest
walked over.

What is kept, and in which convention:

* Everything is kept *as the file says it*: MMD model space (left-handed, +Y up, the model
  facing -Z, lengths in MMD units), angles in radians, float32 values widened to float64.
  Converting into Blender's space and into Marionette's generic definitions happens in
  :mod:`core.formats.pmx_rig`, at build time.
* Bones keep the file's order and indices (``-1`` = none): parent, transform level, flags
  (:class:`BoneFlag`), tail (an offset from the head, or another bone), the append ("grant")
  source and ratio, fixed axis, local axes, external-parent key, and the IK block (target bone,
  loop count, per-iteration angle limit, links with optional Euler-angle limits).
* Rigid bodies (:class:`PmxRigidBody`: bone, collision group and mask, shape and size, place,
  mass, damping, restitution, friction, mode) and joints (:class:`PmxJoint`: the two bodies, place,
  translation and rotation limits, springs) are kept as the file says them, for physics.
* Vertices, faces, textures, materials, morphs, display frames and (2.1) soft bodies are not
  kept, but every record is walked with its real size, so a file whose sections do not add up is
  refused; their counts are kept in :attr:`PmxModel.counts`.

The binary layout: little-endian; a header with the text encoding (UTF-16LE or UTF-8) and the
byte size (1, 2 or 4) of each kind of index. Vertex indices of size 1 and 2 are unsigned, all
other indices signed, so ``-1`` (``0xFF`` in one byte) means "none".

Refusals raise :class:`~core.errors.FileFormatError` naming the file, the section and the byte
offset. Every count is checked against the bytes left before anything is read or allocated (a
record has a known smallest size), so an absurd count fails at once and no loop runs past the
end of the data.
"""

from __future__ import annotations

import enum
import math
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import FileFormatError
from ..rig.rotations import FloatArray
from .file_bytes import read_bytes

MAGIC = b"PMX "
#: The two versions of the format (2.1 adds soft bodies, QDEF weights, flip and impulse morphs).
VERSIONS = (2.0, 2.1)
ENCODINGS = ("utf-16-le", "utf-8")

#: Section names, in file order, as they appear in messages.
SECTIONS = (
    "header",
    "vertices",
    "faces",
    "textures",
    "materials",
    "bones",
    "morphs",
    "display frames",
    "rigid bodies",
    "joints",
    "soft bodies",
)


class BoneFlag(enum.IntFlag):
    """The 16-bit bone flags of PMX 2.0/2.1."""

    TAIL_IS_BONE = 0x0001
    ROTATABLE = 0x0002
    TRANSLATABLE = 0x0004
    VISIBLE = 0x0008
    ENABLED = 0x0010
    IK = 0x0020
    #: "Local" append: the source's own animated value rather than its total (see pmx_rig).
    LOCAL_APPEND = 0x0080
    APPEND_ROTATION = 0x0100
    APPEND_TRANSLATION = 0x0200
    FIXED_AXIS = 0x0400
    LOCAL_AXES = 0x0800
    AFTER_PHYSICS = 0x1000
    EXTERNAL_PARENT = 0x2000


@dataclass(frozen=True)
class PmxIKLink:
    """One link of an IK chain; ``limit_min``/``limit_max`` are per-axis Euler-angle bounds
    (X, Y, Z, radians, model space) or ``None`` when the link is free."""

    bone: int
    limit_min: FloatArray | None = None
    limit_max: FloatArray | None = None

    @property
    def limited(self) -> bool:
        return self.limit_min is not None


@dataclass(frozen=True)
class PmxIK:
    """The IK block of an IK bone: the bone it drives (``target``, the end effector) toward the IK
    bone's own position, through ``links`` listed from the effector's side up."""

    target: int
    loop_count: int
    #: Largest turn of one link in one iteration, radians.
    limit_angle: float
    links: tuple[PmxIKLink, ...]


@dataclass(frozen=True)
class PmxBone:
    """One bone as the file writes it (model space, MMD units; see the module docstring)."""

    name: str
    name_english: str
    position: FloatArray
    parent: int
    #: Transform level ("deform layer"): bones evaluate by (after physics, level, index).
    layer: int
    flags: BoneFlag
    #: The tail as an offset from the head (zeros when the tail is a bone).
    tail_offset: FloatArray
    #: The bone whose head is the tail, or -1 (then ``tail_offset`` is used).
    tail_bone: int = -1
    #: Append ("grant") source and ratio; -1 / 0 when the bone has no append flag.
    append_parent: int = -1
    append_ratio: float = 0.0
    fixed_axis: FloatArray | None = None
    local_x: FloatArray | None = None
    local_z: FloatArray | None = None
    external_key: int | None = None
    ik: PmxIK | None = None

    @property
    def appends_rotation(self) -> bool:
        return bool(self.flags & BoneFlag.APPEND_ROTATION)

    @property
    def appends_translation(self) -> bool:
        return bool(self.flags & BoneFlag.APPEND_TRANSLATION)

    @property
    def is_append(self) -> bool:
        return self.appends_rotation or self.appends_translation


class BodyShape(enum.IntEnum):
    SPHERE = 0
    BOX = 1
    CAPSULE = 2


class BodyMode(enum.IntEnum):
    """How a rigid body moves: with its bone (kinematic), by physics, or by physics with its
    bone's position kept (the body's rotation is simulated, its place follows the bone)."""

    FOLLOW_BONE = 0
    DYNAMIC = 1
    DYNAMIC_BONE_POSITION = 2


@dataclass(frozen=True)
class PmxRigidBody:
    """One rigid body (model space, MMD units, radians; ``size`` per shape: sphere radius,
    box half extents, capsule radius and height)."""

    name: str
    name_english: str
    bone: int
    group: int
    #: Bit ``g`` set: the body collides with group ``g``, as the file stores it (MMD's editors show
    #: its complement, the groups it does not collide with, as checkboxes).
    collides_with: int
    shape: BodyShape
    size: FloatArray
    position: FloatArray
    rotation: FloatArray
    mass: float
    linear_damping: float
    angular_damping: float
    restitution: float
    friction: float
    mode: BodyMode


@dataclass(frozen=True)
class PmxJoint:
    """One joint between two rigid bodies: a 6-DOF spring with translation and rotation limits
    (model space; the lower and upper bounds per axis, springs' stiffness per axis)."""

    name: str
    name_english: str
    kind: int
    body_a: int
    body_b: int
    position: FloatArray
    rotation: FloatArray
    translation_min: FloatArray
    translation_max: FloatArray
    rotation_min: FloatArray
    rotation_max: FloatArray
    spring_translation: FloatArray
    spring_rotation: FloatArray


@dataclass(frozen=True, eq=False)
class PmxModel:
    """The content of one PMX file that matters to a rig (see the module docstring)."""

    path: str
    version: float
    encoding: str
    #: Byte sizes of the indices: vertex, texture, material, bone, morph, rigid body.
    index_sizes: dict[str, int]
    additional_uvs: int
    name: str
    name_english: str
    comment: str
    comment_english: str
    bones: tuple[PmxBone, ...]
    #: Records per section (``faces`` counts vertex indices, three per triangle).
    counts: dict[str, int] = field(default_factory=dict)
    #: Bytes after the last section (tolerated: some tools pad files).
    trailing_bytes: int = 0
    rigid_bodies: tuple[PmxRigidBody, ...] = ()
    joints: tuple[PmxJoint, ...] = ()

    def __repr__(self) -> str:
        return f"PmxModel({os.path.basename(self.path)!r}: PMX {self.version:.1f}, {len(self.bones)} bones)"


# --- reading ---------------------------------------------------------------------------------


def read_pmx(path: str | os.PathLike[str]) -> PmxModel:
    """Read a PMX file. Raises :class:`FileFormatError` naming the file, section and offset."""
    return parse_pmx(read_bytes(path), os.fspath(path))


def parse_pmx(data: bytes, path: str = "<pmx>") -> PmxModel:
    """Parse the bytes of a PMX file; ``path`` is only used in messages."""
    return _Parser(bytes(data), path).parse()


_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_VEC3 = struct.Struct("<3f")
_VEC4 = struct.Struct("<4f")
_SIGNED = {1: struct.Struct("<b"), 2: struct.Struct("<h"), 4: struct.Struct("<i")}
# Vertex indices of 1 and 2 bytes are unsigned (a model may have 255 or 65535 vertices).
_VERTEX = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<i")}

_INDEX_KINDS = ("vertex", "texture", "material", "bone", "morph", "rigid body")
_WEIGHT_TYPES = ("BDEF1", "BDEF2", "BDEF4", "SDEF", "QDEF")
_MORPH_TYPES = ("group", "vertex", "bone", "UV", "UV1", "UV2", "UV3", "UV4", "material", "flip", "impulse")


class _Parser:
    """A cursor over the bytes; every read checks the bytes left and names what it reads."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path
        self.pos = 0
        self.section = "header"
        self.encoding = ENCODINGS[0]
        self.sizes: dict[str, int] = {}

    # --- primitives --------------------------------------------------------------------------

    def fail(self, what: str, at: int | None = None) -> FileFormatError:
        where = self.pos if at is None else at
        return FileFormatError(f"{self.path}: {self.section} section, byte {where}: {what}")

    def need(self, n: int, what: str) -> None:
        left = len(self.data) - self.pos
        if n > left:
            raise self.fail(f"the file ends inside {what} ({n} bytes needed, {left} left): truncated or not a PMX file")

    def take(self, s: struct.Struct, what: str) -> tuple[float | int, ...]:
        self.need(s.size, what)
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n

    def i32(self, what: str) -> int:
        return int(self.take(_I32, what)[0])

    def f32(self, what: str) -> float:
        return float(self.take(_F32, what)[0])

    def vec(self, s: struct.Struct, what: str) -> FloatArray:
        a = np.array(self.take(s, what), dtype=np.float64)
        a.setflags(write=False)
        return a

    def byte(self, what: str) -> int:
        self.need(1, what)
        b = self.data[self.pos]
        self.pos += 1
        return b

    def index(self, kind: str, what: str) -> int:
        return int(self.take(_SIGNED[self.sizes[kind]], what)[0])

    def text(self, what: str) -> str:
        at = self.pos
        n = self.i32(f"the length of {what}")
        if n < 0:
            raise self.fail(f"{what} has a negative length ({n})", at)
        self.need(n, what)
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        # A damaged name is not worth refusing the model for; replacement characters show it.
        return raw.decode(self.encoding, errors="replace").rstrip("\x00")

    def count(self, what: str, smallest: int) -> int:
        """A record count, refused when negative or when even the smallest records would not
        fit in the bytes left (an absurd count fails here, before any allocation or loop)."""
        at = self.pos
        n = self.i32(f"the number of {what}")
        left = len(self.data) - self.pos
        if n < 0:
            raise self.fail(f"the number of {what} is negative ({n})", at)
        if n * smallest > left:
            raise self.fail(
                f"the file declares {n} {what} but only {left} bytes remain (at least {smallest} each): "
                "truncated or corrupt",
                at,
            )
        return n

    def finite(self, values: FloatArray, what: str, at: int) -> FloatArray:
        if not np.all(np.isfinite(values)):
            raise self.fail(f"{what} is not finite ({values.tolist()})", at)
        return values

    # --- sections ----------------------------------------------------------------------------

    def parse(self) -> PmxModel:
        version, additional = self.header()
        name = self.text("the model name")
        name_en = self.text("the English model name")
        comment = self.text("the comment")
        comment_en = self.text("the English comment")
        counts: dict[str, int] = {}
        counts["vertices"] = self.vertices(additional)
        counts["faces"] = self.faces()
        counts["textures"] = self.walk("textures", "textures", 4, lambda i: self.text(f"the path of texture {i}"))
        counts["materials"] = self.materials()
        bones = self.bones()
        counts["bones"] = len(bones)
        counts["morphs"] = self.morphs()
        counts["display frames"] = self.display_frames()
        bodies = self.rigid_bodies(len(bones))
        counts["rigid bodies"] = len(bodies)
        joints = self.joints(len(bodies))
        counts["joints"] = len(joints)
        if version >= 2.1:
            counts["soft bodies"] = self.soft_bodies()
        self.check_references(bones)
        return PmxModel(
            path=self.path,
            version=version,
            encoding=self.encoding,
            index_sizes=dict(self.sizes),
            additional_uvs=additional,
            name=name,
            name_english=name_en,
            comment=comment,
            comment_english=comment_en,
            bones=tuple(bones),
            counts=counts,
            trailing_bytes=len(self.data) - self.pos,
            rigid_bodies=tuple(bodies),
            joints=tuple(joints),
        )

    def header(self) -> tuple[float, int]:
        self.section = "header"
        if len(self.data) < 4 or self.data[:4] != MAGIC:
            head = self.data[:4]
            if head[:3] == b"Pmd":
                raise self.fail("this is a PMD file (the older format); only PMX 2.0 and 2.1 are read", 0)
            raise self.fail(f"not a PMX file: it starts with {head!r}, not {MAGIC!r}", 0)
        self.pos = 4
        at = self.pos
        raw_version = self.f32("the version")
        version = next((v for v in VERSIONS if math.isfinite(raw_version) and abs(raw_version - v) < 1e-4), None)
        if version is None:
            raise self.fail(f"unsupported PMX version {raw_version!r} (2.0 and 2.1 are read)", at)
        at = self.pos
        n_globals = self.byte("the header size")
        if n_globals < 8:
            raise self.fail(f"the header has {n_globals} settings; PMX needs 8", at)
        self.need(n_globals, "the header settings")
        g = self.data[self.pos : self.pos + n_globals]
        if g[0] not in (0, 1):
            raise self.fail(f"unknown text encoding {g[0]} (0 = UTF-16LE, 1 = UTF-8)", self.pos)
        self.encoding = ENCODINGS[g[0]]
        additional = g[1]
        if additional > 4:
            raise self.fail(f"{additional} additional UV sets declared; PMX allows 0 to 4", self.pos + 1)
        for k, kind in enumerate(_INDEX_KINDS):
            size = g[2 + k]
            if size not in (1, 2, 4):
                raise self.fail(f"the {kind} index size is {size}; PMX allows 1, 2 or 4 bytes", self.pos + 2 + k)
            self.sizes[kind] = size
        # Settings beyond the eight known ones (a later revision) are skipped.
        self.pos += n_globals
        return version, additional

    def walk(self, section: str, what: str, smallest: int, read_one: Callable[[int], object]) -> int:
        self.section = section
        n = self.count(what, smallest)
        for i in range(n):
            read_one(i)
        return n

    def vertices(self, additional: int) -> int:
        self.section = "vertices"
        b = self.sizes["bone"]
        fixed = 32 + 16 * additional
        deform = (b, 2 * b + 4, 4 * b + 16, 2 * b + 4 + 36, 4 * b + 16)
        n = self.count("vertices", fixed + 1 + deform[0] + 4)
        data, end = self.data, len(self.data)
        pos = self.pos
        # The hot loop of the reader (models have 10^4 to 10^6 vertices): only the sizes matter.
        for i in range(n):
            t_at = pos + fixed
            if t_at >= end:
                self.pos = pos
                self.need(fixed + 1, f"vertex {i}")
            t = data[t_at]
            if t >= len(deform):
                self.pos = t_at
                raise self.fail(f"vertex {i} has weight type {t}; known types are 0-4 ({', '.join(_WEIGHT_TYPES)})")
            pos = t_at + 1 + deform[t] + 4
            if pos > end:
                self.pos = t_at + 1
                self.need(deform[t] + 4, f"the {_WEIGHT_TYPES[t]} weights of vertex {i}")
        self.pos = pos
        return n

    def faces(self) -> int:
        self.section = "faces"
        size = self.sizes["vertex"]
        n = self.count("face vertex indices", size)
        self.skip(n * size, "the face indices")
        return n

    def materials(self) -> int:
        self.section = "materials"
        t = self.sizes["texture"]
        # Colours, flags and edge (65 bytes), two texture indices, blend and toon bytes, toon
        # value (at least one byte), memo length, face count.
        smallest = 8 + 65 + 2 * t + 2 + 1 + 4 + 4
        n = self.count("materials", smallest)
        for i in range(n):
            self.text(f"the name of material {i}")
            self.text(f"the English name of material {i}")
            self.skip(65 + 2 * t + 1, f"the colours and textures of material {i}")
            at = self.pos
            toon = self.byte(f"the toon mode of material {i}")
            if toon == 0:
                self.skip(t, f"the toon texture of material {i}")
            elif toon == 1:
                self.skip(1, f"the shared toon of material {i}")
            else:
                raise self.fail(f"material {i} has toon mode {toon}; PMX knows 0 (texture) and 1 (shared)", at)
            self.text(f"the memo of material {i}")
            self.skip(4, f"the face count of material {i}")
        return n

    def bones(self) -> list[PmxBone]:
        self.section = "bones"
        b = self.sizes["bone"]
        n = self.count("bones", 8 + 12 + b + 4 + 2 + b)
        return [self.bone(i, b) for i in range(n)]

    def bone(self, i: int, b: int) -> PmxBone:
        name = self.text(f"the name of bone {i}")
        label = f"bone {i} {name!r}"
        name_en = self.text(f"the English name of {label}")
        at = self.pos
        position = self.finite(self.vec(_VEC3, f"the position of {label}"), f"the position of {label}", at)
        parent = self.index("bone", f"the parent of {label}")
        layer = self.i32(f"the transform level of {label}")
        flags = BoneFlag(int(self.take(_U16, f"the flags of {label}")[0]))
        tail_bone = -1
        tail = np.zeros(3)
        if flags & BoneFlag.TAIL_IS_BONE:
            tail_bone = self.index("bone", f"the tail bone of {label}")
        else:
            at = self.pos
            tail = self.finite(self.vec(_VEC3, f"the tail of {label}"), f"the tail of {label}", at)
        append_parent, append_ratio = -1, 0.0
        if flags & (BoneFlag.APPEND_ROTATION | BoneFlag.APPEND_TRANSLATION):
            append_parent = self.index("bone", f"the append source of {label}")
            at = self.pos
            append_ratio = self.f32(f"the append ratio of {label}")
            if not math.isfinite(append_ratio):
                raise self.fail(f"the append ratio of {label} is not finite", at)
        fixed = local_x = local_z = None
        if flags & BoneFlag.FIXED_AXIS:
            at = self.pos
            fixed = self.finite(self.vec(_VEC3, f"the fixed axis of {label}"), f"the fixed axis of {label}", at)
        if flags & BoneFlag.LOCAL_AXES:
            at = self.pos
            local_x = self.finite(self.vec(_VEC3, f"the local X axis of {label}"), f"the local X axis of {label}", at)
            at = self.pos
            local_z = self.finite(self.vec(_VEC3, f"the local Z axis of {label}"), f"the local Z axis of {label}", at)
        external = self.i32(f"the external parent key of {label}") if flags & BoneFlag.EXTERNAL_PARENT else None
        ik = self.ik_block(label, b) if flags & BoneFlag.IK else None
        return PmxBone(
            name=name,
            name_english=name_en,
            position=position,
            parent=parent,
            layer=layer,
            flags=flags,
            tail_offset=tail,
            tail_bone=tail_bone,
            append_parent=append_parent,
            append_ratio=append_ratio,
            fixed_axis=fixed,
            local_x=local_x,
            local_z=local_z,
            external_key=external,
            ik=ik,
        )

    def ik_block(self, label: str, b: int) -> PmxIK:
        target = self.index("bone", f"the IK target of {label}")
        loops = self.i32(f"the IK loop count of {label}")
        at = self.pos
        angle = self.f32(f"the IK angle limit of {label}")
        if not math.isfinite(angle):
            raise self.fail(f"the IK angle limit of {label} is not finite", at)
        n = self.count(f"IK links of {label}", b + 1)
        links = []
        for k in range(n):
            bone = self.index("bone", f"IK link {k} of {label}")
            at = self.pos
            limited = self.byte(f"the limit switch of IK link {k} of {label}")
            if limited > 1:
                raise self.fail(f"IK link {k} of {label} has limit switch {limited}; PMX allows 0 or 1", at)
            if limited:
                at = self.pos
                lo = self.finite(self.vec(_VEC3, f"the lower limit of IK link {k} of {label}"), f"the lower limit of IK link {k} of {label}", at)
                at = self.pos
                hi = self.finite(self.vec(_VEC3, f"the upper limit of IK link {k} of {label}"), f"the upper limit of IK link {k} of {label}", at)
                links.append(PmxIKLink(bone, lo, hi))
            else:
                links.append(PmxIKLink(bone))
        return PmxIK(target=target, loop_count=loops, limit_angle=angle, links=tuple(links))

    def morphs(self) -> int:
        self.section = "morphs"
        s = self.sizes
        # Bytes per offset of each morph type (PMX 2.1 adds flip and impulse).
        per_offset = (
            s["morph"] + 4,
            s["vertex"] + 12,
            s["bone"] + 28,
            s["vertex"] + 16,
            s["vertex"] + 16,
            s["vertex"] + 16,
            s["vertex"] + 16,
            s["vertex"] + 16,
            s["material"] + 113,
            s["morph"] + 4,
            s["rigid body"] + 25,
        )
        n = self.count("morphs", 8 + 1 + 1 + 4)
        for i in range(n):
            name = self.text(f"the name of morph {i}")
            self.text(f"the English name of morph {i} {name!r}")
            self.skip(1, f"the panel of morph {i} {name!r}")
            at = self.pos
            kind = self.byte(f"the type of morph {i} {name!r}")
            if kind >= len(per_offset):
                raise self.fail(f"morph {i} {name!r} has type {kind}; known types are 0-10 ({', '.join(_MORPH_TYPES)})", at)
            size = per_offset[kind]
            m = self.count(f"offsets of morph {i} {name!r}", size)
            self.skip(m * size, f"the offsets of morph {i} {name!r}")
        return n

    def display_frames(self) -> int:
        self.section = "display frames"
        n = self.count("display frames", 8 + 1 + 4)
        sizes = (self.sizes["bone"], self.sizes["morph"])
        for i in range(n):
            name = self.text(f"the name of display frame {i}")
            self.text(f"the English name of display frame {i} {name!r}")
            self.skip(1, f"the special flag of display frame {i} {name!r}")
            m = self.count(f"items of display frame {i} {name!r}", 1 + min(sizes))
            for k in range(m):
                at = self.pos
                kind = self.byte(f"the type of item {k} of display frame {i} {name!r}")
                if kind > 1:
                    raise self.fail(f"item {k} of display frame {i} {name!r} has type {kind}; PMX knows 0 (bone) and 1 (morph)", at)
                self.skip(sizes[kind], f"item {k} of display frame {i} {name!r}")
        return n

    def rigid_bodies(self, bones: int) -> list[PmxRigidBody]:
        self.section = "rigid bodies"
        # Bone index, then group, mask, shape, size, position, rotation, five floats, mode.
        fixed = self.sizes["bone"] + 61
        n = self.count("rigid bodies", 8 + fixed)
        out = []
        for i in range(n):
            name = self.text(f"the name of rigid body {i}")
            name_en = self.text(f"the English name of rigid body {i}")
            at = self.pos
            bone = self.index("bone", f"the bone of rigid body {i}")
            if not -1 <= bone < bones:
                raise self.fail(f"rigid body {i} {name!r} follows bone {bone}; the model has {bones}", at)
            group = self.byte(f"the group of rigid body {i}")
            mask = int(self.take(_U16, f"the collision mask of rigid body {i}")[0])
            at = self.pos
            shape = self.byte(f"the shape of rigid body {i}")
            if shape > 2:
                raise self.fail(f"rigid body {i} {name!r} has shape {shape}; PMX knows 0 (sphere), 1 (box) and 2 (capsule)", at)
            at = self.pos
            size, position, rotation = (self.vec(_VEC3, f"the {w} of rigid body {i}") for w in ("size", "position", "rotation"))
            physics = self.vec(struct.Struct("<5f"), f"the physics values of rigid body {i}")
            self.finite(np.concatenate([size, position, rotation, physics]), f"a value of rigid body {i} {name!r}", at)
            at = self.pos
            mode = self.byte(f"the mode of rigid body {i}")
            if mode > 2:
                raise self.fail(f"rigid body {i} {name!r} has mode {mode}; PMX knows 0 (follows its bone), 1 (dynamic) and 2 (dynamic, bone position)", at)
            mass, lin, ang, restitution, friction = (float(v) for v in physics)
            out.append(
                PmxRigidBody(
                    name, name_en, bone, group, mask, BodyShape(shape), size, position, rotation,
                    mass, lin, ang, restitution, friction, BodyMode(mode),
                )
            )
        return out

    def joints(self, bodies: int) -> list[PmxJoint]:
        self.section = "joints"
        # Type, two rigid body indices, eight vectors (position, rotation, limits, springs).
        fixed = 1 + 2 * self.sizes["rigid body"] + 96
        n = self.count("joints", 8 + fixed)
        out = []
        for i in range(n):
            name = self.text(f"the name of joint {i}")
            name_en = self.text(f"the English name of joint {i}")
            kind = self.byte(f"the type of joint {i}")
            at = self.pos
            a = self.index("rigid body", f"the first body of joint {i}")
            b = self.index("rigid body", f"the second body of joint {i}")
            if not (-1 <= a < bodies and -1 <= b < bodies):
                raise self.fail(f"joint {i} {name!r} links rigid bodies {a} and {b}; the model has {bodies}", at)
            at = self.pos
            v = [self.vec(_VEC3, f"vector {k} of joint {i}") for k in range(8)]
            self.finite(np.concatenate(v), f"a value of joint {i} {name!r}", at)
            out.append(PmxJoint(name, name_en, kind, a, b, *v))
        return out

    def soft_bodies(self) -> int:
        self.section = "soft bodies"
        s = self.sizes
        fixed = s["material"] + 125
        n = self.count("soft bodies", 8 + fixed + 8)
        anchor = s["rigid body"] + s["vertex"] + 1
        for i in range(n):
            self.text(f"the name of soft body {i}")
            self.text(f"the English name of soft body {i}")
            self.skip(fixed, f"soft body {i}")
            m = self.count(f"anchors of soft body {i}", anchor)
            self.skip(m * anchor, f"the anchors of soft body {i}")
            m = self.count(f"pinned vertices of soft body {i}", s["vertex"])
            self.skip(m * s["vertex"], f"the pinned vertices of soft body {i}")
        return n

    def check_references(self, bones: Sequence[PmxBone]) -> None:
        """Bone indices must name a bone (or be -1), and parents must not loop."""
        self.section = "bones"
        n = len(bones)

        def check(i: int, value: int, what: str) -> None:
            if not -1 <= value < n:
                raise FileFormatError(
                    f"{self.path}: bones section: {what} of bone {i} {bones[i].name!r} is bone {value}, "
                    f"but the model has {n} bones"
                )

        for i, bone in enumerate(bones):
            check(i, bone.parent, "the parent")
            check(i, bone.tail_bone, "the tail bone")
            check(i, bone.append_parent, "the append source")
            if bone.ik is not None:
                check(i, bone.ik.target, "the IK target")
                for k, link in enumerate(bone.ik.links):
                    check(i, link.bone, f"IK link {k}")
            if bone.parent == i:
                raise FileFormatError(f"{self.path}: bones section: bone {i} {bone.name!r} is its own parent")
        # Colour the parent graph: a bone reached again while its own chain is being followed
        # closes a loop.
        state = [0] * n  # 0 unseen, 1 on the current chain, 2 done
        for start in range(n):
            chain = []
            j = start
            while j >= 0 and state[j] == 0:
                state[j] = 1
                chain.append(j)
                j = bones[j].parent
            if j >= 0 and state[j] == 1:
                loop = chain[chain.index(j) :]
                names = " -> ".join(repr(bones[k].name) for k in loop)
                raise FileFormatError(f"{self.path}: bones section: the parents loop ({names} -> {bones[j].name!r})")
            for k in chain:
                state[k] = 2

"""PMX files written by the tests themselves, byte by byte from the format's layout (independent
of the reader), and the small rigs the PMX tests use.

:func:`write_pmx` writes every section, with records of every kind (all weight types, both toon
modes, every morph type, bone and morph display items, rigid bodies, joints and, for 2.1, soft
bodies), so a reader that gets one record size wrong loses its place. It also returns the byte
offset where each section starts, for truncation tests.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

# Bone flag bits (PMX 2.0/2.1), spelled out here rather than imported from the reader.
TAIL_IS_BONE = 0x0001
ROTATABLE = 0x0002
TRANSLATABLE = 0x0004
VISIBLE = 0x0008
ENABLED = 0x0010
IK = 0x0020
LOCAL_APPEND = 0x0080
APPEND_ROTATION = 0x0100
APPEND_TRANSLATION = 0x0200
FIXED_AXIS = 0x0400
LOCAL_AXES = 0x0800
AFTER_PHYSICS = 0x1000
EXTERNAL_PARENT = 0x2000

KNEE_MIN = (-math.pi, 0.0, 0.0)
KNEE_MAX = (math.radians(-0.5), 0.0, 0.0)


@dataclass
class Link:
    bone: int
    limits: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None


@dataclass
class Bone:
    name: str
    position: tuple[float, float, float]
    parent: int = -1
    name_en: str = ""
    layer: int = 0
    flags: int = ROTATABLE | VISIBLE | ENABLED
    tail_bone: int | None = None
    tail_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    append: tuple[int, float] | None = None
    fixed_axis: tuple[float, float, float] | None = None
    local_axes: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None
    external_key: int | None = None
    ik_target: int | None = None
    ik_loops: int = 40
    ik_angle: float = 2.0
    links: list[Link] = field(default_factory=list)

    def all_flags(self) -> int:
        f = self.flags
        if self.tail_bone is not None:
            f |= TAIL_IS_BONE
        if self.fixed_axis is not None:
            f |= FIXED_AXIS
        if self.local_axes is not None:
            f |= LOCAL_AXES
        if self.external_key is not None:
            f |= EXTERNAL_PARENT
        if self.ik_target is not None:
            f |= IK
        return f


@dataclass
class Body:
    """A rigid body record: shape 0 sphere, 1 box, 2 capsule; mode 0 follows its bone, 1 dynamic,
    2 dynamic with the bone's position; ``mask`` the 16-bit collision field as the file holds it."""

    name: str
    bone: int
    shape: int
    size: tuple[float, float, float]
    position: tuple[float, float, float]
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    group: int = 0
    mask: int = 0xFFFF
    mass: float = 1.0
    damping: tuple[float, float] = (0.5, 0.5)
    restitution: float = 0.0
    friction: float = 0.5
    mode: int = 1


@dataclass
class JointRecord:
    """A joint record (type 0: a 6-DOF spring) between bodies ``a`` and ``b``."""

    name: str
    a: int
    b: int
    position: tuple[float, float, float]
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    move: tuple[tuple[float, float, float], tuple[float, float, float]] = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    turn: tuple[tuple[float, float, float], tuple[float, float, float]] = ((-0.5, -0.5, -0.5), (0.5, 0.5, 0.5))
    springs: tuple[tuple[float, float, float], tuple[float, float, float]] = ((0.0, 0.0, 0.0), (10.0, 10.0, 10.0))


class _Out:
    def __init__(self, encoding: str, sizes: dict[str, int]) -> None:
        self.b = bytearray()
        self.encoding = encoding
        self.sizes = sizes

    def raw(self, data: bytes) -> None:
        self.b += data

    def i32(self, v: int) -> None:
        self.b += struct.pack("<i", v)

    def u8(self, v: int) -> None:
        self.b += struct.pack("<B", v)

    def floats(self, *v: float) -> None:
        self.b += struct.pack(f"<{len(v)}f", *v)

    def text(self, s: str) -> None:
        data = s.encode(self.encoding)
        self.i32(len(data))
        self.b += data

    def index(self, kind: str, v: int) -> None:
        size = self.sizes[kind]
        if kind == "vertex" and size < 4:
            self.b += struct.pack({1: "<B", 2: "<H"}[size], v)
        else:
            self.b += struct.pack({1: "<b", 2: "<h", 4: "<i"}[size], v)


def write_pmx(
    bones: list[Bone],
    *,
    version: float = 2.0,
    encoding: str = "utf-16-le",
    sizes: dict[str, int] | None = None,
    additional_uvs: int = 0,
    extras: bool = True,
    bodies: list[Body] | None = None,
    joints: list[JointRecord] | None = None,
) -> tuple[bytes, dict[str, int]]:
    """The bytes of a PMX file with ``bones`` and, when ``extras``, a few records of every other
    section; and the offset where each section starts (``header`` is 0)."""
    sizes = dict(sizes or {"vertex": 1, "texture": 1, "material": 1, "bone": 1, "morph": 1, "rigid body": 1})
    o = _Out(encoding, sizes)
    starts: dict[str, int] = {"header": 0}
    o.raw(b"PMX ")
    o.floats(version)
    o.u8(8)
    kinds = ("vertex", "texture", "material", "bone", "morph", "rigid body")
    o.raw(bytes([0 if encoding == "utf-16-le" else 1, additional_uvs, *(sizes[k] for k in kinds)]))
    o.text("テストモデル")
    o.text("test model")
    o.text("コメント")
    o.text("comment")

    starts["vertices"] = len(o.b)
    weight_types = [0, 1, 2, 3] + ([4] if version >= 2.1 else [])
    o.i32(len(weight_types) if extras else 0)
    for t in weight_types if extras else []:
        o.floats(0.0, 1.0, 2.0, 0.0, 1.0, 0.0, 0.5, 0.5)
        for _ in range(additional_uvs):
            o.floats(0.1, 0.2, 0.3, 0.4)
        o.u8(t)
        if t == 0:
            o.index("bone", 0)
        elif t == 1:
            o.index("bone", 0)
            o.index("bone", 0)
            o.floats(0.5)
        elif t in (2, 4):
            for _ in range(4):
                o.index("bone", 0)
            o.floats(0.25, 0.25, 0.25, 0.25)
        else:
            o.index("bone", 0)
            o.index("bone", 0)
            o.floats(0.5, 0, 0, 0, 0, 1, 0, 0, 2, 0)
        o.floats(1.0)

    starts["faces"] = len(o.b)
    faces = [0, 1, 2, 1, 2, 3] if extras else []
    o.i32(len(faces))
    for v in faces:
        o.index("vertex", v)

    starts["textures"] = len(o.b)
    o.i32(2 if extras else 0)
    for name in ["tex/a.png", "tex/b.png"] if extras else []:
        o.text(name)

    starts["materials"] = len(o.b)
    o.i32(2 if extras else 0)
    for toon in (0, 1) if extras else ():
        o.text("材質")
        o.text("material")
        o.floats(1, 1, 1, 1, 0, 0, 0, 5, 0.5, 0.5, 0.5)
        o.u8(0x1D)
        o.floats(0, 0, 0, 1, 1.0)
        o.index("texture", 0)
        o.index("texture", -1)
        o.u8(1)
        o.u8(toon)
        if toon == 0:
            o.index("texture", 1)
        else:
            o.u8(3)
        o.text("memo")
        o.i32(3)

    starts["bones"] = len(o.b)
    o.i32(len(bones))
    for b in bones:
        o.text(b.name)
        o.text(b.name_en)
        o.floats(*b.position)
        o.index("bone", b.parent)
        o.i32(b.layer)
        flags = b.all_flags()
        o.raw(struct.pack("<H", flags))
        if b.tail_bone is not None:
            o.index("bone", b.tail_bone)
        else:
            o.floats(*b.tail_offset)
        if flags & (APPEND_ROTATION | APPEND_TRANSLATION):
            src, ratio = b.append if b.append is not None else (-1, 0.0)
            o.index("bone", src)
            o.floats(ratio)
        if b.fixed_axis is not None:
            o.floats(*b.fixed_axis)
        if b.local_axes is not None:
            o.floats(*b.local_axes[0])
            o.floats(*b.local_axes[1])
        if b.external_key is not None:
            o.i32(b.external_key)
        if b.ik_target is not None:
            o.index("bone", b.ik_target)
            o.i32(b.ik_loops)
            o.floats(b.ik_angle)
            o.i32(len(b.links))
            for link in b.links:
                o.index("bone", link.bone)
                o.u8(0 if link.limits is None else 1)
                if link.limits is not None:
                    o.floats(*link.limits[0])
                    o.floats(*link.limits[1])

    starts["morphs"] = len(o.b)
    morph_types = list(range(9)) + ([9, 10] if version >= 2.1 else [])
    o.i32(len(morph_types) if extras else 0)
    for t in morph_types if extras else []:
        o.text(f"モーフ{t}")
        o.text(f"morph{t}")
        o.u8(4)
        o.u8(t)
        o.i32(2)
        for _ in range(2):
            if t in (0, 9):
                o.index("morph", 0)
                o.floats(0.5)
            elif t == 1:
                o.index("vertex", 1)
                o.floats(0, 1, 0)
            elif t == 2:
                o.index("bone", 0)
                o.floats(0, 1, 0, 0, 0, 0, 1)
            elif 3 <= t <= 7:
                o.index("vertex", 1)
                o.floats(0.1, 0.2, 0.3, 0.4)
            elif t == 8:
                o.index("material", -1)
                o.u8(1)
                o.floats(*([1.0] * 28))
            else:
                o.index("rigid body", 0)
                o.u8(1)
                o.floats(0, 0, 1, 0, 1, 0)

    starts["display frames"] = len(o.b)
    o.i32(2)
    o.text("Root")
    o.text("Root")
    o.u8(1)
    o.i32(1)
    o.u8(0)
    o.index("bone", 0)
    o.text("表情")
    o.text("Exp")
    o.u8(1)
    o.i32(1 if extras else 0)
    if extras:
        o.u8(1)
        o.index("morph", 0)

    starts["rigid bodies"] = len(o.b)
    if bodies is None:
        bodies = [Body(f"剛体{k}", 0, 1, (1, 1, 1), (0, k, 0), group=k, mode=k) for k in range(2 if extras else 0)]
    o.i32(len(bodies))
    for k, body in enumerate(bodies):
        o.text(body.name)
        o.text(f"body{k}")
        o.index("bone", body.bone)
        o.u8(body.group)
        o.raw(struct.pack("<H", body.mask))
        o.u8(body.shape)
        o.floats(*body.size, *body.position, *body.rotation, body.mass, *body.damping, body.restitution, body.friction)
        o.u8(body.mode)

    starts["joints"] = len(o.b)
    if joints is None:
        joints = [JointRecord("ジョイント", 0, 1, (0, 0, 0), move=((0, 0, 0), (0, 0, 0)), turn=((0, 0, 0), (0, 0, 0)), springs=((0, 0, 0), (0, 0, 0)))] if extras else []
    o.i32(len(joints))
    for joint in joints:
        o.text(joint.name)
        o.text("joint")
        o.u8(0)
        o.index("rigid body", joint.a)
        o.index("rigid body", joint.b)
        o.floats(*joint.position, *joint.rotation, *joint.move[0], *joint.move[1], *joint.turn[0], *joint.turn[1], *joint.springs[0], *joint.springs[1])

    if version >= 2.1:
        starts["soft bodies"] = len(o.b)
        o.i32(1 if extras else 0)
        if extras:
            o.text("ソフト")
            o.text("soft")
            o.u8(0)
            o.index("material", 0)
            o.u8(1)
            o.raw(struct.pack("<H", 0xFFFF))
            o.u8(3)
            o.i32(2)
            o.i32(0)
            o.floats(1.0, 0.05)
            o.i32(1)
            o.floats(*([0.5] * 18))
            for _ in range(4):
                o.i32(1)
            o.floats(1, 1, 1)
            o.i32(2)
            for k in range(2):
                o.index("rigid body", k)
                o.index("vertex", k)
                o.u8(0)
            o.i32(3)
            for k in range(3):
                o.index("vertex", k)
    return bytes(o.b), starts


# --- rigs ------------------------------------------------------------------------------------

# Joint names of the leg rig (MMD's standard Japanese names).
CENTER, LEG, KNEE, ANKLE, TOE, LEG_IK, LEG_D, ARM, TWIST, TWIST_1, GROOVE = (
    "センター",
    "左足",
    "左ひざ",
    "左足首",
    "左つま先",
    "左足ＩＫ",
    "左足D",
    "左腕",
    "左腕捩",
    "左腕捩1",
    "グルーブ",
)


def leg_rig_bones(knee_limit: bool = True) -> list[Bone]:
    """A left leg driven by MMD's usual leg IK (knee limited to bend one way about X), a D-bone
    inheriting the thigh's rotation, an arm with local axes, a fixed-axis twist bone and a twist
    split bone inheriting half of it, a groove bone inheriting a translation. Model space: +Y up,
    facing -Z, the left side at +X, MMD units."""
    t, rt = ROTATABLE | VISIBLE | ENABLED, ROTATABLE | TRANSLATABLE | VISIBLE | ENABLED
    return [
        Bone(CENTER, (0.0, 8.0, 0.0), -1, "center", flags=rt, tail_offset=(0.0, -2.0, 0.0)),
        Bone(LEG, (1.0, 10.0, 0.2), 0, "leg_L", flags=t, tail_bone=2),
        Bone(KNEE, (1.1, 5.5, -0.2), 1, "knee_L", flags=t, tail_bone=3),
        Bone(ANKLE, (1.2, 1.0, 0.3), 2, "ankle_L", flags=t, tail_bone=4),
        Bone(TOE, (1.2, 0.0, -1.5), 3, "toe_L", flags=t),
        Bone(
            LEG_IK,
            (1.2, 1.0, 0.3),
            -1,
            "leg IK_L",
            flags=rt,
            layer=1,
            tail_offset=(0.0, 0.0, 1.0),
            ik_target=3,
            ik_loops=40,
            links=[Link(2, (KNEE_MIN, KNEE_MAX) if knee_limit else None), Link(1)],
        ),
        Bone(LEG_D, (1.0, 10.0, 0.2), 0, "leg_L_D", flags=t | APPEND_ROTATION, layer=2, tail_offset=(0.0, -4.0, 0.0), append=(1, 1.0)),
        Bone(ARM, (2.0, 15.0, 0.0), 0, "arm_L", flags=t, tail_bone=8, local_axes=((0.97, -0.24, 0.0), (0.0, 0.0, 1.0))),
        Bone(TWIST, (4.0, 14.5, 0.0), 7, "arm twist_L", flags=t, tail_offset=(2.0, -0.5, 0.0), fixed_axis=(0.97, -0.24, 0.0)),
        Bone(TWIST_1, (4.5, 14.4, 0.0), 7, "arm twist1_L", flags=t | APPEND_ROTATION, append=(8, 0.5)),
        Bone(GROOVE, (0.0, 8.2, 0.0), 0, "groove", flags=rt | APPEND_TRANSLATION, append=(0, -0.5)),
    ]


def humanoid_bones() -> list[Bone]:
    """A small MMD humanoid (standard Japanese names), both legs on MMD's usual leg IK (knees
    bending one way about X), arms 35 degrees below horizontal, no fingers. Model space: +Y up,
    facing -Z, its left at +X, MMD units (about 20 tall)."""
    t, rt = ROTATABLE | VISIBLE | ENABLED, ROTATABLE | TRANSLATABLE | VISIBLE | ENABLED
    bones = [
        Bone("センター", (0.0, 8.0, 0.0), -1, "center", flags=rt, tail_offset=(0.0, -1.0, 0.0)),
        Bone("上半身", (0.0, 11.0, 0.2), 0, "upper body", flags=t, tail_bone=2),
        Bone("首", (0.0, 15.5, 0.3), 1, "neck", flags=t, tail_bone=3),
        Bone("頭", (0.0, 16.5, 0.2), 2, "head", flags=t, tail_offset=(0.0, 2.5, 0.0)),
        Bone("下半身", (0.0, 11.0, 0.2), 0, "lower body", flags=t, tail_offset=(0.0, -1.5, 0.0)),
    ]
    for sx, s, e in ((1.0, "左", "_L"), (-1.0, "右", "_R")):
        k = len(bones)
        reach = (3.3 * math.cos(math.radians(35.0)), 3.3 * math.sin(math.radians(35.0)))
        bones += [
            Bone(s + "肩", (sx * 0.4, 15.0, 0.3), 1, "shoulder" + e, flags=t, tail_bone=k + 1),
            Bone(s + "腕", (sx * 1.6, 15.0, 0.3), k, "arm" + e, flags=t, tail_bone=k + 2),
            Bone(s + "ひじ", (sx * (1.6 + reach[0]), 15.0 - reach[1], 0.3), k + 1, "elbow" + e, flags=t, tail_bone=k + 3),
            Bone(s + "手首", (sx * (1.6 + 2 * reach[0]), 15.0 - 2 * reach[1], 0.3), k + 2, "wrist" + e, flags=t, tail_offset=(sx * 1.0, -0.7, 0.0)),
            Bone(s + "足", (sx * 1.0, 10.0, 0.2), 4, "leg" + e, flags=t, tail_bone=k + 5),
            Bone(s + "ひざ", (sx * 1.0, 5.5, 0.0), k + 4, "knee" + e, flags=t, tail_bone=k + 6),
            Bone(s + "足首", (sx * 1.0, 1.0, 0.3), k + 5, "ankle" + e, flags=t, tail_bone=k + 7),
            Bone(s + "つま先", (sx * 1.0, 0.0, -1.5), k + 6, "toe" + e, flags=t, tail_offset=(0.0, 0.0, -0.5)),
            Bone(
                s + "足ＩＫ", (sx * 1.0, 1.0, 0.3), -1, "leg IK" + e, flags=rt, layer=1, tail_offset=(0.0, 0.0, 1.0),
                ik_target=k + 6, ik_loops=40, links=[Link(k + 5, (KNEE_MIN, KNEE_MAX)), Link(k + 4)],
            ),
        ]
    return bones


HAIR = ("髪1", "髪2", "髪3")
#: The head's collision sphere (MMD units): centre and radius; the hair capsules' radius.
HEAD_CENTRE, HEAD_RADIUS, HAIR_RADIUS = (0.0, 18.0, 0.2), 2.0, 0.3


def hair_model() -> tuple[list[Bone], list[Body], list[JointRecord]]:
    """:func:`humanoid_bones` with a hair chain of three bones from the head, held out sideways
    (+X) at rest: a head sphere following the head bone (group 0), three dynamic capsules along the
    chain joined to it and each other by 6-DOF springs free to swing in the model's X-Y plane.
    The first capsule (group 2) ignores the head, the other two (group 1) collide with it; the hair
    capsules ignore each other."""
    t = ROTATABLE | VISIBLE | ENABLED
    bones = humanoid_bones()
    head = next(i for i, b in enumerate(bones) if b.name == "頭")
    k = len(bones)
    xs = (1.5, 3.0, 4.5, 6.0)
    y, z = 19.5, 0.2
    for i, name in enumerate(HAIR):
        bones.append(Bone(name, (xs[i], y, z), head if i == 0 else k + i - 1, f"hair{i + 1}", flags=t, tail_bone=k + i + 1))
    bones.append(Bone("髪先", (xs[3], y, z), k + 2, "hair tip", flags=t, tail_offset=(1.0, 0.0, 0.0)))
    no_hair = 0xFFFF & ~(1 << 1)
    bodies = [Body("頭", head, 0, (HEAD_RADIUS, 0.0, 0.0), HEAD_CENTRE, group=0, mask=0xFFFF, mode=0, mass=5.0)]
    for i in range(3):
        mid = (0.5 * (xs[i] + xs[i + 1]), y, z)
        group, mask = (2, no_hair & ~(1 << 0) & ~(1 << 2)) if i == 0 else (1, no_hair & ~(1 << 2))
        # A capsule lies along its local Y; turned 90 degrees about Z it lies along the chain (X).
        bodies.append(Body(HAIR[i], k + i, 2, (HAIR_RADIUS, 0.9, 0.0), mid, (0.0, 0.0, math.pi / 2), group=group, mask=mask, mass=0.5, mode=1))
    joints = []
    for i in range(3):
        # The joint's X turned onto the model's Z (Ry 90 degrees): the hair swings about it freely.
        joints.append(
            JointRecord(
                f"髪J{i + 1}", i, i + 1, (xs[i], y, z), (0.0, math.pi / 2, 0.0),
                move=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
                turn=((-3.0, -0.2, -0.2), (3.0, 0.2, 0.2)),
                springs=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
            )
        )
    return bones, bodies, joints


def many_hair_model(strands: int = 8, links: int = 5) -> tuple[list[Bone], list[Body], list[JointRecord]]:
    """:func:`humanoid_bones` with ``strands`` hair strands of ``links`` bones hanging straight
    down from a ring behind the head (a fan from one shoulder to the other), each link a dynamic
    capsule jointed to the one above (the first to a head sphere that follows the head bone) by a
    6-DOF spring free to swing 1 radian about X and Z; an upper-body capsule follows 上半身. The
    hair collides with the head and the body (group 1, masks leave out group 1: strands pass
    each other). Bone names ``髪{strand}_{link}``."""
    t = ROTATABLE | VISIBLE | ENABLED
    bones = humanoid_bones()
    head = next(i for i, b in enumerate(bones) if b.name == "頭")
    chest = next(i for i, b in enumerate(bones) if b.name == "上半身")
    bodies = [
        Body("頭", head, 0, (HEAD_RADIUS, 0.0, 0.0), HEAD_CENTRE, group=0, mask=0xFFFF, mode=0, mass=5.0),
        Body("上半身", chest, 2, (1.6, 3.0, 0.0), (0.0, 13.0, 0.4), group=0, mask=0xFFFF, mode=0, mass=10.0),
    ]
    joints: list[JointRecord] = []
    step = 1.2
    no_hair = 0xFFFF & ~(1 << 1)
    for s in range(strands):
        angle = math.pi * (0.1 + 0.8 * s / max(strands - 1, 1))  # from the left shoulder round the back to the right
        x, z = (HEAD_RADIUS + HAIR_RADIUS + 0.1) * math.cos(angle), HEAD_CENTRE[2] + (HEAD_RADIUS + HAIR_RADIUS + 0.1) * math.sin(angle)
        top = HEAD_CENTRE[1]
        first = len(bones)
        for k in range(links + 1):
            y = top - step * k
            if k == links:
                bones.append(Bone(f"髪{s}_{k}", (x, y, z), first + k - 1, f"hair{s}_{k}", flags=t, tail_offset=(0.0, -step, 0.0)))
                break
            bones.append(Bone(f"髪{s}_{k}", (x, y, z), head if k == 0 else first + k - 1, f"hair{s}_{k}", flags=t, tail_bone=first + k + 1))
            above = 0 if k == 0 else len(bodies) - 1
            bodies.append(Body(f"髪{s}_{k}", first + k, 2, (HAIR_RADIUS, step - 2 * HAIR_RADIUS, 0.0), (x, y - step / 2, z), group=1, mask=no_hair, mass=0.2, mode=1))
            joints.append(JointRecord(f"髪J{s}_{k}", above, len(bodies) - 1, (x, y, z), turn=((-1.0, -0.2, -1.0), (1.0, 0.2, 1.0)), springs=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))))
    return bones, bodies, joints


def knee_ornament_model() -> tuple[list[Bone], list[Body], list[JointRecord]]:
    """:func:`humanoid_bones` with an ornament hanging beside the left knee: a capsule following
    the knee bone (a bone the leg IK moves) and, jointed to it with every axis locked, a dynamic
    box on a bone ``左飾`` under the knee. Body 0 is the knee's, body 1 the ornament's."""
    bones = humanoid_bones()
    knee = next(i for i, b in enumerate(bones) if b.name == "左ひざ")
    bones.append(Bone("左飾", (1.6, 4.0, 0.0), knee, "ornament_L", tail_offset=(0.0, -1.5, 0.0)))
    bodies = [
        Body("膝", knee, 2, (0.5, 3.0, 0.0), (1.0, 3.5, 0.0), group=0, mask=0xFFFF, mode=0, mass=2.0),
        Body("飾", len(bones) - 1, 1, (0.2, 0.75, 0.2), (1.6, 3.25, 0.0), group=1, mask=0, mode=1, mass=0.3),
    ]
    locked = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    turn = ((-0.01, -0.01, -0.01), (0.01, 0.01, 0.01))
    return bones, bodies, [JointRecord("飾J", 0, 1, (1.6, 4.0, 0.0), move=locked, turn=turn, springs=locked)]

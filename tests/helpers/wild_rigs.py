"""Humanoid armature layouts found in the wild but not in ``tests/data``, as joint-position tables.

Each family is written from its published layout as commonly known (bone names, parents, where
the joints sit on a body): the positions are approximations of the layout built on one set of body
proportions here, not copies of any file. Units are metres in Blender's frame: Z up, the character
faces -Y, its left is +X (a family's own facing, units and object transform are applied by
:func:`place`). A table is a list of ``(name, parent, head, tail)``; ``expected`` holds the slots a
mapper must fill and the bone that is right for each, written here by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Bone = tuple[str, "str | None", np.ndarray, np.ndarray]
FINGERS = ("thumb", "index", "middle", "ring", "little")


@dataclass
class WildRig:
    name: str
    bones: list[Bone]
    expected: dict[str, str]
    #: Rotation about Z (degrees) applied to the whole table: the family's facing.
    turn_deg: float = 0.0
    #: Armature-space units per metre (100 for centimetre rigs) and the object's scale.
    units: float = 1.0
    object_scale: float = 1.0
    #: Bones stored Y-up under an object turned +90 degrees about X (an FBX from a Y-up tool).
    y_up: bool = False
    extra: dict[str, object] = field(default_factory=dict)


def _v(*xyz: float) -> np.ndarray:
    return np.asarray(xyz, dtype=np.float64)


@dataclass
class Body:
    """Landmarks of one body (metres, faces -Y, left +X) from a few proportions."""

    height: float = 1.75
    leg: float = 0.52  # hip joint height / height
    arm: float = 1.0  # arm length factor
    head: float = 1.0  # head size factor
    arm_down_deg: float = 0.0  # 0: T-pose; ~45: A-pose
    elbow_bend_deg: float = 0.0  # forearm and hand turned forward at the elbow
    knee_bend_deg: float = 0.0  # knees forward, ankles under the hips

    def __post_init__(self) -> None:
        s = self.height / 1.75
        self.s = s
        hip_z = self.leg * self.height
        self.pelvis = _v(0, 0.0, hip_z + 0.05 * s)
        self.neck_base = _v(0, 0.01 * s, self.pelvis[2] + 0.52 * s)
        self.head_base = _v(0, 0.0, self.neck_base[2] + 0.10 * s)
        self.head_top = self.head_base + _v(0, 0, 0.22 * s * self.head)
        self.eye_z = self.head_base[2] + 0.10 * s * self.head

    def spine(self, n: int) -> list[np.ndarray]:
        """``n + 1`` points from the pelvis to the neck's base, curving a little back at the chest."""
        t = np.linspace(0.0, 1.0, n + 1)
        pts = self.pelvis[None] + t[:, None] * (self.neck_base - self.pelvis)[None]
        pts[:, 1] += 0.025 * self.s * np.sin(np.pi * t)
        return list(pts)

    def side(self, x: float) -> dict[str, np.ndarray]:
        """Landmarks of one side (``x`` = +1 left, -1 right)."""
        s, a = self.s, self.arm
        p: dict[str, np.ndarray] = {}
        p["clavicle"] = _v(0.03 * s * x, -0.02 * s, self.neck_base[2] - 0.05 * s)
        p["shoulder"] = _v(0.18 * s * x, 0.01 * s, self.neck_base[2] - 0.06 * s)
        down = np.radians(self.arm_down_deg)
        d = _v(np.cos(down) * x, 0.0, -np.sin(down))
        p["elbow"] = p["shoulder"] + 0.29 * s * a * d + _v(0, 0.015 * s, 0)
        bend = np.radians(self.elbow_bend_deg)
        d = np.cos(bend) * d + np.sin(bend) * _v(0, -1.0, 0)
        p["wrist"] = p["elbow"] + 0.26 * s * a * d - _v(0, 0.005 * s, 0)
        p["dir"] = d
        # The palm faces down in a T-pose: fingers fan along Y, the index forward (-Y).
        base = p["wrist"] + 0.095 * s * a * d
        fwd = _v(0, -1.0, 0)
        spread = {"index": 0.03, "middle": 0.01, "ring": -0.01, "little": -0.03}
        lengths = {"index": 0.085, "middle": 0.095, "ring": 0.088, "little": 0.07}
        for f, off in spread.items():
            b = base + off * s * a * fwd - (0.01 * s * a * d if f == "little" else 0)
            p[f + "_meta"] = p["wrist"] + 0.02 * s * a * d + 0.6 * off * s * a * fwd
            seg = lengths[f] * s * a / 3.0
            for k in range(4):
                p[f"{f}_{k + 1}"] = b + k * seg * d - _v(0, 0, 0.004 * s * k * k)
        tb = p["wrist"] + 0.02 * s * a * d + 0.025 * s * a * fwd - _v(0, 0, 0.015 * s)
        tdir = d * 0.6 + fwd * 0.8
        tdir = tdir / np.linalg.norm(tdir)
        for k in range(4):
            p[f"thumb_{k + 1}"] = tb + k * 0.035 * s * a * tdir
        hip_z = self.leg * self.height
        p["hip"] = _v(0.09 * s * x, 0.0, hip_z)
        p["knee"] = _v(0.095 * s * x, -0.015 * s - np.sin(np.radians(self.knee_bend_deg)) * 0.47 * hip_z, 0.53 * hip_z)
        p["ankle"] = _v(0.10 * s * x, 0.03 * s, 0.085 * s)
        p["ball"] = _v(0.11 * s * x, -0.10 * s, 0.025 * s)
        p["toe_tip"] = _v(0.115 * s * x, -0.17 * s, 0.02 * s)
        p["eye"] = _v(0.032 * s * x * self.head, -0.09 * s * self.head, self.eye_z)
        return p


def _lerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    return a + t * (b - a)


def unreal_mannequin(body: Body | None = None, turn_deg: float = 180.0) -> WildRig:
    """UE5 mannequin: centimetres, object scaled 0.01, faces +Y, root at the floor, twist bones,
    metacarpals, and IK target bones under ``ik_foot_root`` / ``ik_hand_root``."""
    b = body or Body(arm_down_deg=40.0, elbow_bend_deg=20.0, knee_bend_deg=5.0)
    bones: list[Bone] = [("root", None, _v(0, 0, 0), _v(0, -0.15, 0))]
    sp = b.spine(5)
    bones.append(("pelvis", "root", b.pelvis - _v(0, 0, 0.02), sp[1]))
    names = [f"spine_0{i}" for i in range(1, 6)]
    for i, n in enumerate(names):
        bones.append((n, "pelvis" if i == 0 else names[i - 1], sp[i] + _v(0, 0, 0.01), sp[i + 1]))
    mid = _lerp(b.neck_base, b.head_base, 0.5)
    bones += [("neck_01", "spine_05", b.neck_base, mid), ("neck_02", "neck_01", mid, b.head_base), ("head", "neck_02", b.head_base, b.head_top)]
    ex = {}
    for x, s in ((1.0, "l"), (-1.0, "r")):
        p = b.side(x)
        bones.append((f"clavicle_{s}", "spine_05", p["clavicle"], p["shoulder"]))
        bones.append((f"upperarm_{s}", f"clavicle_{s}", p["shoulder"], p["elbow"]))
        for k, t in ((1, 0.5), (2, 0.75)):
            bones.append((f"upperarm_twist_0{k}_{s}", f"upperarm_{s}", _lerp(p["shoulder"], p["elbow"], t), _lerp(p["shoulder"], p["elbow"], t + 0.2)))
        bones.append((f"lowerarm_{s}", f"upperarm_{s}", p["elbow"], p["wrist"]))
        for k, t in ((1, 0.5), (2, 0.75)):
            bones.append((f"lowerarm_twist_0{k}_{s}", f"lowerarm_{s}", _lerp(p["elbow"], p["wrist"], t), _lerp(p["elbow"], p["wrist"], t + 0.2)))
        bones.append((f"hand_{s}", f"lowerarm_{s}", p["wrist"], p["middle_1"]))
        for f in FINGERS:
            ue = "pinky" if f == "little" else f
            parent = f"hand_{s}"
            if f != "thumb":
                bones.append((f"{ue}_metacarpal_{s}", parent, p[f + "_meta"], p[f + "_1"]))
                parent = f"{ue}_metacarpal_{s}"
            for k in (1, 2, 3):
                bones.append((f"{ue}_0{k}_{s}", parent if k == 1 else f"{ue}_0{k - 1}_{s}", p[f"{f}_{k}"], p[f"{f}_{k + 1}"]))
                ex[f"{f}_{k}"] = f"{ue}_0{k}_"
        bones.append((f"thigh_{s}", "pelvis", p["hip"], p["knee"]))
        bones.append((f"thigh_twist_01_{s}", f"thigh_{s}", _lerp(p["hip"], p["knee"], 0.3), _lerp(p["hip"], p["knee"], 0.5)))
        bones.append((f"calf_{s}", f"thigh_{s}", p["knee"], p["ankle"]))
        bones.append((f"calf_twist_01_{s}", f"calf_{s}", _lerp(p["knee"], p["ankle"], 0.5), _lerp(p["knee"], p["ankle"], 0.7)))
        bones.append((f"foot_{s}", f"calf_{s}", p["ankle"], p["ball"]))
        bones.append((f"ball_{s}", f"foot_{s}", p["ball"], p["toe_tip"]))
    bones.append(("ik_foot_root", "root", _v(0, 0, 0), _v(0, 0, 0.1)))
    bones.append(("ik_hand_root", "root", _v(0, 0, 0), _v(0, 0, 0.1)))
    right, left = b.side(-1.0), b.side(1.0)
    bones.append(("ik_hand_gun", "ik_hand_root", right["wrist"], right["wrist"] + _v(0, 0, 0.1)))
    for s, p in (("l", left), ("r", right)):
        bones.append((f"ik_foot_{s}", "ik_foot_root", p["ankle"], p["ball"]))
        bones.append((f"ik_hand_{s}", "ik_hand_gun", p["wrist"], p["middle_1"]))
    bones.append(("interaction", "root", _v(0, 0, 0), _v(0, 0, 0.1)))
    bones.append(("center_of_mass", "root", b.pelvis, b.pelvis + _v(0, 0, 0.1)))
    expected = {"hips": "pelvis", "spine": "spine_01", "neck": "neck_01", "head": "head"}
    for S, s in (("L", "l"), ("R", "r")):
        for slot, n in (("shoulder", "clavicle"), ("upper_arm", "upperarm"), ("forearm", "lowerarm"), ("hand", "hand"),
                        ("thigh", "thigh"), ("shin", "calf"), ("foot", "foot"), ("toes", "ball")):
            expected[f"{slot}.{S}"] = f"{n}_{s}"
        for f in FINGERS:
            for k in (1, 2, 3):
                expected[f"{f}_{k}.{S}"] = f"{ex[f'{f}_{k}']}{s}"
    name = "unreal_mannequin" if turn_deg == 180.0 else f"unreal_mannequin_turned{int(turn_deg)}"
    return WildRig(name, bones, expected, turn_deg=turn_deg, units=100.0, object_scale=0.01)


def daz_genesis8(body: Body | None = None) -> WildRig:
    """Daz Genesis 8: A-pose, Bend/Twist pairs on the limbs, carpal bones, legs under ``pelvis``."""
    b = body or Body(arm_down_deg=45.0, height=1.70)
    sp = b.spine(4)
    bones: list[Bone] = [("hip", None, b.pelvis, b.pelvis - _v(0, 0, 0.12)), ("pelvis", "hip", b.pelvis, b.pelvis - _v(0, 0, 0.15))]
    chain = ["abdomenLower", "abdomenUpper", "chestLower", "chestUpper"]
    for i, n in enumerate(chain):
        bones.append((n, "hip" if i == 0 else chain[i - 1], sp[i], sp[i + 1]))
    mid = _lerp(b.neck_base, b.head_base, 0.5)
    bones += [("neckLower", "chestUpper", b.neck_base, mid), ("neckUpper", "neckLower", mid, b.head_base), ("head", "neckUpper", b.head_base, b.head_top)]
    jaw = b.head_base + _v(0, -0.03, 0.03)
    bones.append(("lowerJaw", "head", jaw, jaw + _v(0, -0.08, -0.03)))
    expected = {"hips": "hip", "spine": "abdomenLower", "chest": "chestLower", "upper_chest": "chestUpper", "neck": "neckLower", "head": "head"}
    for x, s, S in ((1.0, "l", "L"), (-1.0, "r", "R")):
        p = b.side(x)
        bones.append((f"{s}Eye", "head", p["eye"], p["eye"] + _v(0, -0.02, 0)))
        bones.append((f"{s}Collar", "chestUpper", p["clavicle"], p["shoulder"]))
        bones.append((f"{s}ShldrBend", f"{s}Collar", p["shoulder"], _lerp(p["shoulder"], p["elbow"], 0.5)))
        bones.append((f"{s}ShldrTwist", f"{s}ShldrBend", _lerp(p["shoulder"], p["elbow"], 0.5), p["elbow"]))
        bones.append((f"{s}ForearmBend", f"{s}ShldrTwist", p["elbow"], _lerp(p["elbow"], p["wrist"], 0.5)))
        bones.append((f"{s}ForearmTwist", f"{s}ForearmBend", _lerp(p["elbow"], p["wrist"], 0.5), p["wrist"]))
        bones.append((f"{s}Hand", f"{s}ForearmTwist", p["wrist"], p["middle_1"]))
        daz = {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"}
        for c, f in enumerate(("index", "middle", "ring", "little"), start=1):
            bones.append((f"{s}Carpal{c}", f"{s}Hand", p[f + "_meta"], p[f + "_1"]))
        for f in FINGERS:
            parent = f"{s}Hand" if f == "thumb" else f"{s}Carpal{('index', 'middle', 'ring', 'little').index(f) + 1}"
            for k in (1, 2, 3):
                n = f"{s}{daz[f]}{k}"
                bones.append((n, parent, p[f"{f}_{k}"], p[f"{f}_{k + 1}"]))
                parent = n
                expected[f"{f}_{k}.{S}"] = n
        bones.append((f"{s}ThighBend", "pelvis", p["hip"], _lerp(p["hip"], p["knee"], 0.4)))
        bones.append((f"{s}ThighTwist", f"{s}ThighBend", _lerp(p["hip"], p["knee"], 0.4), p["knee"]))
        bones.append((f"{s}Shin", f"{s}ThighTwist", p["knee"], p["ankle"]))
        bones.append((f"{s}Foot", f"{s}Shin", p["ankle"], _lerp(p["ankle"], p["ball"], 0.6)))
        bones.append((f"{s}Metatarsals", f"{s}Foot", p["ankle"] + _v(0, -0.02, -0.04), p["ball"]))
        bones.append((f"{s}Toe", f"{s}Metatarsals", p["ball"], p["toe_tip"]))
        for slot, n in (("shoulder", "Collar"), ("upper_arm", "ShldrBend"), ("forearm", "ForearmBend"), ("hand", "Hand"),
                        ("thigh", "ThighBend"), ("shin", "Shin"), ("foot", "Foot"), ("toes", "Toe")):
            expected[f"{slot}.{S}"] = f"{s}{n}"
    return WildRig("daz_genesis8", bones, expected)


def vroid(body: Body | None = None, turn_deg: float = 0.0) -> WildRig:
    """VRoid Studio / VRM 0.x export: J_Bip_ body, T-pose, and J_Sec_ spring chains (hair from the
    head, a skirt from the hips reaching past the knees' height, bust from the chest)."""
    b = body or Body(height=1.55, leg=0.47, head=1.3)
    sp = b.spine(4)
    bones: list[Bone] = [("Root", None, _v(0, 0, 0), _v(0, 0, 0.1)), ("J_Bip_C_Hips", "Root", b.pelvis, sp[1])]
    chain = ["J_Bip_C_Spine", "J_Bip_C_Chest", "J_Bip_C_UpperChest"]
    for i, n in enumerate(chain):
        bones.append((n, "J_Bip_C_Hips" if i == 0 else chain[i - 1], sp[i + 1], sp[i + 2]))
    bones += [("J_Bip_C_Neck", "J_Bip_C_UpperChest", b.neck_base, b.head_base), ("J_Bip_C_Head", "J_Bip_C_Neck", b.head_base, b.head_top)]
    expected = {"hips": "J_Bip_C_Hips", "spine": "J_Bip_C_Spine", "chest": "J_Bip_C_Chest", "upper_chest": "J_Bip_C_UpperChest",
                "neck": "J_Bip_C_Neck", "head": "J_Bip_C_Head"}
    vr = {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Little"}
    for x, S in ((1.0, "L"), (-1.0, "R")):
        p = b.side(x)
        bones.append((f"J_Adj_{S}_FaceEye", "J_Bip_C_Head", p["eye"], p["eye"] + _v(0, -0.02, 0)))
        for slot, n, parent, h, t in (
            ("shoulder", "Shoulder", "J_Bip_C_UpperChest", p["clavicle"], p["shoulder"]),
            ("upper_arm", "UpperArm", "Shoulder", p["shoulder"], p["elbow"]),
            ("forearm", "LowerArm", "UpperArm", p["elbow"], p["wrist"]),
            ("hand", "Hand", "LowerArm", p["wrist"], p["middle_1"]),
            ("thigh", "UpperLeg", "J_Bip_C_Hips", p["hip"], p["knee"]),
            ("shin", "LowerLeg", "UpperLeg", p["knee"], p["ankle"]),
            ("foot", "Foot", "LowerLeg", p["ankle"], p["ball"]),
            ("toes", "ToeBase", "Foot", p["ball"], p["toe_tip"]),
        ):
            par = parent if parent.startswith("J_") else f"J_Bip_{S}_{parent}"
            bones.append((f"J_Bip_{S}_{n}", par, h, t))
            expected[f"{slot}.{S}"] = f"J_Bip_{S}_{n}"
        for f in FINGERS:
            parent = f"J_Bip_{S}_Hand"
            for k in (1, 2, 3):
                n = f"J_Bip_{S}_{vr[f]}{k}"
                bones.append((n, parent, p[f"{f}_{k}"], p[f"{f}_{k + 1}"]))
                parent = n
                expected[f"{f}_{k}.{S}"] = n
        # Bust springs from the upper chest, pointing forward.
        bust = _v(0.08 * x, -0.08, sp[3][2] - 0.02)
        bones.append((f"J_Sec_{S}_Bust1", "J_Bip_C_UpperChest", bust, bust + _v(0, -0.05, 0)))
        bones.append((f"J_Sec_{S}_Bust2", f"J_Sec_{S}_Bust1", bust + _v(0, -0.05, 0), bust + _v(0, -0.09, 0)))
    # Hair: strands hanging from the head, down the back and the sides to the shoulders.
    n_hair = 0
    for ang in np.linspace(-150, 150, 9):
        a = np.radians(ang)
        root = b.head_base + _v(0.09 * np.sin(a), 0.09 * np.cos(a), 0.17)
        parent = "J_Bip_C_Head"
        n_hair += 1
        for k in range(4):
            h = root + _v(0.02 * np.sin(a) * k, 0.02 * np.cos(a) * k, -0.09 * k)
            name = f"J_Sec_Hair{k + 1}_{n_hair:02d}"
            bones.append((name, parent, h, h + _v(0.02 * np.sin(a), 0.02 * np.cos(a), -0.09)))
            parent = name
    # Skirt: eight chains from the hips reaching below mid-thigh.
    for j, ang in enumerate(np.linspace(0, 360, 8, endpoint=False)):
        a = np.radians(ang)
        root = b.pelvis + _v(0.13 * np.sin(a), 0.10 * np.cos(a), -0.02)
        parent = "J_Bip_C_Hips"
        for k in range(3):
            h = root + _v(0.03 * np.sin(a) * k, 0.02 * np.cos(a) * k, -0.12 * k)
            name = f"J_Sec_Skirt{j:02d}_{k + 1}"
            bones.append((name, parent, h, h + _v(0.03 * np.sin(a), 0.02 * np.cos(a), -0.12)))
            parent = name
    return WildRig("vroid" if turn_deg == 0 else f"vroid_turned{int(turn_deg)}", bones, expected, turn_deg=turn_deg)


def mixamo(body: Body | None = None, spines: int = 3, necks: int = 1, name: str = "mixamo_stylised") -> WildRig:
    """Mixamo (``mixamorig:`` names), by default a stylised body: short legs, long arms, big head.
    ``spines`` 1..3 spine bones, ``necks`` neck bones (extra ones named Neck1, Neck2)."""
    b = body or Body(height=1.2, leg=0.36, arm=1.35, head=1.8)
    pre = "mixamorig:"
    sp = b.spine(spines)
    bones: list[Bone] = [(pre + "Hips", None, b.pelvis, sp[1])]
    sn = ["Spine", "Spine1", "Spine2"][:spines]
    for i, n in enumerate(sn):
        bones.append((pre + n, pre + ("Hips" if i == 0 else sn[i - 1]), sp[i] + _v(0, 0, 0.02 if i == 0 else 0), sp[i + 1]))
    nn = ["Neck"] + [f"Neck{k}" for k in range(1, necks)]
    pts = [_lerp(b.neck_base, b.head_base, t) for t in np.linspace(0, 1, necks + 1)]
    for i, n in enumerate(nn):
        bones.append((pre + n, pre + (sn[-1] if i == 0 else nn[i - 1]), pts[i], pts[i + 1]))
    bones.append((pre + "Head", pre + nn[-1], b.head_base, b.head_top))
    bones.append((pre + "HeadTop_End", pre + "Head", b.head_top, b.head_top + _v(0, 0, 0.05)))
    expected = {"hips": pre + "Hips", "spine": pre + "Spine", "neck": pre + "Neck", "head": pre + "Head"}
    mx = {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Pinky"}
    for x, side, S in ((1.0, "Left", "L"), (-1.0, "Right", "R")):
        p = b.side(x)
        for slot, n, parent, h, t in (
            ("shoulder", "Shoulder", sn[-1], p["clavicle"], p["shoulder"]),
            ("upper_arm", "Arm", "Shoulder", p["shoulder"], p["elbow"]),
            ("forearm", "ForeArm", "Arm", p["elbow"], p["wrist"]),
            ("hand", "Hand", "ForeArm", p["wrist"], p["middle_1"]),
            ("thigh", "UpLeg", "Hips", p["hip"], p["knee"]),
            ("shin", "Leg", "UpLeg", p["knee"], p["ankle"]),
            ("foot", "Foot", "Leg", p["ankle"], p["ball"]),
            ("toes", "ToeBase", "Foot", p["ball"], p["toe_tip"]),
        ):
            par = pre + (parent if parent in sn or parent == "Hips" else side + parent)
            bones.append((pre + side + n, par, h, t))
            expected[f"{slot}.{S}"] = pre + side + n
        bones.append((pre + side + "Toe_End", pre + side + "ToeBase", p["toe_tip"], p["toe_tip"] + _v(0, -0.03, 0)))
        for f in FINGERS:
            parent = pre + side + "Hand"
            for k in (1, 2, 3, 4):
                n = f"{pre}{side}Hand{mx[f]}{k}"
                h = p[f"{f}_{k}"]
                t = p[f"{f}_{k + 1}"] if k < 4 else h + (h - p[f"{f}_{k - 1}"]) * 0.5
                bones.append((n, parent, h, t))
                parent = n
                if k < 4:
                    expected[f"{f}_{k}.{S}"] = n
    return WildRig(name, bones, expected)


def mixamo_fbx_y_up() -> WildRig:
    """The stylised Mixamo rig as an FBX from a Y-up tool imports: centimetres stored Y-up under
    an object turned +90 degrees about X and scaled 0.01."""
    rig = mixamo(name="mixamo_fbx_y_up")
    rig.units, rig.object_scale, rig.y_up = 100.0, 0.01, True
    return rig


def mmd(body: Body | None = None) -> WildRig:
    """MikuMikuDance (PMX) layout with Japanese names: センター below the waist, 上半身 / 下半身
    from the waist, leg IK bones under the root, and the 'D' deform copies of the legs under
    腰キャンセル (same joints as the plain legs)."""
    b = body or Body(height=1.58, leg=0.5, head=1.25)
    waist = b.pelvis + _v(0, 0, 0.04)
    sp = b.spine(2)
    center = _v(0, 0, b.pelvis[2] * 0.62)
    bones: list[Bone] = [
        ("全ての親", None, _v(0, 0, 0), _v(0, 0, 0.1)),
        ("センター", "全ての親", center, center - _v(0, 0, 0.08)),
        ("グルーブ", "センター", center + _v(0, 0, 0.1), center + _v(0, 0, 0.18)),
        ("腰", "グルーブ", waist - _v(0, 0, 0.06), waist),
        ("上半身", "腰", waist, _lerp(waist, b.neck_base, 0.45)),
        ("上半身2", "上半身", _lerp(waist, b.neck_base, 0.45), b.neck_base),
        ("首", "上半身2", b.neck_base, b.head_base),
        ("頭", "首", b.head_base, b.head_top),
        ("下半身", "腰", waist, b.pelvis - _v(0, 0, 0.08)),
    ]
    del sp
    expected = {"hips": "センター", "spine": "上半身", "chest": "上半身2", "neck": "首", "head": "頭"}
    fj = {"thumb": "親指", "index": "人指", "middle": "中指", "ring": "薬指", "little": "小指"}
    digits = "０１２３"
    for x, jp, S in ((1.0, "左", "L"), (-1.0, "右", "R")):
        p = b.side(x)
        bones.append((f"{jp}目", "頭", p["eye"], p["eye"] + _v(0, -0.02, 0)))
        bones.append((f"{jp}肩", "上半身2", p["clavicle"], p["shoulder"]))
        bones.append((f"{jp}腕", f"{jp}肩", p["shoulder"], p["elbow"]))
        bones.append((f"{jp}腕捩", f"{jp}腕", _lerp(p["shoulder"], p["elbow"], 0.5), _lerp(p["shoulder"], p["elbow"], 0.7)))
        bones.append((f"{jp}ひじ", f"{jp}腕", p["elbow"], p["wrist"]))
        bones.append((f"{jp}手捩", f"{jp}ひじ", _lerp(p["elbow"], p["wrist"], 0.5), _lerp(p["elbow"], p["wrist"], 0.7)))
        bones.append((f"{jp}手首", f"{jp}ひじ", p["wrist"], p["middle_1"]))
        for f in FINGERS:
            parent = f"{jp}手首"
            first = 0 if f == "thumb" else 1
            for k in (1, 2, 3):
                n = f"{jp}{fj[f]}{digits[first + k - 1]}"
                bones.append((n, parent, p[f"{f}_{k}"], p[f"{f}_{k + 1}"]))
                parent = n
                expected[f"{f}_{k}.{S}"] = n
        cancel = f"腰キャンセル{jp}"
        bones.append((cancel, "下半身", p["hip"], p["hip"] + _v(0, 0, -0.03)))
        bones.append((f"{jp}足", "下半身", p["hip"], p["knee"]))
        bones.append((f"{jp}ひざ", f"{jp}足", p["knee"], p["ankle"]))
        bones.append((f"{jp}足首", f"{jp}ひざ", p["ankle"], p["ball"]))
        bones.append((f"{jp}つま先", f"{jp}足首", p["ball"], p["toe_tip"]))
        bones.append((f"{jp}足D", cancel, p["hip"], p["knee"]))
        bones.append((f"{jp}ひざD", f"{jp}足D", p["knee"], p["ankle"]))
        bones.append((f"{jp}足首D", f"{jp}ひざD", p["ankle"], p["ball"]))
        bones.append((f"{jp}足先EX", f"{jp}足首D", p["ball"], p["toe_tip"]))
        bones.append((f"{jp}足IK親", "全ての親", p["ankle"] * _v(1, 1, 0), p["ankle"] * _v(1, 1, 0) + _v(0, 0, 0.05)))
        bones.append((f"{jp}足ＩＫ", f"{jp}足IK親", p["ankle"], p["ankle"] + _v(0, 0.1, 0)))
        bones.append((f"{jp}つま先ＩＫ", f"{jp}足ＩＫ", p["toe_tip"], p["toe_tip"] - _v(0, 0, 0.1)))
        for slot, n in (("shoulder", "肩"), ("upper_arm", "腕"), ("forearm", "ひじ"), ("hand", "手首"),
                        ("thigh", "足"), ("shin", "ひざ"), ("foot", "足首"), ("toes", "つま先")):
            expected[f"{slot}.{S}"] = f"{jp}{n}"
    return WildRig("mmd", bones, expected, units=12.5)


def rigify_def(body: Body | None = None, detached: bool = False) -> WildRig:
    """A Rigify generated rig's deform bones only. Rigify chains a limb's DEF bones through their
    B-Bone segments (DEF-forearm under DEF-upper_arm.001, DEF-shin under DEF-thigh.001); the first
    bone of each limb and the shoulders hang from ORG/MCH bones, so with only DEF bones kept
    (``detached``) they lose their parent and become roots of their own."""
    b = body or Body(height=1.8, arm_down_deg=10.0)
    sp = b.spine(4)
    bones: list[Bone] = []
    chain = ["DEF-spine", "DEF-spine.001", "DEF-spine.002", "DEF-spine.003"]
    hips_top = sp[1]
    pts = [b.pelvis - _v(0, 0, 0.0)] + sp[1:]
    for i, n in enumerate(chain):
        bones.append((n, None if i == 0 else chain[i - 1], pts[i], pts[i + 1]))
    del hips_top
    mid = _lerp(b.neck_base, b.head_base, 0.5)
    bones += [("DEF-spine.004", "DEF-spine.003", b.neck_base, mid), ("DEF-spine.005", "DEF-spine.004", mid, b.head_base),
              ("DEF-spine.006", "DEF-spine.005", b.head_base, b.head_top)]
    expected = {"hips": "DEF-spine", "spine": "DEF-spine.001", "chest": "DEF-spine.002", "upper_chest": "DEF-spine.003",
                "neck": "DEF-spine.004", "head": "DEF-spine.006"}
    rf = {"thumb": "thumb", "index": "f_index", "middle": "f_middle", "ring": "f_ring", "little": "f_pinky"}
    for x, S in ((1.0, "L"), (-1.0, "R")):
        p = b.side(x)
        top = None if detached else "DEF-spine.003"
        bones.append((f"DEF-breast.{S}", "DEF-spine.003", _v(0.1 * x, -0.08, sp[3][2]), _v(0.1 * x, -0.16, sp[3][2])))
        bones.append((f"DEF-pelvis.{S}", "DEF-spine", b.pelvis, b.pelvis + _v(0.14 * x, -0.08, 0.1)))
        bones.append((f"DEF-shoulder.{S}", top, p["clavicle"], p["shoulder"]))
        ua, fa = p["shoulder"], p["elbow"]
        bones.append((f"DEF-upper_arm.{S}", None if detached else f"DEF-shoulder.{S}", ua, _lerp(ua, fa, 0.5)))
        bones.append((f"DEF-upper_arm.{S}.001", f"DEF-upper_arm.{S}", _lerp(ua, fa, 0.5), fa))
        bones.append((f"DEF-forearm.{S}", f"DEF-upper_arm.{S}.001", fa, _lerp(fa, p["wrist"], 0.5)))
        bones.append((f"DEF-forearm.{S}.001", f"DEF-forearm.{S}", _lerp(fa, p["wrist"], 0.5), p["wrist"]))
        bones.append((f"DEF-hand.{S}", f"DEF-forearm.{S}.001", p["wrist"], p["middle_1"]))
        for c, f in enumerate(("index", "middle", "ring", "little"), start=1):
            bones.append((f"DEF-palm.0{c}.{S}", f"DEF-hand.{S}", p[f + "_meta"], p[f + "_1"]))
        for f in FINGERS:
            parent = f"DEF-hand.{S}" if f == "thumb" else f"DEF-palm.0{('index', 'middle', 'ring', 'little').index(f) + 1}.{S}"
            for k in (1, 2, 3):
                n = f"DEF-{rf[f]}.0{k}.{S}"
                bones.append((n, parent, p[f"{f}_{k}"], p[f"{f}_{k + 1}"]))
                parent = n
                expected[f"{f}_{k}.{S}"] = n
        th, kn = p["hip"], p["knee"]
        bones.append((f"DEF-thigh.{S}", None if detached else "DEF-spine", th, _lerp(th, kn, 0.5)))
        bones.append((f"DEF-thigh.{S}.001", f"DEF-thigh.{S}", _lerp(th, kn, 0.5), kn))
        bones.append((f"DEF-shin.{S}", f"DEF-thigh.{S}.001", kn, _lerp(kn, p["ankle"], 0.5)))
        bones.append((f"DEF-shin.{S}.001", f"DEF-shin.{S}", _lerp(kn, p["ankle"], 0.5), p["ankle"]))
        bones.append((f"DEF-foot.{S}", f"DEF-shin.{S}.001", p["ankle"], p["ball"]))
        bones.append((f"DEF-toe.{S}", f"DEF-foot.{S}", p["ball"], p["toe_tip"]))
        for slot, n in (("shoulder", "shoulder"), ("upper_arm", "upper_arm"), ("forearm", "forearm"), ("hand", "hand"),
                        ("thigh", "thigh"), ("shin", "shin"), ("foot", "foot"), ("toes", "toe")):
            expected[f"{slot}.{S}"] = f"DEF-{n}.{S}"
    return WildRig("rigify_def_detached" if detached else "rigify_def", bones, expected)


def families() -> dict[str, WildRig]:
    rigs = [
        unreal_mannequin(),
        unreal_mannequin(turn_deg=0.0),
        daz_genesis8(),
        vroid(),
        vroid(turn_deg=180.0),
        mixamo(),
        mixamo_fbx_y_up(),
        mixamo(spines=1, name="mixamo_one_spine", body=Body()),
        mixamo(spines=3, necks=3, name="mixamo_three_necks", body=Body()),
        mmd(),
        rigify_def(),
        rigify_def(detached=True),
    ]
    return {r.name: r for r in rigs}


def renamed(rig: WildRig, how: str) -> WildRig:
    """The same rig renamed: ``"no names"`` (``joint1``, ``joint2``, ... as a Maya scene left with
    its default names: structure and joints alone decide), ``"prefixed"`` (``Character1_`` before
    every name, the namespace taken off) or ``"copy numbers"`` (``.001`` after every name, as on
    a joined armature)."""
    rename = {
        "no names": lambda i, n: f"joint{i + 1}",
        "prefixed": lambda i, n: "Character1_" + n.rpartition(":")[2],
        "copy numbers": lambda i, n: n + ".001",
    }[how]
    ren = {b[0]: rename(i, b[0]) for i, b in enumerate(rig.bones)}
    bones = [(ren[n], None if p is None else ren[p], h, t) for n, p, h, t in rig.bones]
    expected = {slot: ren[b] for slot, b in rig.expected.items()}
    return WildRig(f"{rig.name} ({how})", bones, expected, rig.turn_deg, rig.units, rig.object_scale, rig.y_up)


def build(bpy, rig: WildRig):
    """The rig as a Blender armature object (edit bones from the table), linked to the scene."""
    from mathutils import Matrix

    c, s = np.cos(np.radians(rig.turn_deg)), np.sin(np.radians(rig.turn_deg))
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    x_turn = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # +90 degrees about X
    if rig.y_up:
        turn = x_turn.T @ turn
    data = bpy.data.armatures.new(rig.name)
    obj = bpy.data.objects.new(rig.name, data)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    made = {}
    for name, parent, head, tail in rig.bones:
        eb = data.edit_bones.new(name)
        eb.head = tuple(turn @ head * rig.units)
        eb.tail = tuple(turn @ tail * rig.units)
        if parent is not None:
            eb.parent = made[parent]
        made[name] = eb
    bpy.ops.object.mode_set(mode="OBJECT")
    world = np.eye(4)
    world[:3, :3] = (x_turn if rig.y_up else np.eye(3)) * rig.object_scale
    obj.matrix_world = Matrix(world.tolist())
    bpy.context.view_layer.update()
    return obj

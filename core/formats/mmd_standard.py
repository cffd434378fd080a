"""A built-in MMD skeleton with MMD's standard bone names, for playing a VMD motion when the model
it was made for is not at hand.

A VMD key is local to the rest of the bone it names in *some* model; without that model the
motion needs a skeleton of the same layout. :func:`standard_model` builds one as a
:class:`~core.formats.pmx.PmxModel` (so :func:`~core.formats.pmx_rig.build_rig` turns it into a
rig exactly as it turns a file): MMD's standard bones (全ての親, センター, グルーブ, 下半身, 上半身,
上半身2, 首, 頭, 肩, 腕, ひじ, 手首, the fingers, 足, ひざ, 足首, つま先), the arm and hand twist bones
that motions key (腕捩, 手捩, with fixed axes along the arm), and the leg IK bones (足IK親, 足ＩＫ,
つま先ＩＫ) with MMD's usual chains (knee bending one way about X).

Where the proportions come from. The joint positions are *measured*, not invented: they are the
bone heads of the VRM humanoid in the VRM Add-on for Blender's test resources
(saturday06/VRM-Addon-for-Blender, MIT; the file ``tests/data/blend/vrm_addon_apose_rest.blend``
of this repository), read from its rest in Blender (metres, +Z up, facing -Y), left side as
measured and right side its mirror, converted to MMD units at the importer's 0.08 m per unit
(``(x, y, z)_mmd = (x, z, y)_blender / 0.08``), so the skeleton stands 1.70 m tall once built at
the default scale, its arms 44.5 degrees below horizontal as that humanoid's are. The VRM bones
map one to one onto MMD's (hips, spine, chest, neck, head; shoulder, upper arm, lower arm, hand;
thumb proximal/intermediate/distal as 親指０/１/２, the other fingers' as 指１/２/３; upper leg,
lower leg, foot). Four placements are choices, not measurements, and said as such:

* センター and グルーブ sit at the measured hips' head (the whole body's pivot); 下半身 and 上半身
  start at the measured spine's head (MMD's waist), 下半身 pointing down to the hips' head;
* つま先 is the measured toes' tail (the tip of the foot, on the floor);
* 腕捩 and 手捩 sit halfway along the upper arm and the forearm.

A motion keyed for a model of other proportions plays its rotations as keyed; its センター
travel is in that model's units, which the retarget scales by hip height like any clip. A model
whose arms rest at another angle than 44.5 degrees plays its arms that much apart from the
motion's author's model: ``--vmd-model`` gives the real model when it is at hand.
"""

from __future__ import annotations

import math

import numpy as np

from ..rig.rotations import FloatArray
from .pmx import BoneFlag, PmxBone, PmxIK, PmxIKLink, PmxModel

#: Metres per MMD unit used to convert the measured positions (the importer's default).
MEASURED_SCALE = 0.08

# Bone heads measured on the VRM humanoid (metres, Blender axes: +X its left, -Y its front, +Z up).
_HIPS = (0.0, 0.0, 0.8500)
_SPINE = (0.0, 0.0, 1.0094)
_CHEST = (0.0, 0.0, 1.1292)
_NECK = (0.0, 0.0, 1.4167)
_HEAD = (0.0, 0.0, 1.5583)
_HEAD_TOP = (0.0, 0.0, 1.7000)
_LEFT = {
    "肩": (0.0250, 0.0, 1.4167),
    "腕": (0.0932, 0.0, 1.4178),
    "ひじ": (0.3207, 0.0, 1.1946),
    "手首": (0.5028, 0.0, 1.0160),
    "手首先": (0.5597, 0.0, 0.9602),
    "親指０": (0.5028, -0.0299, 1.0160),
    "親指１": (0.5202, -0.0542, 0.9989),
    "親指２": (0.5332, -0.0725, 0.9861),
    "親指先": (0.5430, -0.0862, 0.9765),
    "人指１": (0.5597, -0.0299, 0.9602),
    "人指２": (0.5807, -0.0299, 0.9395),
    "人指３": (0.5965, -0.0299, 0.9240),
    "人指先": (0.6083, -0.0299, 0.9124),
    "中指１": (0.5597, -0.0100, 0.9602),
    "中指２": (0.5843, -0.0100, 0.9361),
    "中指３": (0.6027, -0.0100, 0.9180),
    "中指先": (0.6165, -0.0100, 0.9044),
    "薬指１": (0.5597, 0.0100, 0.9602),
    "薬指２": (0.5807, 0.0100, 0.9395),
    "薬指３": (0.5965, 0.0100, 0.9240),
    "薬指先": (0.6083, 0.0100, 0.9124),
    "小指１": (0.5597, 0.0299, 0.9602),
    "小指２": (0.5756, 0.0299, 0.9446),
    "小指３": (0.5875, 0.0299, 0.9328),
    "小指先": (0.5965, 0.0299, 0.9240),
    "足": (0.0531, 0.0, 0.9297),
    "ひざ": (0.0531, 0.0, 0.5073),
    "足首": (0.0531, 0.0, 0.0850),
    "つま先": (0.0531, -0.2600, 0.0),
}
#: The fingers, each from its first bone to its tip (the tip is not a bone).
_FINGERS = (("親指０", "親指１", "親指２"), ("人指１", "人指２", "人指３"), ("中指１", "中指２", "中指３"), ("薬指１", "薬指２", "薬指３"), ("小指１", "小指２", "小指３"))
_TIPS = {"親指０": "親指先", "人指１": "人指先", "中指１": "中指先", "薬指１": "薬指先", "小指１": "小指先"}

#: MMD's leg IK: knee limits in model axes (a hinge about X bending the shin back), loops, angle.
KNEE_LIMIT_MIN = (-math.pi, 0.0, 0.0)
KNEE_LIMIT_MAX = (math.radians(-0.5), 0.0, 0.0)
LEG_IK_LOOPS, LEG_IK_ANGLE = 40, 2.0
TOE_IK_LOOPS, TOE_IK_ANGLE = 3, 4.0

_ROTATE = BoneFlag.ROTATABLE | BoneFlag.VISIBLE | BoneFlag.ENABLED
_MOVE = _ROTATE | BoneFlag.TRANSLATABLE


def _mmd(p: tuple[float, float, float]) -> FloatArray:
    """A measured Blender point in MMD units and axes."""
    x, y, z = p
    return np.array([x, z, y]) / MEASURED_SCALE


def _side(name: str, left: bool) -> tuple[float, float, float]:
    x, y, z = _LEFT[name]
    return (x, y, z) if left else (-x, y, z)


def standard_model() -> PmxModel:
    """The built-in standard skeleton as a PMX model (bones only; see the module docstring)."""
    bones: list[PmxBone] = []
    index: dict[str, int] = {}

    def add(
        name: str, english: str, head: FloatArray, parent: str | None, flags: BoneFlag = _ROTATE, *,
        tail: FloatArray | None = None, layer: int = 0, fixed_axis: FloatArray | None = None, ik: PmxIK | None = None,
    ) -> None:
        index[name] = len(bones)
        bones.append(
            PmxBone(
                name=name, name_english=english, position=head, parent=-1 if parent is None else index[parent], layer=layer,
                flags=flags | (BoneFlag.FIXED_AXIS if fixed_axis is not None else 0) | (BoneFlag.IK if ik is not None else 0),
                tail_offset=np.zeros(3) if tail is None else tail - head, fixed_axis=fixed_axis, ik=ik,
            )
        )

    hips, spine = _mmd(_HIPS), _mmd(_SPINE)
    add("全ての親", "mother", np.zeros(3), None, _MOVE, tail=np.array([0.0, 4.0, 0.0]))
    add("センター", "center", hips, "全ての親", _MOVE, tail=hips - [0.0, 2.0, 0.0])
    add("グルーブ", "groove", hips, "センター", _MOVE, tail=hips - [0.0, 1.5, 0.0])
    add("下半身", "lower body", spine, "グルーブ", tail=hips)
    add("上半身", "upper body", spine, "グルーブ", tail=_mmd(_CHEST))
    add("上半身2", "upper body2", _mmd(_CHEST), "上半身", tail=_mmd(_NECK))
    add("首", "neck", _mmd(_NECK), "上半身2", tail=_mmd(_HEAD))
    add("頭", "head", _mmd(_HEAD), "首", tail=_mmd(_HEAD_TOP))
    for left in (True, False):
        s, e = ("左", "_L") if left else ("右", "_R")

        def at(name: str, left: bool = left) -> FloatArray:
            return _mmd(_side(name, left))

        arm, elbow, wrist = at("腕"), at("ひじ"), at("手首")
        add(s + "肩", "shoulder" + e, at("肩"), "上半身2", tail=arm)
        add(s + "腕", "arm" + e, arm, s + "肩", tail=elbow)
        upper_axis = (elbow - arm) / np.linalg.norm(elbow - arm)
        add(s + "腕捩", "arm twist" + e, 0.5 * (arm + elbow), s + "腕", tail=elbow, fixed_axis=upper_axis)
        add(s + "ひじ", "elbow" + e, elbow, s + "腕捩", tail=wrist)
        fore_axis = (wrist - elbow) / np.linalg.norm(wrist - elbow)
        add(s + "手捩", "wrist twist" + e, 0.5 * (elbow + wrist), s + "ひじ", tail=wrist, fixed_axis=fore_axis)
        add(s + "手首", "wrist" + e, wrist, s + "手捩", tail=at("手首先"))
        for finger in _FINGERS:
            parent = s + "手首"
            for k, name in enumerate(finger):
                nxt = at(finger[k + 1]) if k + 1 < len(finger) else at(_TIPS[finger[0]])
                add(s + name, name + e, at(name), parent, tail=nxt)
                parent = s + name
        add(s + "足", "leg" + e, at("足"), "下半身", tail=at("ひざ"))
        add(s + "ひざ", "knee" + e, at("ひざ"), s + "足", tail=at("足首"))
        add(s + "足首", "ankle" + e, at("足首"), s + "ひざ", tail=at("つま先"))
        add(s + "つま先", "toe" + e, at("つま先"), s + "足首", tail=at("つま先") - [0.0, 0.0, 1.0])
    for left in (True, False):
        s, e = ("左", "_L") if left else ("右", "_R")
        ankle, toe = _mmd(_side("足首", left)), _mmd(_side("つま先", left))
        knee = PmxIKLink(index[s + "ひざ"], np.array(KNEE_LIMIT_MIN), np.array(KNEE_LIMIT_MAX))
        leg_ik = PmxIK(index[s + "足首"], LEG_IK_LOOPS, LEG_IK_ANGLE, (knee, PmxIKLink(index[s + "足"])))
        floor = ankle * [1.0, 0.0, 1.0]
        add(s + "足IK親", "leg IK parent" + e, floor, "全ての親", _MOVE, tail=ankle, layer=1)
        add(s + "足ＩＫ", "leg IK" + e, ankle, s + "足IK親", _MOVE, tail=ankle + [0.0, 0.0, 1.0], layer=1, ik=leg_ik)
        toe_ik = PmxIK(index[s + "つま先"], TOE_IK_LOOPS, TOE_IK_ANGLE, (PmxIKLink(index[s + "足首"]),))
        add(s + "つま先ＩＫ", "toe IK" + e, toe, s + "足ＩＫ", _MOVE, tail=toe + [0.0, -1.0, 0.0], layer=1, ik=toe_ik)
    return PmxModel(
        path="<standard MMD skeleton>", version=2.0, encoding="utf-16-le",
        index_sizes={"vertex": 4, "texture": 1, "material": 1, "bone": 2, "morph": 1, "rigid body": 1}, additional_uvs=0,
        name="MMD標準ボーン", name_english="Standard MMD skeleton", comment="", comment_english="", bones=tuple(bones),
    )

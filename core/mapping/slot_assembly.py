"""Slots as they are decided, with their evidence, turned into a
:class:`~core.mapping.bone_mapping.BoneMapping`; and the upright check every mapping goes through
(a humanoid's spine continues its legs upward).

Confidence is in [0, 1]: about 0.97 when a convention's name rule and the structure agree, 0.75
for structure alone, lower where evidence is weak or contradictory.
"""

from __future__ import annotations

import numpy as np

from .analysis_tree import AnalysedRig
from .bone_mapping import BoneMapping, MappedBone
from .humanoid import SIDES, sided
from .limb_ends import angle_deg, unit
from .name_hints import region_of


class SlotAssembly:
    """Slots as they are decided, with their evidence; turned into a :class:`BoneMapping`."""

    def __init__(self, rig: AnalysedRig) -> None:
        self.rig = rig
        self.slots: dict[str, tuple[int, float, str]] = {}
        self.conflicts: list[str] = []
        self.conv = rig.convention.key if rig.convention is not None else None

    def put(self, slot: str, bone: int, why: str, base: float = 0.75, structural: bool = True) -> None:
        if slot in self.slots or any(b == bone for b, _, _ in self.slots.values()):
            return
        h = self.rig.hints[bone]
        part = slot.partition(".")[0]
        named_here = h.slot == slot or (h.slot is None and part in h.parts)
        if h.finger and part.split("_")[0] == h.finger:
            named_here = True
        if not structural:
            conf, reason = base, why
        elif named_here and h.source and h.source != "keyword":
            conf, reason = 0.97, f"name rule {h.source}; {why}"
        elif named_here:
            conf, reason = 0.88, f"structure: {why}; name agrees"
        elif h.region is not None and h.region == region_of(part) and not h.parts and not h.finger:
            # glTF's generic names ("arm_joint_L_1") say which limb, not which segment.
            where = {"axial": "spine and head"}.get(h.region, h.region)
            conf, reason = 0.8, f"structure: {why}; name places it in the {where}"
        elif h.weight >= 0.6 and (h.slot is not None or h.parts) and not named_here:
            conf, reason = 0.5, f"structure: {why} (its name suggests otherwise)"
        else:
            conf, reason = base, f"structure: {why}"
        self.slots[slot] = (bone, conf, reason)

    def lower(self, slot: str, by: float, note: str) -> None:
        if slot in self.slots:
            b, c, r = self.slots[slot]
            self.slots[slot] = (b, max(0.05, c - by), f"{r}; {note}")

    def mapping(self, refusal: str | None = None) -> BoneMapping:
        names = self.rig.names
        slots = {s: MappedBone(names[b], round(c, 3), r) for s, (b, c, r) in self.slots.items()}
        return BoneMapping(slots, self.conflicts, self.conv, refusal)


def upright_refusal(rig: AnalysedRig, asm: SlotAssembly) -> str | None:
    """A humanoid's spine continues its legs upward; a quadruped's runs across them."""
    s = {slot: b for slot, (b, _, _) in asm.slots.items()}
    top = s.get("head", s.get("neck", -1))
    if "hips" not in s or top < 0:
        return None
    legs = [
        rig.heads[s[sided("foot", k)]] - rig.heads[s[sided("thigh", k)]]
        for k in SIDES
        if sided("foot", k) in s and sided("thigh", k) in s
    ]
    if not legs:
        legs = [
            rig.ends[s[sided("shin", k)]] - rig.heads[s[sided("thigh", k)]]
            for k in SIDES
            if sided("shin", k) in s and sided("thigh", k) in s
        ]
    if not legs:
        return None
    down = unit(np.mean([unit(v) for v in legs], axis=0))
    spine = rig.heads[top] - rig.heads[s["hips"]]
    angle = angle_deg(spine, -down)
    if angle > 50.0:
        return (
            f"its spine runs {angle:.0f} degrees away from the line of its legs (a humanoid's spine continues "
            "its legs upward, a quadruped's runs across them), so it has no upright spine from the hips to the head"
        )
    return None

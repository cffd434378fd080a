"""A rig mapped from its names alone, when its structure shows no mirrored legs and arms.

Only what the hierarchy does not contradict is kept, with confidence at most 0.5 and a reason
that says so; a rig with no bone named as a body part is refused.
"""

from __future__ import annotations

from .analysis_tree import AnalysedRig
from .bone_mapping import BoneMapping
from .humanoid import AXIAL, SLOT_PARENT, SLOTS, sided
from .slot_assembly import SlotAssembly, upright_refusal


def map_by_names(rig: AnalysedRig) -> BoneMapping:
    """Mapping from names alone, when the structure shows no mirrored legs and arms: only what
    the hierarchy does not contradict."""
    asm = SlotAssembly(rig)
    idx = {}
    for i, h in enumerate(rig.hints):
        if not rig.keep[i] or h.weight < 0.6:
            continue
        if h.slot is not None:
            slot = h.slot
        elif len(h.parts) == 1:
            part = next(iter(h.parts))
            if part in AXIAL:
                slot = part
            elif h.side is not None:
                slot = sided(part, h.side)
            else:
                continue
        else:
            continue
        if slot not in idx:
            idx[slot] = i
    for slot in SLOTS:
        if slot not in idx:
            continue
        b = idx[slot]
        p = SLOT_PARENT[slot]
        while p is not None and p not in asm.slots:
            p = SLOT_PARENT[p]
        if p is not None and rig.is_ancestor(b, asm.slots[p][0]):
            asm.conflicts.append(
                f"{rig.names[b]!r} is named as {slot} but sits above {rig.names[asm.slots[p][0]]!r} ({p}); chain out of order"
            )
            continue
        src = rig.hints[b].source
        asm.put(slot, b, f"name rule {src} (structure not recognised; side from the name)", base=0.5, structural=False)
    refusal = None
    if not asm.slots:
        refusal = f"no mirrored pair of legs and arms among its {rig.n} bones and no bone named as a body part"
    else:
        refusal = upright_refusal(rig, asm)
    return asm.mapping(refusal)

"""Whether a rig can be retargeted as a humanoid, with its mapping (automatic, edited or loaded):
the one check the retarget, the batch and the command line go through before moving a bone.

A refusal names the missing slots, the nearest bones passed over for each and why, and how to
fix it (:meth:`~core.mapping.bone_mapping.BoneMapping.refusal_message`); a mapping given by hand is
re-checked against the rig's positions (a body that is not upright is refused).
"""

from __future__ import annotations

from collections.abc import Sequence

from numpy.typing import ArrayLike

from ..errors import MappingError
from ..rig.skeleton import Skeleton
from .analysis_tree import AnalysedRig
from .auto_map import auto_map
from .bone_mapping import BoneMapping
from .slot_assembly import SlotAssembly, upright_refusal


def check_humanoid(
    names: Sequence[str],
    parents: ArrayLike,
    heads: ArrayLike,
    tails: ArrayLike | None = None,
    mapping: BoneMapping | None = None,
) -> BoneMapping:
    """The rig's mapping (``mapping`` or an automatic one), or :class:`MappingError` when the
    rig cannot be retargeted as a humanoid: missing slots named, or a body that is not upright."""
    if mapping is None:
        mapping = auto_map(names, parents, heads, tails)
    else:
        rig = AnalysedRig(names, parents, heads, tails)
        index = {n: i for i, n in enumerate(rig.names)}
        asm = SlotAssembly(rig)
        for slot, mb in mapping.slots.items():
            if mb.bone not in index:
                raise MappingError(f"the mapping names bone {mb.bone!r} ({slot}), which is not in the rig")
            asm.slots[slot] = (index[mb.bone], mb.confidence, mb.reason)
        refusal = mapping.refusal or upright_refusal(rig, asm)
        mapping = BoneMapping(mapping.slots, mapping.conflicts, mapping.convention, refusal, mapping.methods)
    mapping.require_humanoid()
    return mapping


def check_humanoid_skeleton(
    skeleton: Skeleton, tails: ArrayLike | None = None, mapping: BoneMapping | None = None
) -> BoneMapping:
    heads = skeleton.rest_placements()[:, :3, 3]
    return check_humanoid(skeleton.names, skeleton.parents, heads, tails, mapping)

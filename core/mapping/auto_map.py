"""Automatic humanoid bone mapping: which bone of a rig fills which slot of the canonical profile
(docs/mapping.md). The entry point for every rig: :func:`auto_map` on arrays, :func:`auto_map_skeleton`
on a :class:`~core.rig.skeleton.Skeleton`.

* Inputs are plain arrays: ``names`` (B), ``parents`` (B,) indices with ``-1`` for a root, in any
  order, and skeleton-space rest ``heads`` / ``tails`` (B, 3) in any units, any up axis and any
  facing: a Z-up clip lying on its back and a character facing +X map the same way.
* Name rules are data (:mod:`core.mapping.conventions`): for each naming convention, the bone
  names of each slot and the bones it deliberately leaves out (:mod:`core.mapping.name_hints`
  reads them).
* Structure decides, names advise (:mod:`core.mapping.map_by_shape`): limb chains are found as
  mirrored pairs of subtrees (:mod:`core.mapping.mirrored_limbs`), each cut into its slots by
  lengths, straightness and where it branches (:mod:`core.mapping.limb_cuts`).
* When the structure is not recognised (no mirrored legs and arms), names alone map the rig
  (:mod:`core.mapping.map_by_names`), with confidence at most 0.5 and a reason that says so.
* A rig that is not a humanoid gets a mapping whose :attr:`BoneMapping.refusal` says why (a
  quadruped's spine runs across its legs instead of continuing them upward), and
  :meth:`BoneMapping.require_humanoid` refuses it naming what is missing;
  :func:`core.mapping.humanoid_check.check_humanoid` re-checks an edited or loaded mapping
  against the rig's positions.
"""

from __future__ import annotations

from collections.abc import Sequence

from numpy.typing import ArrayLike

from ..rig.skeleton import Skeleton
from .analysis_tree import AnalysedRig
from .bone_mapping import BoneMapping
from .map_by_names import map_by_names
from .map_by_shape import map_with_body
from .mirrored_limbs import find_body


def auto_map(names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None = None) -> BoneMapping:
    """Map a rig onto the humanoid profile from names, hierarchy and rest positions.

    ``parents`` are indices (``-1`` for roots, any order), ``heads``/``tails`` skeleton-space rest
    positions ``(B, 3)``; without tails a bone ends at its children's mean head. Never raises for a
    non-humanoid: the result carries :attr:`BoneMapping.refusal` and missing slots, and
    :meth:`BoneMapping.require_humanoid` refuses it.
    """
    if len(names) == 0:
        return BoneMapping(refusal="the armature has no bones")
    rig = AnalysedRig(names, parents, heads, tails)
    body = find_body(rig)
    if body is None:
        return map_by_names(rig)
    return map_with_body(rig, body)


def auto_map_skeleton(skeleton: Skeleton, tails: ArrayLike | None = None) -> BoneMapping:
    """:func:`auto_map` on a :class:`~core.rig.skeleton.Skeleton` (rest heads from its placements;
    ``tails`` in the skeleton's bone order)."""
    heads = skeleton.rest_placements()[:, :3, 3]
    return auto_map(skeleton.names, skeleton.parents, heads, tails)

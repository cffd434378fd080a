"""The target skeleton as the body hangs together (docs/control_rigs.md#the-body-skeleton).

A control rig's armature hierarchy is not its body's: Rigify's neck hangs from the FK spine's
controls, its fingers from the palm bones under the deform hand. The retarget keeps a bone it is
given no motion for (a finger of a clip without fingers) at rest under its armature parent, and
places a bone's head where that parent carries it; under a parent the retarget does not move,
both are wrong on the body. :func:`body_skeleton` re-parents each mapped bone onto the bone of
its body parent, so the retarget's placements are the body's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from ..retarget.geometric import RigInput
from ..rig.skeleton import Skeleton


def body_skeleton(skeleton: Skeleton, anchors: Mapping[str, str], keep: Collection[str] | None = None) -> Skeleton:
    """``skeleton`` with each bone of ``anchors`` (bone -> its body parent) hung from that
    parent instead, where that makes no loop; rests and placement unchanged. With ``keep``, only
    those bones and the bones they hang from (the rest of a control rig's 700 bones play no part
    in the retarget)."""
    names = list(skeleton.names)
    parents: list[str | None] = [names[int(p)] if p >= 0 else None for p in skeleton.parents]
    for bone, parent in anchors.items():
        i, j = skeleton.find(bone), skeleton.find(parent)
        if i is None or j is None or i == j:
            continue
        if i in skeleton.ancestors(j) or parents[i] == parent:  # a loop, or already so
            continue
        parents[i] = parent
        # The new parent may hang below a bone whose parent changed already: check the chain.
        k, seen = parent, {bone}
        while k is not None and k not in seen:
            seen.add(k)
            k = parents[names.index(k)]  # type: ignore[assignment]
        if k is not None:  # a loop through earlier changes: keep the armature's parent
            parents[i] = names[int(skeleton.parents[i])] if skeleton.parents[i] >= 0 else None
    rest = skeleton.rest_placements()
    if keep is not None:
        at = {n: k for k, n in enumerate(names)}
        kept: set[str] = set()
        for name in keep:
            up: str | None = name
            while up is not None and up not in kept:
                kept.add(up)
                up = parents[at[up]]
        pick = [k for k, n in enumerate(names) if n in kept]
        names, parents, rest = [names[k] for k in pick], [parents[k] for k in pick], rest[pick]
    return Skeleton.from_rest_matrices(names, parents, rest, placement=skeleton.placement)


def body_rig_input(rig: RigInput, anchors: Mapping[str, str], keep: Collection[str] | None = None) -> RigInput:
    """``rig`` on its :func:`body_skeleton` (its bone ends in the new order)."""
    body = body_skeleton(rig.skeleton, anchors, keep)
    ends = None if rig.ends is None else np.asarray(rig.ends, dtype=np.float64)[[rig.skeleton.index(n) for n in body.names]]
    return RigInput(body, dict(rig.slots), ends)

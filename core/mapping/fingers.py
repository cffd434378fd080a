"""Fingers of a hand (docs/mapping.md): by name where the names say which finger, else by structure --
the thumb is the chain starting nearest the wrist, the others are counted from it along the
knuckle line. Props held in the hand (a chain far longer than the others, or than the forearm)
are not fingers. Plain numpy on the mapper's rig; no Blender."""

from __future__ import annotations

import numpy as np

from ..rig.rotations import FloatArray
from .humanoid import finger_slot
from .limb_ends import RigLike, angle_deg
from .limb_ends import unit as _unit


def finger_chains(rig: RigLike, hand: int) -> list[list[int]]:
    """Chains of bones leaving the hand, split where a palm bone carries several fingers."""
    chains: list[list[int]] = []
    stack = list(rig.akids[hand])
    while stack:
        chain = [stack.pop()]
        while True:
            while len(rig.akids[chain[-1]]) == 1:
                chain.append(rig.akids[chain[-1]][0])
            stray = _stray_child(rig, hand, chain[-1])
            if stray is None:
                break
            stack.append(stray)  # a thumb hung from a finger's first bone starts its own chain
            chain.append(next(k for k in rig.akids[chain[-1]] if k != stray))
        kids = rig.akids[chain[-1]]
        if kids:
            stack.extend(kids)  # a palm bone: its fingers start below it
            continue
        chains.append(chain)
    return chains


def _stray_child(rig: RigLike, hand: int, bone: int) -> int | None:
    """Of a bone with two children, one continuing its line and one starting nearer the wrist
    than the bone itself, the second: the bone is a finger's, not a palm bone carrying both."""
    kids = rig.akids[bone]
    if len(kids) != 2:
        return None
    wrist = rig.heads[hand]
    own = rig.ends[bone] - rig.heads[bone]
    reach = float(np.linalg.norm(rig.heads[bone] - wrist))
    for a, b in (kids, kids[::-1]):
        along = (
            angle_deg(rig.heads[a] - rig.heads[bone], own) < 25.0 and angle_deg(rig.ends[a] - rig.heads[a], own) < 25.0
        )
        if along and float(np.linalg.norm(rig.heads[b] - wrist)) < reach:
            return int(b)
    return None


def _spread(rig: RigLike, bones: list[int]) -> float:
    pts = rig.heads[bones]
    return float(np.linalg.norm(pts[:, None] - pts[None], axis=-1).max())


def finger_slots(rig: RigLike, hand: int, side: str, elbow: FloatArray) -> list[tuple[str, int, str, float]]:
    """(slot, bone, reason, base confidence) of the fingers of ``hand``, by name where the names
    say which finger, else by structure; ``elbow`` is where the forearm starts."""
    forearm = float(np.linalg.norm(rig.heads[hand] - elbow))
    out: list[tuple[str, int, str, float]] = []
    sub = rig.subtree(hand)[1:]
    named: dict[str, list[int]] = {}
    for b in sub:
        f = rig.hints[b].finger
        if f:
            named.setdefault(f, []).append(b)
    if named:
        for f, bones in named.items():
            # Numbered along the chain, not by word, so VRM 0/1 and MMD's optional 0 segment agree.
            bones.sort(key=lambda b: (int(rig.depth[b]), rig.hints[b].number or 0))
            for k, b in enumerate(bones[:3], start=1):
                out.append((finger_slot(f, k, side), b, f"{f} finger of the hand, segment {k} along the chain", 0.75))
        return out
    chains = [c for c in finger_chains(rig, hand) if c]
    if chains:
        # A prop or weapon held in the hand reaches far beyond the fingers.
        reach = [float(np.linalg.norm(rig.ends[c[-1]] - rig.heads[hand])) for c in chains]
        chains = [c for c, r in zip(chains, reach, strict=True) if r <= 2.0 * float(np.median(reach))]
        # Nor is a finger longer than the forearm (a sword that is the hand's only child).
        chains = [c for c in chains if float(np.linalg.norm(rig.ends[c[-1]] - rig.heads[hand])) <= forearm]
    if not chains:
        return out
    wrist = rig.heads[hand]
    # Leading palm bones: more than three bones in a chain, or a first bone that starts at the
    # wrist, are metacarpals or offsets before the three phalanges.
    # A longer chain whose first bone starts at the knuckles, away from the wrist, ends in a
    # fingertip bone instead (Mixamo's Index4, a biped's Nub): its phalanges are the first three.
    # Bones that start together (or fan out from near one spot) are palm bones, not phalanges.
    long = [c for c in chains if len(c) > 3]
    fanned = len(long) >= 2 and _spread(rig, [c[0] for c in long]) < 0.7 * _spread(rig, [c[1] for c in long])
    trimmed, tipped = [], 0
    for c in chains:
        tip = float(np.linalg.norm(rig.ends[c[-1]] - wrist))
        at_knuckle = not fanned and float(np.linalg.norm(rig.heads[c[0]] - wrist)) > 0.25 * tip
        tipped += len(c) > 3 and at_knuckle
        t = c[:3] if len(c) > 3 and at_knuckle else c[-3:] if len(c) > 3 else c
        if len(t) >= 2 and float(np.linalg.norm(rig.heads[t[0]] - wrist)) <= 0.25 * tip:
            t = t[1:]
        trimmed.append(t)
    order: list[tuple[str, list[int]]] = []
    if len(chains) >= 2:
        # The thumb starts closest to the wrist; where two start together (CMU's thumb and palm
        # both hang from the wrist joint) it is the one turning away from the forearm's line.
        dist = np.array([float(np.linalg.norm(rig.heads[t[0]] - wrist)) for t in trimmed])
        fore = _unit(wrist - elbow) if forearm > 0.0 else _unit(rig.ends[hand] - wrist)
        turn = np.array([angle_deg(rig.ends[c[-1]] - rig.heads[c[0]], fore) for c in chains])
        near = dist <= dist.min() + 0.15 * max(float(dist.max()), 1e-12)
        thumb = int(np.argmax(np.where(near, turn, -1.0)))
        others = [i for i in range(len(chains)) if i != thumb]
        bases = np.array([rig.heads[trimmed[i][0]] for i in others])
        if len(others) >= 2:
            # Along the knuckle line, starting from the end nearest the thumb.
            centre = bases.mean(axis=0)
            axis = np.linalg.svd(bases - centre)[2][0]
            # Across the hand only: a thumb starting far back toward the wrist must not count as
            # lying beyond the knuckle that a bent or turned hand's line happens to lead toward.
            along = _unit(centre - wrist)
            across = axis - float(axis @ along) * along
            axis = _unit(across) if float(np.linalg.norm(across)) > 1e-9 else axis
            proj = (bases - centre) @ axis
            thumb_at = float((rig.heads[trimmed[thumb]].mean(axis=0) - centre) @ axis)
            ranked = np.argsort(proj if thumb_at < float(proj.mean()) else -proj)
            others = [others[k] for k in ranked]
        # The thumb starts near the wrist either way; it ends in a tip bone where the fingers do.
        tc = chains[thumb]
        order.append(("thumb", (tc[:3] if 2 * tipped > len(others) else tc[-3:]) if len(tc) > 3 else tc))
        # A lone finger beside the thumb is the index (mitten hands, mocap skeletons such as
        # CMU's that keep the thumb and one finger): it is the pointing finger, next to the thumb.
        words = {1: ("index",), 2: ("index", "middle"), 3: ("index", "middle", "ring")}.get(
            len(others), ("index", "middle", "ring", "little")
        )
        order.extend((w, trimmed[i]) for w, i in zip(words, others, strict=False))
    else:
        order.append(("middle", trimmed[0]))
    for f, segs in order:
        why = (
            "thumb: the finger chain starting nearest the wrist"
            if f == "thumb"
            else f"{f} finger, counted from the thumb"
        )
        for k, b in enumerate(segs[:3], start=1):
            out.append((finger_slot(f, k, side), b, why, 0.55))
    return out

"""Where limbs end, read from the body's joints (docs/mapping.md): bone ends when bone lengths mean nothing,
importer end markers, and feet, hands and toes wherever the hierarchy hangs them.

A foot is the bone whose head is where the shin ends, whatever its parent (the shin, the root,
an IK control); a hand is where the forearm ends; toes where the foot ends. These functions
decide from joint positions relative to the limb's own length -- never from a fixed distance,
never from leaf bones an importer adds -- and pick the best candidate in the body's geometry:
below the knee (past the elbow), on the limb's side of the body, nearest the point where the limb
ends, reaching on the way a foot (a hand) does. Each candidate that was not taken keeps the
reason, so a refusal can name the nearest bones and why they were passed over.

Plain numpy on arrays of the mapper's rig (heads, ends, analysis tree); no Blender.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ..rig.rotations import FloatArray

# Below this fraction of the body size two points coincide (as in core.mapping).
COINCIDENT = 1e-4
# A bone's length means nothing (a glTF joint exported as a tiny bone) below this fraction of the
# distance to its children.
_SHORT_TAIL = 0.25


class _HintLike(Protocol):
    @property
    def weight(self) -> float: ...
    @property
    def parts(self) -> frozenset[str]: ...
    @property
    def known_unmapped(self) -> bool: ...
    @property
    def finger(self) -> str | None: ...
    @property
    def number(self) -> int | None: ...


class RigLike(Protocol):
    """What these functions read of the mapper's rig."""

    @property
    def n(self) -> int: ...
    @property
    def names(self) -> list[str]: ...
    @property
    def heads(self) -> FloatArray: ...
    @property
    def ends(self) -> FloatArray: ...
    @property
    def size(self) -> float: ...
    @property
    def keep(self) -> NDArray[Any]: ...
    @property
    def apar(self) -> NDArray[Any]: ...
    @property
    def akids(self) -> list[list[int]]: ...
    @property
    def depth(self) -> NDArray[Any]: ...
    @property
    def hints(self) -> Sequence[_HintLike]: ...

    def is_ancestor(self, a: int, b: int) -> bool: ...

    def subtree(self, i: int) -> list[int]: ...


def unit(v: FloatArray) -> FloatArray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.zeros_like(v)


# --- bone ends -------------------------------------------------------------------------------


def degenerate_tails(
    heads: FloatArray, tails: FloatArray, parents: NDArray[np.int64], kids: Sequence[Sequence[int]], size: float
) -> NDArray[np.bool_]:
    """Bones whose tail says nothing about where they go (glTF joints exported as near-zero
    bones): shorter than a quarter of the distance to their farthest child (a leaf: to its parent)
    and than 2 % of the body."""
    out = np.zeros(len(heads), dtype=bool)
    for i in range(len(heads)):
        own = float(np.linalg.norm(tails[i] - heads[i]))
        if kids[i]:
            ref = max(float(np.linalg.norm(heads[k] - heads[i])) for k in kids[i])
        elif parents[i] >= 0:
            ref = float(np.linalg.norm(heads[i] - heads[int(parents[i])]))
        else:
            continue
        out[i] = own < _SHORT_TAIL * ref and own < 0.02 * size
    return out


def joint_ends(
    heads: FloatArray, parents: NDArray[np.int64], kids: Sequence[Sequence[int]], tails: FloatArray | None = None
) -> FloatArray:
    """Bone ends from joints alone: the mean of the children's heads; a leaf continues its own
    direction (its tail's, when it has one) by half its parent's length, else its parent's line."""
    ends = heads.copy()
    for i in range(len(heads)):
        if kids[i]:
            ends[i] = heads[list(kids[i])].mean(axis=0)
            continue
        p = int(parents[i])
        if p < 0:
            continue
        step = 0.5 * float(np.linalg.norm(heads[i] - heads[p]))
        own = unit(tails[i] - heads[i]) if tails is not None else np.zeros(3)
        if float(np.linalg.norm(own)) > 0.0 and step > 0.0:
            ends[i] = heads[i] + step * own
        else:
            ends[i] = heads[i] + 0.5 * (heads[i] - heads[p])
    return ends


def end_markers(
    heads: FloatArray, ends: FloatArray, parents: NDArray[np.int64], kids: Sequence[Sequence[int]], size: float
) -> list[int]:
    """Importer end markers (the FBX importer's ``*_end`` leaves), whatever their names: a leaf
    that starts at its parent's tail and repeats its parent's vector, where the parent does not
    itself repeat its own parent (equal finger segments in a row are bones, not markers), when
    most leaves of the rig are such."""
    tol = COINCIDENT * size

    def repeats(i: int) -> bool:
        p = int(parents[i])
        if p < 0:
            return False
        own = ends[i] - heads[i]
        return (
            float(np.linalg.norm(heads[i] - ends[p])) <= tol
            and float(np.linalg.norm(own - (ends[p] - heads[p]))) <= tol
            and float(np.linalg.norm(own)) > tol
        )

    leaves = [i for i in range(len(heads)) if not kids[i]]
    found = [i for i in leaves if repeats(i) and not repeats(int(parents[i]))]
    # An importer marks every leaf; a few leaves that happen to repeat their parent (a straight
    # leg whose foot hangs elsewhere) are bones.
    return found if len(found) >= 3 and 2 * len(found) >= len(leaves) else []


# --- feet, hands and toes away from their limb -----------------------------------------------


@dataclass(frozen=True)
class Candidate:
    bone: int
    score: float  # lower is better
    reason: str | None  # why it was not taken (None: acceptable)
    distance: float = 0.0  # from where the limb ends, in the segment's lengths


@dataclass(frozen=True)
class LimbEnd:
    """The bone found where a limb ends (``-1``: none) and the nearest bones passed over."""

    bone: int
    rejected: tuple[Candidate, ...]


def limb_end_point(rig: RigLike, root: FloatArray, joint: FloatArray, end: FloatArray, tail_ok: bool) -> FloatArray:
    """Where the limb's second segment (shin, forearm) ends: its own end when its tail means
    something, else one upper segment's length on from the middle joint along the limb."""
    if tail_ok and float(np.linalg.norm(end - joint)) > COINCIDENT * rig.size:
        return end
    upper = float(np.linalg.norm(joint - root))
    own = unit(end - joint)
    if float(np.linalg.norm(own)) == 0.0:
        own = unit(joint - root)
    return joint + upper * own


def find_limb_end(
    rig: RigLike,
    kind: str,
    root: FloatArray,
    joint: FloatArray,
    end: FloatArray,
    exclude: set[int],
    up: FloatArray,
    lateral: tuple[FloatArray, FloatArray],
) -> LimbEnd:
    """The foot (``kind="foot"``) or hand (``"hand"``) of a limb whose chain stops at the shin
    (forearm): ``root`` is the hip (shoulder) joint, ``joint`` the knee (elbow), ``end`` where the
    shin (forearm) ends. ``lateral`` is (a point on the body's mirror plane, its unit normal).

    Every kept bone outside ``exclude`` and not above the limb is weighed: its distance from the
    limb's end (or from the limb continued straight) in units of the segment's length, whether it lies below the knee (past the elbow),
    on the limb's side, and reaches on as a foot (toward the ground and forward, not up) or a hand
    (on past the wrist) does. The best acceptable one wins."""
    seg = float(np.linalg.norm(end - joint))
    length = max(seg, float(np.linalg.norm(joint - root)), COINCIDENT * rig.size)
    along = unit(end - joint) if seg > COINCIDENT * rig.size else unit(joint - root)
    # The limb continued straight from the hip (shoulder): where the ankle (wrist) is when the
    # segment's own end is an importer's guess pointing elsewhere.
    straight = joint + float(np.linalg.norm(joint - root)) * unit(joint - root)
    origin, normal = lateral
    side = float((joint - origin) @ normal)
    word = {"foot": "shin", "hand": "forearm"}[kind]
    cands: list[Candidate] = []
    for i in range(rig.n):
        if not rig.keep[i] or i in exclude:
            continue
        head = rig.heads[i]
        d = min(float(np.linalg.norm(head - end)), float(np.linalg.norm(head - straight))) / length
        if d > 1.5:
            continue
        reason: str | None = None
        past = float((head - joint) @ along) / length
        own_side = float((head - origin) @ normal)
        reach = _reach(rig, i)
        if past < 0.5:
            reason = f"its head is not past the {'knee' if kind == 'foot' else 'elbow'}"
        elif own_side * side <= 0.0:
            reason = "it is not on this limb's side of the body"
        elif d > 0.75:
            reason = f"its head is {d:.2f} {word} lengths from where the {word} ends"
        elif kind == "foot" and float(np.linalg.norm(reach)) > 0.0 and float(unit(reach) @ up) > 0.5:
            reason = "it points up, not toward the ground"
        elif kind == "hand" and float(np.linalg.norm(reach)) > 0.0 and float(unit(reach) @ along) < 0.0:
            reason = "it points back along the forearm"
        score = d
        if float(np.linalg.norm(reach)) > 0.0:
            score += 0.25 * max(0.0, float(unit(reach) @ (up if kind == "foot" else -along)))
        if rig.akids[i]:
            score -= 0.05  # the real foot carries toes, the real hand fingers
        h = rig.hints[i]
        if kind in h.parts:
            score -= 0.3 * h.weight
        elif h.parts and h.weight >= 0.6:
            score += 0.3 * h.weight
        cands.append(Candidate(i, score, reason, d))
    cands.sort(key=lambda c: c.score)
    ok = [c for c in cands if c.reason is None]
    best = ok[0].bone if ok else -1
    if ok:
        # The foot carries its toes, the hand its palm bones: of candidates about as near, the one
        # the others hang from.
        near = ok[0].distance + 0.15
        above = [c.bone for c in ok if c.distance <= near and c.bone != best and rig.is_ancestor(c.bone, best)]
        while above:
            best = min(above, key=lambda b: int(rig.depth[b]))
            above = [c.bone for c in ok if c.distance <= near and c.bone != best and rig.is_ancestor(c.bone, best)]
    rejected = tuple(c for c in cands if c.reason is not None)[:3]
    return LimbEnd(best, rejected)


def _reach(rig: RigLike, i: int) -> FloatArray:
    """Which way a bone and what hangs from it go: from its head to the mean of its subtree's
    points (its own end for a leaf)."""
    sub = rig.subtree(i)
    pts = np.concatenate([rig.heads[sub[1:]], rig.ends[sub]]) if len(sub) > 1 else rig.ends[[i]]
    return np.asarray(pts.mean(axis=0) - rig.heads[i], dtype=np.float64)


def toes_child(rig: RigLike, foot: int, child: int, up: FloatArray) -> bool:
    """``child`` is the foot's toes: the one child that runs forward (a heel bone runs back; five
    separate toes are not one toes bone)."""
    fdir = rig.ends[foot] - rig.heads[foot]
    fdir = fdir - (fdir @ up) * up
    forward = []
    for c in rig.akids[foot]:
        # Where the child starts says where it goes (a leaf's tail may be an importer's guess);
        # a child starting at the ankle itself is judged by its end.
        v = rig.heads[c] - rig.heads[foot]
        if float(np.linalg.norm(v)) <= COINCIDENT * rig.size:
            v = rig.ends[c] - rig.heads[foot]
        v = v - (v @ up) * up
        if float(v @ fdir) > 0.0 and not rig.hints[c].known_unmapped:
            forward.append(c)
    return forward == [child]


def _foot_split(rig: RigLike, foot: int, child: int) -> bool:
    """``child`` is part of the foot, not its toes: the foot's only child, starting near the ankle
    and running along the foot (Daz's Metatarsals under the Foot, the toes hanging from it)."""
    if list(rig.akids[foot]) != [child]:
        return False
    start = float(np.linalg.norm(rig.heads[child] - rig.heads[foot]))
    return start < 0.5 * float(np.linalg.norm(rig.ends[child] - rig.heads[foot]))


def rest_below_ankle(pts: FloatArray, a: int, up: FloatArray, length: float) -> float:
    """How much leg a cut at ``pts[a]`` leaves below the ankle: the drop from the ankle to the
    lowest point after it, plus a quarter of the path's length after it. A foot and its toes run
    forward (a big stylised foot, or importer tip bones, is long but hardly drops); a cut above
    the real ankle leaves the shin hanging down."""
    if a >= len(pts) - 1:
        return 0.0
    drop = float(np.max((pts[a] - pts[a + 1 :]) @ up))
    return max(drop, 0.0) + 0.25 * length


def toes_on_path(rig: RigLike, path: Sequence[int], a: int, up: FloatArray) -> int:
    """Index in ``path`` of the toes after the foot at ``path[a]``, or -1: the bone running forward
    from the foot, past a bone that only splits the foot."""
    if a + 1 >= len(path):
        return -1
    if a + 2 < len(path) and _foot_split(rig, path[a], path[a + 1]) and toes_child(rig, path[a + 1], path[a + 2], up):
        return a + 2
    return a + 1 if toes_child(rig, path[a], path[a + 1], up) else -1


def toes_of(rig: RigLike, foot: int, up: FloatArray) -> int:
    """The toes bone under ``foot`` wherever the foot hangs, or -1 (see :func:`toes_on_path`)."""
    kids = list(rig.akids[foot])
    if len(kids) == 1 and _foot_split(rig, foot, kids[0]):
        inner = [c for c in rig.akids[kids[0]] if toes_child(rig, kids[0], c, up)]
        if inner:
            return int(inner[0])
    kids = [c for c in kids if toes_child(rig, foot, c, up)]
    return int(kids[0]) if kids else -1


def tip_after(rig: RigLike, bone: int) -> bool:
    """``bone`` ends in a tip bone: its only child is a leaf starting about where it ends and
    running on in its line (Mixamo's Toe_End, a biped's Nub), a joint marking where it ends."""
    kids = list(rig.akids[bone])
    if len(kids) != 1 or rig.akids[kids[0]]:
        return False
    own = rig.ends[bone] - rig.heads[bone]
    tip = kids[0]
    near = float(np.linalg.norm(rig.heads[tip] - rig.ends[bone])) <= 0.1 * float(np.linalg.norm(own))
    return near and angle_deg(rig.ends[tip] - rig.heads[tip], own) < 30.0


def head_of_chain(rig: RigLike, chain: Sequence[int], tipped: bool) -> int:
    """The head in the chain above the arms, none named so: its top bone; on a rig whose limbs
    end in tip bones (``tipped``), the bone below a tip at the top (Mixamo's HeadTop_End)."""
    if tipped and len(chain) >= 2 and tip_after(rig, chain[-2]) and int(rig.akids[chain[-2]][0]) == chain[-1]:
        return int(chain[-2])
    return int(chain[-1])


def loose_root_parents(
    heads: FloatArray, ends: FloatArray, apar: NDArray[np.int64], keep: NDArray[np.bool_], size: float, reach: float = 0.08
) -> dict[int, int]:
    """Anatomical parents for bones that have none outside the trunk's tree (a Rigify rig's DEF
    bones kept alone: shoulders, upper arms and thighs lose their ORG parents): each loose root,
    nearest first, hangs from the bone of the growing tree that ends (or else starts)
    nearest its head, when that is within ``reach`` of the body's size."""
    n = len(heads)
    roots = [i for i in range(n) if keep[i] and apar[i] < 0]
    if len(roots) < 2:
        return {}
    top = np.arange(n)
    for i in range(n):
        r = i
        while apar[r] >= 0:
            r = int(apar[r])
        top[i] = r
    members = {r: [i for i in range(n) if keep[i] and top[i] == r] for r in roots}
    # The trunk's tree has the most bones about the middle of the body; limbs reach away.
    middle = np.median(heads[keep], axis=0)
    main = max(roots, key=lambda r: int(np.sum(np.linalg.norm(heads[members[r]] - middle, axis=1) < 0.25 * size)))
    trunk = list(members[main])
    tree = list(trunk)
    loose = [r for r in roots if r != main]

    def carries(r: int) -> bool:
        # A lone bone (a prop at the origin, a camera above the head) is not a body part unless
        # another loose part starts where it ends (a clavicle carrying its arm).
        tips = ends[members[r]]
        return any(float(np.linalg.norm(tips - heads[q], axis=1).min()) <= 0.01 * size for q in loose if q != r)

    pending = [r for r in loose if len(members[r]) >= 2 or carries(r)]
    out: dict[int, int] = {}
    while pending:
        # A loose root continues a limb where a bone ends, or branches off the trunk anywhere
        # along it; it does not start beside another limb's first bone. Where a bone ends and the
        # next starts (one point, to float precision), the one ending there is the parent.
        anchors = tree + trunk
        pts = np.concatenate([ends[tree], heads[trunk]])
        handicap = np.concatenate([np.zeros(len(tree)), np.full(len(trunk), 0.01 * size)])
        best = min(pending, key=lambda r: float((np.linalg.norm(pts - heads[r], axis=1) + handicap).min()))
        d = np.linalg.norm(pts - heads[best], axis=1) + handicap
        if float(d.min()) > reach * size:
            break
        out[best] = anchors[int(np.argmin(d))]
        tree.extend(members[best])
        pending.remove(best)
    return out


def describe_rejected(rig: RigLike, slot: str, found: LimbEnd) -> str:
    """One clause naming the nearest bones passed over for ``slot`` and why."""
    if not found.rejected:
        return f"{slot}: no bone near where the limb ends"
    parts = [f"{rig.names[c.bone]!r} ({c.reason})" for c in found.rejected]
    return f"{slot}: nearest " + "; ".join(parts)


def angle_deg(a: FloatArray, b: FloatArray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na < 1e-12 or nb < 1e-12:
        return 0.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(a @ b) / (na * nb)))))

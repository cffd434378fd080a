"""A rig mapped from its structure, names advising: the body's axial chain, limbs, sides, fingers,
twists, eyes and jaw.

Structure decides, names advise. Given the body (:mod:`core.mapping.mirrored_limbs`), the hips are
the bone that carries both legs and the spine; the spine column runs up to the bone the arms hang
from, then neck and head; each limb chain is cut into its slots (:mod:`core.mapping.limb_cuts`),
with feet and hands found where the hierarchy hangs them (:mod:`core.mapping.limb_ends`), fingers
(:mod:`core.mapping.fingers`) and eyes and jaw (:mod:`core.mapping.head_parts`).

* ``.L`` / ``.R`` mean the *character's* own left and right. They are decided from joint
  positions relative to the body (left = up x forward, with up from the hips toward the arms and
  forward from the feet, knees and face); letters in bone names are evidence only, and a name
  that contradicts the positions is reported as a conflict.
* Where a name rule and the structure disagree, the mapping picks the best candidate and records
  the disagreement in :attr:`BoneMapping.conflicts`; nothing is resolved silently.
* Bones between two mapped bones stay unmapped on purpose (extra spine and neck segments, CMU's
  ``LHipJoint``, MakeHuman's ``__`` offsets, palms): the retarget moves them with the slot above.
  Twist slots are filled only from names (``upperarm_twist_01_l``, ``upperarm02.L``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ..rig.rotations import FloatArray
from .analysis_tree import AnalysedRig
from .bone_mapping import BoneMapping
from .fingers import finger_slots
from .head_parts import face_slots
from .humanoid import FINGERS, SIDES, mirror_slot, sided
from .limb_cuts import LimbCut, cut_arm, cut_leg
from .limb_ends import (
    COINCIDENT,
    describe_rejected,
    find_limb_end,
    head_of_chain,
    limb_end_point,
    tip_after,
    toes_of,
    unit,
)
from .mirrored_limbs import Body, MirrorPair, path_length
from .name_hints import ARM_PARTS
from .slot_assembly import SlotAssembly, upright_refusal

_TWIST_BASE = {"upper_arm_twist": "upper_arm", "forearm_twist": "forearm", "thigh_twist": "thigh", "shin_twist": "shin"}
_COLUMN = frozenset({"spine", "chest", "upper_chest"})


_ARM_WHY = {
    "shoulder": "bone between the spine and the upper arm (clavicle)",
    "upper_arm": "first long bone of the lateral chain below the neck",
    "forearm": "second long bone of the arm chain",
    "hand": "end of the forearm, where the arm branches into the fingers",
}
_LEG_WHY = {
    "thigh": "first long bone of the downward chain from the hips",
    "shin": "second long bone of the leg chain",
    "foot": "bone turning forward at the ankle",
    "toes": "bone continuing the foot forward",
}
_ANATOMICAL_ORDER = {p: i for i, p in enumerate(("hips", "spine", "chest", "upper_chest", "neck", "head"))}
_ANATOMICAL_ORDER.update({p: i for i, p in enumerate(("shoulder", "upper_arm", "forearm", "hand"))})
_ANATOMICAL_ORDER.update({p: i for i, p in enumerate(("thigh", "shin", "foot", "toes"))})


def _side_letters(rig: AnalysedRig, bones: Iterable[int]) -> str | None:
    """The side most of these bones' names carry, if they agree."""
    votes = [rig.hints[b].side for b in bones if rig.hints[b].side]
    if not votes:
        return None
    left = sum(1 for v in votes if v == "L")
    if left * 2 > len(votes):
        return "L"
    if left * 2 < len(votes):
        return "R"
    return None


def _forward_vote(rig: AnalysedRig, legs: list[tuple[LimbCut, int, int]], head: int, up: FloatArray, scale: float) -> FloatArray:
    """Sum of unit cues pointing forward (perpendicular to up): feet toward the toes (weight 1),
    knees ahead of the hip-ankle line (0.5), the face ahead of the head (0.5). Cues shorter than
    2 % of the leg are noise and do not vote."""
    vote = np.zeros(3)

    def add(v: FloatArray, weight: float) -> None:
        nonlocal vote
        v = v - (v @ up) * up
        if float(np.linalg.norm(v)) > 0.02 * scale:
            vote = vote + weight * unit(v)

    for cut, foot, toes in legs:
        if foot >= 0:
            tip = rig.heads[toes] if toes >= 0 else rig.ends[foot]
            add(tip - rig.heads[foot], 1.0)
        hip, knee = cut.points[cut.parts["thigh"]], cut.points[cut.parts["shin"]]
        ankle = rig.heads[foot] if foot >= 0 else cut.points[-1]
        line = ankle - hip
        t = float((knee - hip) @ line) / max(float(line @ line), 1e-12)
        add(knee - (hip + t * line), 0.5)
    if head >= 0:
        face = rig.subtree(head)[1:]
        if face:
            add(rig.heads[face].mean(axis=0) - rig.heads[head], 0.5)
    return vote


def map_with_body(rig: AnalysedRig, body: Body) -> BoneMapping:
    asm = SlotAssembly(rig)
    up = body.up
    eps = COINCIDENT * rig.size
    used: set[int] = set()
    unfound: dict[int, str] = {}  # limb root -> the nearest bones passed over for its foot or hand

    # Axial chain: hips, the spine column up to the bone the arms hang from, then neck and head.
    hips = body.hips
    p = int(rig.apar[hips])
    walker = hips
    while p >= 0 and rig.akids[p] == [walker]:
        # A bone named as the hips directly above the common parent (Biped's Pelvis above Spine,
        # MMD's centre above the waist) is the hips: it carries the same bones.
        if "hips" in rig.hints[p].parts and rig.hints[p].weight >= 0.6:
            hips = p
            break
        walker, p = p, int(rig.apar[p])
    asm.put("hips", hips, "common parent of the legs and the spine")
    used.add(hips)

    chest = body.chest
    neck_chain = _neck_chain(rig, body, up, eps)
    head = -1
    neck = -1
    named_head = [i for i in neck_chain if "head" in rig.hints[i].parts]
    if neck_chain:
        head = named_head[-1] if named_head else neck_chain[-1]
    column = rig.path_between(hips, chest)
    # A bone starting below the hip joints is the pelvis, part of the hips, not the spine.
    hip_line = min(float(rig.heads[x] @ up) for x in (body.legs.a, body.legs.b))
    while len(column) > 1 and float(rig.heads[column[0]] @ up) < hip_line:
        column = column[1:]
    # Limbs.
    leg_info: dict[int, tuple[LimbCut, int, int]] = {}
    for root, matched in ((body.legs.a, body.legs.path_a), (body.legs.b, body.legs.path_b)):
        cut = cut_leg(rig, _limb_path(rig, root, matched), body.legs, up)
        if cut is None:
            continue
        foot = cut.path[cut.parts["foot"]] if "foot" in cut.parts else -1
        toes = cut.path[cut.parts["toes"]] if "toes" in cut.parts else -1
        if foot < 0:
            foot = _detached_end(rig, cut, "foot", body.legs, used, up, unfound, body)
            if foot >= 0:
                toes = toes_of(rig, foot, up)
        leg_info[root] = (cut, foot, toes)
    if neck_chain and not named_head:
        tipped = len(leg_info) == 2 and all(t >= 0 and tip_after(rig, t) for _, _, t in leg_info.values())
        head = head_of_chain(rig, neck_chain, tipped)
    if head >= 0:
        below = neck_chain[: neck_chain.index(head)]
        named_neck = [i for i in below if "neck" in rig.hints[i].parts]
        neck = named_neck[0] if named_neck else below[0] if below else -1
    if neck < 0 and column and "neck" in rig.hints[chest].parts:
        neck = chest  # Biped hangs the clavicles from the neck
        column = column[:-1]
    _assign_column(asm, column)
    if neck >= 0:
        asm.put("neck", neck, "first bone above the arms" if neck != chest else "bone the arms hang from, named neck")
    if head >= 0:
        asm.put("head", head, "top of the chain above the arms")
    arm_cuts: dict[int, LimbCut] = {}
    hands: dict[int, int] = {}
    for root, matched in ((body.arms.a, body.arms.path_a), (body.arms.b, body.arms.path_b)):
        cut = cut_arm(rig, _limb_path(rig, root, matched), body.arms)
        if cut is not None:
            arm_cuts[root] = cut
            hand = cut.path[cut.parts["hand"]] if "hand" in cut.parts else -1
            if hand < 0:
                hand = _detached_end(rig, cut, "hand", body.arms, used, up, unfound, body)
            if hand < 0:
                # No hand away from the chain: the chain's own last bones hold it after all.
                cut = cut_arm(rig, cut.path, body.arms, detached=False) or cut
                arm_cuts[root] = cut
                hand = cut.path[cut.parts["hand"]] if "hand" in cut.parts else -1
                if hand >= 0:
                    unfound.pop(root, None)
            hands[root] = hand

    # Left and right from the body: forward from feet, knees and face; left = up x forward.
    vote = _forward_vote(rig, list(leg_info.values()), head, up, body.legs.length)
    toward_a = body.legs.normal - (body.legs.normal @ up) * up  # lateral, from leg b to leg a
    forward_if_a_left = np.cross(toward_a, up)
    score = float(unit(forward_if_a_left) @ vote)
    side_note = ""
    if abs(score) >= 0.15:
        a_is_left = score > 0
    else:
        letters = _side_letters(rig, [b for r in (body.legs.a,) for b in rig.subtree(r)])
        letters_b = _side_letters(rig, [b for r in (body.legs.b,) for b in rig.subtree(r)])
        if letters is not None or letters_b is not None:
            a_is_left = letters == "L" or letters_b == "R"
            side_note = "side from the name (the body's facing could not be read)"
        else:
            a_is_left = True
            asm.conflicts.append(
                "cannot tell left from right: no foot, knee or face gives the facing and the names carry no "
                "side; sides were chosen arbitrarily"
            )
            side_note = "side arbitrary"
    left_dir = unit(toward_a if a_is_left else -toward_a)
    leg_side = {body.legs.a: "L" if a_is_left else "R", body.legs.b: "R" if a_is_left else "L"}
    arm_a_left = float(body.arms.normal @ left_dir) > 0
    arm_side = {body.arms.a: "L" if arm_a_left else "R", body.arms.b: "R" if arm_a_left else "L"}

    for root, (cut, foot, toes) in leg_info.items():
        side = leg_side[root]
        for part in ("thigh", "shin"):
            bone = cut.path[cut.parts[part]]
            asm.put(sided(part, side), bone, _LEG_WHY[part], 0.75 if cut.margin > 0.3 else 0.6)
        if foot >= 0:
            why = _LEG_WHY["foot"] if foot in cut.path else "bone starting where the shin ends (parented elsewhere)"
            asm.put(sided("foot", side), foot, why)
        if toes >= 0:
            asm.put(sided("toes", side), toes, _LEG_WHY["toes"])
        _check_letters(asm, cut.path[cut.parts["thigh"] :] + ([foot] if foot >= 0 else []), side, "leg")
    for root, cut in arm_cuts.items():
        side = arm_side[root]
        for part in ARM_PARTS:
            if part in cut.parts:
                asm.put(sided(part, side), cut.path[cut.parts[part]], _ARM_WHY[part], 0.75 if cut.margin > 0.3 else 0.6)
        hand = hands[root]
        if hand >= 0 and "hand" not in cut.parts:
            asm.put(sided("hand", side), hand, "bone starting where the forearm ends (parented elsewhere)")
        _check_letters(asm, cut.path[: cut.parts["forearm"] + 1] + ([hand] if hand >= 0 else []), side, "arm")
        if hand >= 0:
            for slot, bone, why, base in finger_slots(rig, hand, side, cut.points[cut.parts["forearm"]]):
                asm.put(slot, bone, why, base=base)
    for root, clause in unfound.items():
        limb_side = leg_side.get(root) or arm_side.get(root)
        if limb_side is not None and sided(clause.partition(":")[0], limb_side) not in asm.slots:
            asm.conflicts.append(clause.replace(":", f".{limb_side} not found:", 1))
    if side_note:
        for slot in list(asm.slots):
            if slot.endswith((".L", ".R")):
                asm.lower(slot, 0.15, side_note)
    _assign_twists(asm)
    for slot, bone, why in face_slots(rig, head, left_dir, up):
        asm.put(slot, bone, why)
    _record_name_conflicts(asm, arm_cuts, leg_info, column)
    refusal = upright_refusal(rig, asm)
    return asm.mapping(refusal)


def _detached_end(
    rig: AnalysedRig, cut: LimbCut, kind: str, pair: MirrorPair, used: set[int], up: FloatArray, unfound: dict[int, str], body: Body
) -> int:
    """A foot (hand) that is not under its shin (forearm), found by :func:`find_limb_end`; when
    none fits, the nearest bones passed over are kept in ``unfound`` for the refusal."""
    top, mid = ("thigh", "shin") if kind == "foot" else ("upper_arm", "forearm")
    root, joint = cut.points[cut.parts[top]], cut.points[cut.parts[mid]]
    end = limb_end_point(rig, root, joint, cut.points[-1], bool(rig.tail_ok[cut.path[-1]]))
    above = {i for i in range(rig.n) if rig.is_ancestor(i, cut.path[cut.parts[mid]])}
    # Not a bone of the other limbs, the spine or the head (an arm hanging down ends by a thigh).
    others = set(rig.path_between(body.hips, body.chest)) | {body.hips}
    for limb in (body.legs.a, body.legs.b, body.arms.a, body.arms.b):
        if limb != cut.path[0]:
            others.update(rig.subtree(limb))
    for c in rig.akids[body.chest]:
        if not any(rig.is_ancestor(c, x) for x in (body.arms.a, body.arms.b, cut.path[0])):
            others.update(rig.subtree(c))
    exclude = set(cut.path) | used | above | others
    found = find_limb_end(rig, kind, root, joint, end, exclude, up, (pair.origin, pair.normal))
    if found.bone < 0:
        unfound[cut.path[0]] = describe_rejected(rig, kind, found)
    return found.bone


def _limb_path(rig: AnalysedRig, root: int, matched: tuple[int, ...]) -> list[int]:
    """The chain to cut a limb along: the longest path, unless it leaves the chain that mirrors
    the other limb (a sword in one hand) -- then the mirrored chain."""
    main = rig.main_path(root)
    if not set(matched) <= set(main):
        return list(matched)
    # The longest path goes on past the mirrored chain: fingers do; a sword as long as the arm,
    # the hand's only child, does not belong to it.
    pts = rig.path_points(main)
    k = main.index(matched[-1]) + 1
    beyond = path_length(pts[k:]) if k < len(main) else 0.0
    return main if beyond <= 0.6 * path_length(pts[: k + 1]) else main[:k]


def _neck_chain(rig: AnalysedRig, body: Body, up: FloatArray, eps: float) -> list[int]:
    """Bones from the arms' parent up to the top of the head: at each step the child that
    continues upward from where its parent ends (eyes, jaw and face bones branch off sideways,
    downward or from the head's base)."""
    chest = body.chest
    scale = body.legs.length
    best, start = 0.05 * scale, -1
    for c in rig.akids[chest]:
        if rig.is_ancestor(c, body.arms.a) or rig.is_ancestor(c, body.arms.b):
            continue
        top = max(float((rig.heads[i] - rig.heads[chest]) @ up) for i in rig.subtree(c))
        top = max(top, float((rig.ends[c] - rig.heads[chest]) @ up))
        lat = abs(float((rig.heads[c] - body.arms.origin) @ body.arms.normal))
        if top > best and lat < 0.1 * scale:
            best, start = top, c
    if start < 0:
        return []
    chain = [start]
    while True:
        x = chain[-1]
        length = float(np.linalg.norm(rig.ends[x] - rig.heads[x]))
        nxt = []
        for c in rig.akids[x]:
            gap = float(np.linalg.norm(rig.heads[c] - rig.ends[x]))
            step = rig.heads[c] - rig.heads[x]
            own = unit(rig.ends[c] - rig.heads[c])
            if float(np.linalg.norm(step)) > eps:
                # It starts further up the neck and does not hang down (a jaw) -- a head bone may
                # lean well forward toward the face (MakeHuman's does).
                rising = float(unit(step) @ up) > 0.5 and float(own @ up) > -0.2
                if not rig.akids[c] and len(rig.akids[x]) == 1:
                    rising = float(unit(step) @ up) > 0.5  # a lone leaf's tail may be a guess
            else:
                rising = float(own @ up) > 0.5
            lat = abs(float((rig.heads[c] - body.arms.origin) @ body.arms.normal))
            if gap <= 0.3 * length + eps and rising and lat < 0.05 * scale:
                nxt.append(c)
        if not nxt:
            return chain
        if len(nxt) > 1:
            # Several rising children: a bone named as the head or neck, else the one reaching
            # highest; eyes and jaw never get here (they branch sideways or downward).
            named = [c for c in nxt if rig.hints[c].parts & {"head", "neck"}]
            if len(named) == 1:
                nxt = named
            else:
                nxt.sort(key=lambda c: -max(float((rig.ends[i] - rig.heads[x]) @ up) for i in rig.subtree(c)))
        chain.append(nxt[0])


def _assign_column(asm: SlotAssembly, column: list[int]) -> None:
    """Spine, chest and upper chest along the bones between the hips and the neck: a convention's
    names where they are in order, otherwise first / middle / last."""
    rig = asm.rig
    if not column:
        return
    named = [(i, rig.hints[b].slot) for i, b in enumerate(column) if rig.hints[b].slot in _COLUMN]
    order = [_ANATOMICAL_ORDER[s] for _, s in named if s]
    if named and order == sorted(order) and len(set(order)) == len(order):
        for i, slot in named:
            assert slot is not None
            asm.put(slot, column[i], f"spine column between the hips and the arms, {i + 1} of {len(column)}")
        return
    if named:
        asm.conflicts.append(
            "names along the spine are out of anatomical order ("
            + ", ".join(f"{rig.names[column[i]]!r} as {s}" for i, s in named)
            + "); the spine column was assigned by position"
        )
    n = len(column)
    picks = {"spine": 0}
    if n >= 2:
        picks["chest"] = 1 if n <= 3 else int(round((n - 1) / 2 + 1e-9))
    if n >= 3:
        picks["upper_chest"] = n - 1
    for slot, i in picks.items():
        asm.put(slot, column[i], f"spine column between the hips and the arms, {i + 1} of {n}")


def _check_letters(asm: SlotAssembly, bones: list[int], side: str, limb: str) -> None:
    letters = _side_letters(asm.rig, bones)
    if letters is not None and letters != side:
        names = asm.rig.names
        word = {"L": "left", "R": "right"}
        asm.conflicts.append(
            f"the {limb} {names[bones[0]]!r}..{names[bones[-1]]!r} is named {word[letters]} but lies on the "
            f"character's {word[side]} (decided from joint positions); mapped as the {word[side]} {limb}"
        )


def _assign_twists(asm: SlotAssembly) -> None:
    rig = asm.rig
    nxt = {"upper_arm": "forearm", "forearm": "hand", "thigh": "shin", "shin": "foot"}
    for side in SIDES:
        for twist, base in _TWIST_BASE.items():
            b_slot = sided(base, side)
            if b_slot not in asm.slots:
                continue
            base_bone = asm.slots[b_slot][0]
            stop = asm.slots.get(sided(nxt[base], side), (-1, 0.0, ""))[0]
            cands = [
                b
                for b in rig.subtree(base_bone)[1:]
                if twist in rig.hints[b].parts and (stop < 0 or not rig.is_ancestor(stop, b))
            ]
            if cands:
                cands.sort(key=lambda b: (int(rig.depth[b]), rig.hints[b].number or 0))
                asm.put(sided(twist, side), cands[0], f"twist bone named so, inside the {base.replace('_', ' ')}")


def _record_name_conflicts(
    asm: SlotAssembly, arm_cuts: Mapping[int, LimbCut], legs: Mapping[int, tuple[LimbCut, int, int]], column: list[int]
) -> None:
    """Report every name rule the structure overruled (a conflict is never resolved silently)."""
    rig = asm.rig
    mapped = {b: s for s, (b, _, _) in asm.slots.items()}
    claims: dict[str, list[int]] = {}
    for i, h in enumerate(rig.hints):
        if h.slot is not None and h.weight >= 1.0 and rig.keep[i]:
            claims.setdefault(h.slot, []).append(i)
    for slot, bones in claims.items():
        if len(bones) > 1:
            chosen = asm.slots.get(slot, (-1, 0.0, ""))[0]
            asm.conflicts.append(
                " and ".join(repr(rig.names[b]) for b in bones)
                + f" all claim {slot} by name; "
                + (f"{rig.names[chosen]!r} was used" if chosen >= 0 else "none fits the structure")
            )
    for i, h in enumerate(rig.hints):
        if not rig.keep[i] or h.weight < 1.0 or h.slot is None:
            continue
        got = mapped.get(i)
        if got == h.slot:
            continue
        if got is not None and (got == mirror_slot(h.slot) or _same_finger(got, h.slot)):
            continue  # side swaps are reported per limb; finger segments are renumbered on purpose
        if len(claims.get(h.slot, [])) > 1:
            continue
        if got is not None:
            asm.conflicts.append(
                f"{rig.names[i]!r} is named as {h.slot} ({h.source}) but the hierarchy and positions make it {got}"
            )
        elif h.slot in asm.slots:
            holder, _, reason = asm.slots[h.slot]
            asm.conflicts.append(
                f"{rig.names[i]!r} is named as {h.slot} ({h.source}) but {h.slot} is {rig.names[holder]!r} ({reason})"
            )
        elif mirror_slot(h.slot) not in asm.slots or asm.slots[mirror_slot(h.slot)][0] != i:
            asm.conflicts.append(
                f"{rig.names[i]!r} is named as {h.slot} ({h.source}) but does not fit the chain there; left unmapped"
            )
    for i, h in enumerate(rig.hints):
        if h.known_unmapped and i in mapped:
            asm.conflicts.append(
                f"{rig.names[i]!r} is one the {h.source} names leave out, but the hierarchy and positions make it "
                f"{mapped[i]}"
            )
    hips = asm.slots.get("hips", (-1, 0.0, ""))[0]
    for i, h in enumerate(rig.hints):
        if (
            rig.keep[i]
            and i != hips
            and h.slot is None
            and not h.known_unmapped
            and h.parts == frozenset({"hips"})
            and hips >= 0
        ):
            asm.conflicts.append(
                f"{rig.names[i]!r} is named like the hips but does not carry both the legs and the spine; "
                f"the hips are {rig.names[hips]!r}"
            )
    # Chains whose names run against the hierarchy.
    chains: list[tuple[str, list[int]]] = [("arm", c.path) for c in arm_cuts.values()]
    chains += [("leg", c.path) for c, _, _ in legs.values()]
    for what, path in chains:
        seq = [(b, rig.hints[b].slot) for b in path if rig.hints[b].slot and rig.hints[b].weight >= 1.0]
        idx = [_ANATOMICAL_ORDER.get(s.partition(".")[0], -1) for _, s in seq if s]
        idx = [k for k in idx if k >= 0]
        if idx != sorted(idx):
            asm.conflicts.append(
                f"names along the {what} chain are out of anatomical order: "
                + ", ".join(f"{rig.names[b]!r} as {s}" for b, s in seq)
            )


def _same_finger(a: str, b: str) -> bool:
    fa, _, sa = a.partition(".")
    fb, _, sb = b.partition(".")
    return sa == sb and fa.split("_")[0] == fb.split("_")[0] and fa.split("_")[0] in FINGERS

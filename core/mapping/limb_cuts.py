"""A limb chain cut into its slots: clavicle / upper arm / forearm / hand, or thigh / shin / foot /
toes, by lengths, straightness and where the chain branches, with name rules as a strong vote.

Every cut of the chain is scored and the best kept, with its margin over the best different cut
(a small margin is a close call and lowers the confidence of what it assigns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..rig.rotations import FloatArray
from .analysis_tree import AnalysedRig
from .limb_ends import COINCIDENT, angle_deg, rest_below_ankle, toes_on_path, unit
from .mirrored_limbs import MirrorPair
from .name_hints import ARM_PARTS, LEG_PARTS, NameHint


def _name_vote(h: NameHint, role: str | None, parts: Sequence[str]) -> float:
    """How much a bone's name agrees with the role a cut gives it (``None``: no slot)."""
    if h.weight == 0.0:
        return 0.0
    if role is None:
        if h.known_unmapped:
            return 0.3 * h.weight
        return -h.weight if h.parts & set(parts) else 0.0
    if role in h.parts:
        return h.weight
    if h.known_unmapped:
        return -0.5 * h.weight
    return -h.weight if h.parts & set(parts) else 0.0


def _bend_table(points: FloatArray, eps: float, limit: float = 25.0) -> FloatArray:
    """``table[a, b]``: penalty for the chain ``points[a..b]`` not being straight -- 0 up to
    ``limit`` degrees between any segment and the chord, then 1 per 10 degrees."""
    k = len(points)
    seg = np.diff(points, axis=0)
    seglen = np.linalg.norm(seg, axis=1)
    unit_seg = seg / np.where(seglen > eps, seglen, 1.0)[:, None]
    table = np.zeros((k, k))
    for a in range(k):
        for b in range(a + 2, k):
            chord = points[b] - points[a]
            n = float(np.linalg.norm(chord))
            if n <= eps:
                continue
            cos = np.clip(unit_seg[a:b] @ (chord / n), -1.0, 1.0)
            real = seglen[a:b] > eps
            worst = float(np.degrees(np.arccos(cos[real].min()))) if real.any() else 0.0
            table[a, b] = max(0.0, worst - limit) / 10.0
    return table


@dataclass
class LimbCut:
    """A limb chain cut into parts: part -> path index."""

    path: list[int]
    parts: dict[str, int]
    cost: float
    margin: float  # cost gap to the best different cut (small: a close call)
    points: FloatArray


def _branching(rig: AnalysedRig, b: int, eps: float) -> bool:
    """Whether ``b`` is where a limb splits into several chains (fingers), not counting twist
    bones that lie along it."""
    own = rig.ends[b] - rig.heads[b]
    count = 0
    for c in rig.akids[b]:
        if rig.akids[c] or angle_deg(rig.ends[c] - rig.heads[c], own) > 25.0 or float(np.linalg.norm(own)) <= eps:
            count += 1
    return count >= 2


def _best_two(cands: list[tuple[float, tuple[int, ...]]]) -> tuple[float, tuple[int, ...], float]:
    cands.sort(key=lambda t: t[0])
    best = cands[0]
    second = next((c for c in cands[1:] if c[1] != best[1]), None)
    margin = (second[0] - best[0]) if second is not None else 10.0
    return best[0], best[1], margin


def cut_arm(rig: AnalysedRig, path: list[int], pair: MirrorPair, detached: bool = True) -> LimbCut | None:
    """The arm chain cut into clavicle, upper arm, forearm and hand; with ``detached``, the cut
    may end at the forearm (the hand hangs elsewhere)."""
    pts = rig.path_points(path)
    m = len(path)
    eps = COINCIDENT * rig.size
    seglen = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seglen)])
    lat = np.abs((pts - pair.origin) @ pair.normal)
    first_branch = next((i for i, b in enumerate(path) if _branching(rig, b, eps)), None)
    hints = [rig.hints[b] for b in path]
    bend = _bend_table(pts, eps)
    cands: list[tuple[float, tuple[int, ...]]] = []
    for s in range(m - 1):
        if seglen[s] <= eps:
            continue  # a zero-length joint is not the upper arm; the bone after it is
        clav = _pick_clavicle(rig, path, pts, s, pair, eps)
        for e in range(s + 1, m):
            if seglen[e] <= eps:
                continue
            upper = float(np.linalg.norm(pts[e] - pts[s]))
            for w in range(e + 1, m + 1 if detached else m):  # w == m: the hand is elsewhere
                fore = float(np.linalg.norm(pts[w] - pts[e]))
                if upper <= eps or fore <= eps:
                    continue
                # Upper arm about 1.15 x the forearm (0.75..1.9 across the rigs measured).
                cost = 0.7 * abs(math.log(upper / fore / 1.15))
                cost += bend[s, e] + bend[e, w]
                # The shoulder joint stands off the midline; a clavicle starts on it.
                if lat[s] < 0.2 * upper:
                    cost += 2.0
                if cum[s] > 1.3 * upper:
                    cost += cum[s] / upper - 1.3
                # Hand plus fingers about 0.7 x the forearm.
                rest = float(cum[m] - cum[w])
                if w == m:
                    cost += 0.3 + (0.75 if first_branch is not None else 0.0)
                else:
                    cost += 0.5 * abs(math.log(max(rest, eps) / fore / 0.7))
                if w < m and first_branch is not None and w != first_branch:
                    cost += 0.75
                elif w < m and first_branch is None and seglen[w] <= eps:
                    cost += 0.05  # a zero-length joint before the real hand bone
                for i, h in enumerate(hints):
                    role = {s: "upper_arm", e: "forearm", w: "hand"}.get(i)
                    if i == clav:
                        role = "shoulder"
                    cost -= _name_vote(h, role, ARM_PARTS)
                cands.append((cost, (s, e, w, clav)))
    if not cands:
        return None
    cost, (s, e, w, clav), margin = _best_two(cands)
    parts = {"upper_arm": s, "forearm": e}
    if w < m:
        parts["hand"] = w
    if clav >= 0:
        parts["shoulder"] = clav
    return LimbCut(path, parts, cost, margin, pts)


def _pick_clavicle(rig: AnalysedRig, path: list[int], pts: FloatArray, s: int, pair: MirrorPair, eps: float) -> int:
    """The clavicle among the bones before the upper arm: the one named so, else the bone whose
    segment runs most sideways (helpers before it run down or forward)."""
    if s == 0:
        return -1
    named = [i for i in range(s) if "shoulder" in rig.hints[path[i]].parts and rig.hints[path[i]].weight >= 0.6]
    if named:
        return named[-1]
    best, best_i = -1.0, -1
    for i in range(s):
        v = pts[i + 1] - pts[i]
        if float(np.linalg.norm(v)) <= eps or rig.hints[path[i]].known_unmapped:
            continue
        lateral = abs(float(unit(v) @ pair.normal))
        if lateral > best:
            best, best_i = lateral, i
    return best_i


def cut_leg(rig: AnalysedRig, path: list[int], pair: MirrorPair, up: FloatArray) -> LimbCut | None:
    pts = rig.path_points(path)
    m = len(path)
    eps = COINCIDENT * rig.size
    seglen = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seglen)])
    lat = np.abs((pts - pair.origin) @ pair.normal)
    hints = [rig.hints[b] for b in path]
    bend = _bend_table(pts, eps)
    cands: list[tuple[float, tuple[int, ...]]] = []
    for h in range(m):
        if seglen[h] <= eps:
            continue
        for k in range(h + 1, m):
            if seglen[k] <= eps:
                continue
            thigh = float(np.linalg.norm(pts[k] - pts[h]))
            for a in range(k + 1, m + 1):  # a == m: the shin ends the chain, the foot is elsewhere
                shin = float(np.linalg.norm(pts[a] - pts[k]))
                if thigh <= eps or shin <= eps:
                    continue
                line = pts[a] - pts[h]
                # Thigh about the shin's length (0.64..1.2 across the rigs measured): a weak cue.
                cost = 0.5 * abs(math.log(thigh / shin / 1.05))
                cost += bend[h, k] + bend[k, a]
                # The hip joint stands off the midline; CMU's LHipJoint starts on it.
                if lat[h] < 0.08 * thigh:
                    cost += 2.0
                # A bone before the thigh that continues the leg's line belongs to the thigh.
                if h > 0 and seglen[h - 1] > eps and angle_deg(pts[h] - pts[h - 1], line) < 20.0:
                    cost += 1.0
                if cum[h] > 0.6 * thigh:
                    cost += cum[h] / thigh - 0.6
                # Legs hang down from the hips.
                cost += max(0.0, angle_deg(line, -up) - 40.0) / 20.0
                if a < m:
                    # The foot turns forward at the ankle.
                    turn = angle_deg(pts[a + 1] - pts[a], line)
                    cost += max(0.0, 40.0 - turn) / 40.0
                else:
                    cost += 0.3
                rest = rest_below_ankle(pts, a, up, float(cum[m] - cum[a]))
                if rest > 0.6 * shin:
                    cost += 2.0 * (rest / shin - 0.6)
                toes = toes_on_path(rig, path, a, up) if a < m else -1
                for i, hint in enumerate(hints):
                    role = {h: "thigh", k: "shin", a: "foot", toes: "toes"}.get(i)
                    cost -= _name_vote(hint, role, LEG_PARTS)
                cands.append((cost, (h, k, a, toes)))
    if not cands:
        return None
    cost, (h, k, a, toes), margin = _best_two(cands)
    parts = {"thigh": h, "shin": k}
    if a < m:
        parts["foot"] = a
    if toes >= 0:
        parts["toes"] = toes
    return LimbCut(path, parts, cost, margin, pts)

"""Rigs for the control-rig tests: small hand-made :class:`RigGraph` records (a few bones, with the
rotations the expectations are written with), and game rigs generated from a plain skeleton (:func:`game_rig`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marionette.core.control_rig.graph import Link, RigGraph


def rot(axis: str, degrees: float) -> np.ndarray:
    """The 3x3 rotation by ``degrees`` about armature axis ``axis`` (right-handed)."""
    a = np.radians(degrees)
    c, s = np.cos(a), np.sin(a)
    return {
        "x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
        "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
        "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
    }[axis]


def placement(r: np.ndarray | None = None, at=(0.0, 0.0, 0.0)) -> np.ndarray:
    m = np.eye(4)
    if r is not None:
        m[:3, :3] = r
    m[:3, 3] = at
    return m


def graph(
    bones: list[tuple[str, str | None, np.ndarray]],
    links: dict[str, list[Link]] | None = None,
    drivers: dict[str, tuple[str | None, tuple[str, ...], str]] | None = None,
    controls: set[str] | None = None,
    posed_rest: dict[str, np.ndarray] | None = None,
) -> RigGraph:
    """A rig of ``bones`` ``(name, parent, armature-space rest)``; ``links`` per bone name (their
    targets as bone indices); ``drivers`` per bone: ``(bone copied or None, bones read, why)``;
    ``posed_rest`` the evaluated pose with every control at rest where it differs from the rest."""
    names = [b[0] for b in bones]
    index = {n: i for i, n in enumerate(names)}
    parents = np.array([index[p] if p is not None else -1 for _, p, _ in bones], dtype=np.int64)
    rest = np.array([b[2] for b in bones], dtype=float)
    posed = rest.copy()
    for n, m in (posed_rest or {}).items():
        posed[index[n]] = m
    row = [tuple((links or {}).get(n, ())) for n in names]
    drv: list[tuple[int, tuple[int, ...], str] | None] = [None] * len(names)
    for n, (copied, reads, why) in (drivers or {}).items():
        drv[index[n]] = (index[copied] if copied is not None else -1, tuple(index[r] for r in reads), why)
    ctl = np.array([n in (controls or set()) for n in names])
    return RigGraph(tuple(names), parents, rest, posed, np.broadcast_to(np.eye(4), rest.shape).copy(), tuple(row), tuple(drv), ctl, ~ctl)


def link(kind: str, *targets: int, influence: float = 1.0, **kw) -> Link:
    """A constraint of ``kind`` named after it, on bone indices ``targets`` (weight 1 each)."""
    name = kind.replace("_", " ").title()
    return Link(kind, name, influence, tuple((t, 1.0) for t in targets), **kw)


# --- game rigs: a plain skeleton's bones driven by controls ----------------------------------

#: How a variant's deform bones follow their controls.
KINDS = ("copy_transforms", "child_of", "armature", "drivers")


@dataclass(frozen=True)
class GameRig:
    """A control rig made from a plain skeleton, as numpy: ``bones`` ``(name, parent, rest,
    length, deform)`` in creation order (deform bones first, with the skeleton's names and rests;
    then the controls), ``control_of`` (deform bone -> its control) and ``kind`` (one of
    :data:`KINDS`). The deform bones keep the skeleton's hierarchy except for Child Of and the
    Armature constraint, which expect an owner without a moving parent; the controls hang from a
    ``c_root`` in another hierarchy (every bone two levels down from its deform parent's parent's
    control where that exists), with random rolls and, where the relation keeps rest offsets,
    random head offsets."""

    kind: str
    bones: tuple[tuple[str, str | None, np.ndarray, float, bool], ...]
    control_of: dict[str, str]


def _turn_about_y(m: np.ndarray, degrees: float) -> np.ndarray:
    out = m.copy()
    out[:3, :3] = m[:3, :3] @ rot("y", degrees)
    return out


def game_rig(
    names: list[str], parents: list[str | None], rests: np.ndarray, lengths: np.ndarray, kind: str, seed: int, rolled: bool = True
) -> GameRig:
    """The game rig of ``kind`` over the skeleton ``names`` ... ``lengths`` (the controls rolled
    at random about their own Y axis unless ``rolled`` is False)."""
    if kind not in KINDS:
        raise ValueError(kind)
    rng = np.random.default_rng(seed)
    size = float(np.ptp(rests[:, :3, 3], axis=0).max())
    flat = kind in ("child_of", "armature")
    bones: list[tuple[str, str | None, np.ndarray, float, bool]] = [
        (n, None if flat else p, rests[i], float(lengths[i]), True) for i, (n, p) in enumerate(zip(names, parents, strict=True))
    ]
    control_of = {n: f"c{k:02d}" for k, n in enumerate(names)}
    bones.append(("c_root", None, placement(rot("x", -90)), 0.2 * size, False))
    parent_of = dict(zip(names, parents, strict=True))
    for i, n in enumerate(names):
        up = parent_of[n]
        if up is not None and parent_of[up] is not None and i % 2 == 0:
            up = parent_of[up]  # skip a level: another hierarchy than the deform bones'
        turn = float(rng.uniform(-180, 180))
        rest = _turn_about_y(rests[i], turn) if rolled else rests[i].copy()
        if kind in ("child_of", "armature", "drivers"):
            rest[:3, 3] += rng.normal(scale=0.02 * size, size=3)
        bones.append((control_of[n], control_of[up] if up is not None else "c_root", rest, 0.5 * float(lengths[i]) + 0.01 * size, False))
    return GameRig(kind, tuple(bones), control_of)

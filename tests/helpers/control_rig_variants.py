"""Small hand-made rigs for the control-rig tests: a :class:`RigGraph` from a few bones, and the
rotations the expectations are written with."""

from __future__ import annotations

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

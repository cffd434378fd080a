"""The plan found from the rig itself (docs/control_rigs.md#any-control-rig): each mapped bone's
constraints and drivers followed to the bone that carries keys.

From a mapped bone the walk goes on while the bone's placement is a plain copy of another bone's:
a full world-space Copy Transforms (the last one wins), a full Child Of, an Armature constraint
with one bone at full weight; a bone whose channels drivers copy one to one from another bone
gives that bone's channels. It stops at a control (:attr:`~.graph.RigGraph.controls`) or at a bone
that nothing overrides, which is keyed from the mapped bone. A relation that is not a copy (an IK,
a Damped Track, a blend of several bones, a driver that computes) stops the walk, and the mapped
bone is named with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RigError
from .graph import NEUTRAL, RigGraph, copy_link
from .plan import ControlPlan, Copy, Follow, Match, Step


def _copied_from(graph: RigGraph, i: int) -> tuple[int | None, str | None]:
    """The bone whose placement bone ``i`` copies (``None`` when it is free), or the reason it
    is neither free nor a copy."""
    link = copy_link(graph, i)
    if link is not None:
        return next(t for t, w in link.targets if w != 0.0), None
    links = [k for k in graph.links[i] if k.kind not in NEUTRAL]
    if not links:
        return None, None
    return None, links[-1].describe()


def found_plan(graph: RigGraph, bones: Sequence[str]) -> ControlPlan:
    """The plan that keys, for each of ``bones`` (the mapped bones), the bone its placement comes
    from. Raises :class:`RigError` naming every mapped bone whose placement comes from a relation
    the solve does not invert."""
    steps: list[Step] = []
    keyed: set[int] = set()
    problems: list[str] = []
    for bone in bones:
        i = graph.bone(bone)
        x, seen, path = i, {i}, [i]
        while True:
            d = graph.drivers[x]
            if d is not None:
                copy_of, _reads, why = d
                if copy_of < 0 or graph.links[x]:
                    problems.append(f"{bone!r} ({why}" + (f", on {graph.names[x]!r})" if x != i else ")"))
                    break
                if x != i:
                    problems.append(f"{bone!r} (follows {graph.names[x]!r}, whose channels drivers copy)")
                    break
                if copy_of not in keyed:
                    steps.append(Copy(graph.names[copy_of], bone))
                    keyed.add(copy_of)
                break
            source, blocked = _copied_from(graph, x)
            if blocked is not None:
                problems.append(f"{bone!r} ({blocked}" + (f" on {graph.names[x]!r})" if x != i else ")"))
                break
            if source is None:  # free: the bone that carries keys
                if x not in keyed:
                    hops = tuple(graph.names[k] for k in path[1:])  # the path ends at the control
                    plain = all(copy_link(graph, k).kind == "COPY_TRANSFORMS" for k in path if k != x)  # type: ignore[union-attr]
                    steps.append(Match(graph.names[x], bone) if plain else Follow(graph.names[x], bone, hops))
                    keyed.add(x)
                break
            if source in seen:
                problems.append(f"{bone!r} (its constraints loop back to {graph.names[source]!r})")
                break
            seen.add(source)
            path.append(source)
            x = source
    if problems:
        shown = ", ".join(problems[:6]) + (f" and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise RigError(
            "the target's bones follow other bones in ways Marionette cannot key back onto controls: "
            f"{shown}; nothing was written (key the deform bones instead with --control-rig off / Control Rig: Off, "
            "or map the slots onto the controls)"
        )
    depth = {}
    for s in steps:
        j, k = graph.bone(s.control), 0
        while j >= 0:
            j, k = int(graph.parents[j]), k + 1
        depth[s.control] = k
    steps.sort(key=lambda s: depth[s.control])
    return ControlPlan("controls found from the constraints", tuple(steps))

"""The quadruped profile's slots (docs/mapping.md#quadrupeds): chains numbered from the body
outwards, so a chain is as long as the rig makes it.

``pelvis`` (the body's rigid base), ``spine_1`` ... (pelvis to the bone carrying the front legs),
``neck_1`` ..., ``head``, ``jaw``, ``tail_1`` ..., ``ear_1.L`` ..., and four legs
``front_leg_1.L`` ... ``hind_leg_4.R``. ``.L`` / ``.R`` are the animal's own left and right.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: Chains in profile order (parents first); single-bone parts are chains of one bone.
CHAINS = ("pelvis", "spine", "neck", "head", "jaw", "tail", "front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R", "ear.L", "ear.R")
SINGLE = ("pelvis", "head", "jaw")
LEG_CHAINS = ("front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R")
#: The slots every quadruped mapping fills (a chain needs at least its first bone).
QUADRUPED_MINIMUM = ("pelvis", "spine_1", "head", "front_leg_1.L", "front_leg_1.R", "hind_leg_1.L", "hind_leg_1.R")

_SLOT = re.compile(r"^(spine|neck|tail|front_leg|hind_leg|ear)_([1-9]\d?)(?:\.([LR]))?$")
_SIDED = ("front_leg", "hind_leg", "ear")


def chain_slot(chain: str, k: int) -> str:
    """The slot of bone ``k`` (from 1) of ``chain`` (``spine``, ``front_leg.L`` ...)."""
    base, _, side = chain.partition(".")
    return f"{base}_{k}" + (f".{side}" if side else "")


def parse_slot(slot: str) -> tuple[str, int] | None:
    """``(chain, k)`` of a quadruped slot, ``None`` for a name that is not one."""
    if slot in SINGLE:
        return slot, 1
    m = _SLOT.match(slot)
    if m is None or (m.group(1) in _SIDED) != (m.group(3) is not None):
        return None
    return m.group(1) + (f".{m.group(3)}" if m.group(3) else ""), int(m.group(2))


def is_quadruped_slot(slot: str) -> bool:
    return parse_slot(slot) is not None


def is_quadruped_mapping(slots: Iterable[str]) -> bool:
    """Whether a mapping's slots are of the quadruped profile (it names a pelvis)."""
    return "pelvis" in set(slots)


def slot_order(slot: str) -> tuple[int, int]:
    parsed = parse_slot(slot)
    if parsed is None:
        return (len(CHAINS), 0)
    return CHAINS.index(parsed[0]), parsed[1]


def chain_slots(slots: Mapping[str, str]) -> dict[str, list[str]]:
    """The chains of a quadruped mapping (slot -> bone) as chain -> bones from the body outwards,
    in profile order; a gap in the numbering ends a chain."""
    numbered: dict[str, dict[int, str]] = {}
    for slot, bone in slots.items():
        parsed = parse_slot(slot)
        if parsed is not None:
            numbered.setdefault(parsed[0], {})[parsed[1]] = bone
    out: dict[str, list[str]] = {}
    for chain in CHAINS:
        bones = numbered.get(chain, {})
        run: list[str] = []
        while len(run) + 1 in bones:
            run.append(bones[len(run) + 1])
        if run:
            out[chain] = run
    return out

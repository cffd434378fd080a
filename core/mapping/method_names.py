"""The names of the retarget methods, and the method tables that give one method per humanoid
slot: parsed from text (the command line's ``--methods``), validated (a mapping file's ``methods``,
a Batch Bake setting) and normalised, in one place."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import MappingError
from .humanoid import AXIAL, EXTRA_SLOTS, FINGER_SLOTS, SIDES, SLOT_PARENT, SLOTS, TWIST_SLOTS, sided

GEOMETRIC = "GEOMETRIC"
REST_SPACE = "REST_SPACE"
LOCAL_CURL = "LOCAL_CURL"
METHODS: tuple[str, ...] = (GEOMETRIC, REST_SPACE, LOCAL_CURL)

#: Names a method table (and the command line) may use for several slots at once.
SLOT_GROUPS: dict[str, tuple[str, ...]] = {
    "all": SLOTS,
    "trunk": AXIAL,
    "arms": tuple(sided(p, s) for s in SIDES for p in ("shoulder", "upper_arm", "forearm", "hand")),
    "legs": tuple(sided(p, s) for s in SIDES for p in ("thigh", "shin", "foot", "toes")),
    "fingers": FINGER_SLOTS,
    "twists": TWIST_SLOTS,
    "face": EXTRA_SLOTS,
}


def method_name(text: str) -> str:
    m = text.strip().upper().replace("-", "_").replace(" ", "_")
    aliases = {"GEOMETRIC_FRAMES": GEOMETRIC, "REST": REST_SPACE, "RESTSPACE": REST_SPACE, "CURL": LOCAL_CURL}
    m = aliases.get(m, m)
    if m not in METHODS:
        raise MappingError(f"unknown retarget method {text!r}; use one of geometric, rest-space, local-curl")
    return m


def check_method_table(methods: Mapping[str, str] | None) -> dict[str, str]:
    """A validated copy of ``methods`` (slot -> method, names normalised); refuses unknown slots,
    unknown methods and local curl outside the fingers."""
    table: dict[str, str] = {}
    for slot, method in (methods or {}).items():
        if slot not in SLOT_PARENT:
            raise MappingError(f"unknown humanoid slot {slot!r} in the method table")
        m = method_name(method)
        if m == LOCAL_CURL and slot not in FINGER_SLOTS:
            raise MappingError(f"local curl is for finger slots; {slot!r} cannot use it")
        table[slot] = m
    return table


def parse_method_table(spec: str) -> dict[str, str]:
    """Method table from text such as ``"rest-space"`` or ``"geometric,fingers=local-curl"``.

    Items are separated by commas and applied in order, later ones winning: a bare method applies
    to every slot (local curl to the fingers only), ``NAME=method`` to a slot (``hand.L``) or a
    group (``trunk``, ``arms``, ``legs``, ``fingers``, ``twists``, ``face``, ``all``). Slots left
    at ``GEOMETRIC`` are not listed: the default needs no entry.
    """
    table: dict[str, str] = {}
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            name, value = "all", item
        method = method_name(value)
        name = name.strip()
        if name in SLOT_GROUPS:
            slots = SLOT_GROUPS[name]
        elif name in SLOT_PARENT:
            slots = (name,)
        else:
            raise MappingError(f"{name!r} is neither a humanoid slot nor a group ({', '.join(SLOT_GROUPS)})")
        if method == LOCAL_CURL:
            slots = tuple(s for s in slots if s in FINGER_SLOTS)
            if not slots:
                raise MappingError(f"local curl is for finger slots; {name!r} has none")
        for s in slots:
            table[s] = method
    return {s: m for s, m in check_method_table(table).items() if m != GEOMETRIC}

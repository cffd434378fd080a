"""The naming conventions are data the matcher can rely on: every name fills a humanoid slot that
exists, no name means two things inside one convention, and every convention can be told apart
from every other by its own names.

These are measured on the tables themselves (names expanded for both sides and folded the way
bone names are compared), not on what the matcher returns.
"""

from __future__ import annotations

import string
from itertools import permutations

import pytest

from marionette.core.mapping.conventions import CONVENTIONS
from marionette.core.mapping.humanoid import SIDES, SLOT_PARENT, sided
from marionette.core.mapping.name_hints import name_key
from marionette.core.mapping.naming_convention import SIDE_WORDS, NameConvention

KEYS = [c.key for c in CONVENTIONS]


def _placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


def _readings(conv: NameConvention) -> dict[str, set[str | None]]:
    """Folded name -> every meaning the convention gives it (a slot, or ``None``: left out on purpose)."""
    out: dict[str, set[str | None]] = {}
    for name in conv.unmapped_names():
        out.setdefault(name_key(name), set()).add(None)
    for slot, names in conv.names_by_slot().items():
        for name in names:
            out.setdefault(name_key(name), set()).add(slot)
    return out


def test_the_registry_lists_each_convention_and_preset_once():
    assert len(set(KEYS)) == len(KEYS) > 10
    presets = [p for c in CONVENTIONS for p, _ in c.presets]
    assert len(set(presets)) == len(presets)
    assert all(c.presets for c in CONVENTIONS), "every convention ships a preset"


@pytest.mark.parametrize("conv", CONVENTIONS, ids=KEYS)
def test_every_name_fills_an_existing_humanoid_slot(conv):
    for part, templates in conv.templates_by_part().items():
        assert templates and all(templates), part
        fields = {f for t in templates for f in _placeholders(t)}
        assert fields <= set(SIDE_WORDS), (part, fields - set(SIDE_WORDS))
        if fields:
            # A sided part: both of its slots exist (``upper_arm`` -> ``upper_arm.L``, ``upper_arm.R``).
            assert part not in SLOT_PARENT, part
            assert all(sided(part, side) in SLOT_PARENT for side in SIDES), part
        else:
            assert part in SLOT_PARENT and not part.endswith((".L", ".R")), part
    names = conv.names_by_slot()
    assert set(names) <= set(SLOT_PARENT)
    for slot, spelled in names.items():
        assert all(n and "{" not in n and "}" not in n for n in spelled), (slot, spelled)
    # Both sides of every sided slot, spelled differently (else left and right would read alike).
    for slot in names:
        if slot.endswith(".L"):
            right = slot[:-2] + ".R"
            assert right in names, slot
            assert {name_key(n) for n in names[slot]}.isdisjoint(name_key(n) for n in names[right]), slot
    for name in conv.unmapped_names():
        assert name and "{" not in name, name


@pytest.mark.parametrize("conv", CONVENTIONS, ids=KEYS)
def test_no_name_means_two_things_inside_one_convention(conv):
    clashes = {key: meanings for key, meanings in _readings(conv).items() if len(meanings) > 1}
    assert not clashes


@pytest.mark.parametrize(("a", "b"), list(permutations(CONVENTIONS, 2)), ids=lambda c: c.key)
def test_a_rig_named_by_one_convention_reads_as_no_other(a, b):
    """A rig spelled wholly in ``a``'s names (the first spelling of each slot, as its preset is)
    has at least one name that ``b`` does not read as the same slot: the two conventions can be
    told apart by the names alone."""
    own = {name_key(names[0]): slot for slot, names in a.names_by_slot().items()}
    other = _readings(b)
    read_alike = [key for key, slot in own.items() if other.get(key) == {slot}]
    assert len(read_alike) < len(own), f"{b.key} reads every name of {a.key} as the same slot"

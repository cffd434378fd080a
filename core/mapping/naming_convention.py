"""What a naming convention is: the bone names one exporter or rig family gives each humanoid slot.

The conventions themselves are data, one module per rig family in :mod:`core.mapping.conventions`;
this module holds the shape of that data and how its templates expand into concrete names.

Templates
---------
* A name template may carry a side placeholder: ``{Side}`` -> Left/Right, ``{side}`` ->
  left/right, ``{S}`` -> L/R, ``{s}`` -> l/r, ``{jp}`` -> 左/右 (MMD). A slot given by a template
  with a placeholder is a sided part (``upper_arm`` -> ``upper_arm.L`` and ``upper_arm.R``); one
  without is an axial slot.
* Fingers are given as one pattern (:class:`FingerNames`): ``{f}`` is the finger's word, ``{n}``
  the segment's, plus the side placeholders. A convention's explicit ``slots`` entry for a finger
  segment takes the place of what the pattern gives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .humanoid import FINGERS, SIDES, SLOT_PARENT, sided

#: Side placeholders usable in name templates: ``{Side}`` -> Left/Right, ``{side}`` -> left/right,
#: ``{S}`` -> L/R, ``{s}`` -> l/r, ``{jp}`` -> 左/右 (MMD).
SIDE_WORDS: dict[str, tuple[str, str]] = {
    "Side": ("Left", "Right"),
    "side": ("left", "right"),
    "S": ("L", "R"),
    "s": ("l", "r"),
    "jp": ("左", "右"),
}


@dataclass(frozen=True)
class FingerNames:
    """Every finger segment's name from one pattern: ``pattern.format(f=words[finger], n=segment)``,
    side placeholders kept (``"{Side}Hand{f}{n}"`` -> ``LeftHandIndex2``)."""

    pattern: str
    words: Mapping[str, str]  # finger ("thumb", "index", "middle", "ring", "little") -> its word
    segments: tuple[str, str, str] = ("1", "2", "3")

    def templates(self) -> dict[str, tuple[str, ...]]:
        """Finger part (``index_2``) -> name templates, side placeholders left in place."""
        out: dict[str, tuple[str, ...]] = {}
        for finger in FINGERS:
            for k, seg in enumerate(self.segments, start=1):
                keep_sides = {s: "{" + s + "}" for s in SIDE_WORDS}
                out[f"{finger}_{k}"] = (self.pattern.format(f=self.words[finger], n=seg, **keep_sides),)
        return out


@dataclass(frozen=True)
class NameConvention:
    """The bone names one exporter or rig family uses.

    ``slots`` maps an axial slot (``"hips"``) or a sided part (``"upper_arm"``, ``"thumb_1"``) to
    name templates, the first being the canonical spelling used for presets; ``fingers`` gives the
    finger segments by pattern. ``unmapped`` lists bones the convention has that deliberately fill
    no slot (helpers, end markers, extra spine segments the retarget treats as intermediate).
    ``presets`` gives (preset name, prefix) pairs: the prefix is prepended to every name when a
    preset is written (``mixamorig:``).
    """

    key: str
    title: str
    slots: Mapping[str, tuple[str, ...]]
    fingers: FingerNames | None = None
    unmapped: tuple[str, ...] = ()
    presets: tuple[tuple[str, str], ...] = ()

    def templates_by_part(self) -> dict[str, tuple[str, ...]]:
        """Slot or sided part -> name templates, the finger pattern expanded (explicit entries win)."""
        out = dict(self.slots)
        if self.fingers is not None:
            for part, templates in self.fingers.templates().items():
                out.setdefault(part, templates)
        return out

    def names_by_slot(self) -> dict[str, tuple[str, ...]]:
        """Concrete slot -> names, both sides expanded."""
        out: dict[str, tuple[str, ...]] = {}
        for part, templates in self.templates_by_part().items():
            if part in SLOT_PARENT and not is_sided_template(templates):
                out[part] = tuple(templates)
                continue
            for k, side in enumerate(SIDES):
                out[sided(part, side)] = tuple(expand(t, k) for t in templates)
        return out

    def unmapped_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for t in self.unmapped:
            if is_sided_template((t,)):
                names.extend(expand(t, k) for k in range(2))
            else:
                names.append(t)
        return tuple(names)


def is_sided_template(templates: Iterable[str]) -> bool:
    return any("{" in t for t in templates)


def expand(template: str, side_index: int) -> str:
    """The template with its side placeholders filled for side 0 (left) or 1 (right)."""
    return template.format(**{k: v[side_index] for k, v in SIDE_WORDS.items()})

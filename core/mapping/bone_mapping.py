"""A humanoid bone mapping as data: which bone of a rig fills which slot, and its JSON file.

A :class:`BoneMapping` is slot -> :class:`MappedBone` (the bone, how sure the mapper is, and why),
plus the conflicts found while mapping, the naming convention recognised, why the rig is refused
as a humanoid if it is, and the retarget method of slots not using the default. It round-trips
through JSON (``{"format": "marionette.bone_mapping", "version": 1, "slots": {...}}``): the Bone
Mapping list saves it, ``--mapping FILE.json`` and the shipped presets load it. Every check on a
file names the slot or field at fault in one line (:class:`~core.errors.MappingError`).

Slots are the names of :mod:`core.mapping.humanoid` (``hips``, ``upper_arm.L``, ``thumb_1.R`` ...);
``.L`` / ``.R`` mean the *character's* own left and right.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..batch.pack_limits import not_regular
from ..errors import MappingError
from .body_description import checked_body
from .humanoid import MINIMUM_SLOTS, SLOT_PARENT, SLOTS
from .method_names import GEOMETRIC, check_method_table
from .quadruped_profile import is_quadruped_slot, slot_order

FORMAT = "marionette.bone_mapping"
#: How a user fills slots the auto-mapper left empty (the end of every refusal for missing slots).
FIX_ADVICE = (
    "pick the bones for the missing slots in the Bone Mapping list (sidebar > Retarget) and retarget, "
    "or pass --mapping FILE.json (a mapping saved from that list)"
)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class MappedBone:
    """One filled slot: the bone, how sure the mapper is, and why (for a person to read)."""

    bone: str
    confidence: float
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.bone, str) or not self.bone:
            raise MappingError(f"a mapped bone needs a non-empty name, got {self.bone!r}")
        c = float(self.confidence)
        if not (0.0 <= c <= 1.0) or not math.isfinite(c):
            raise MappingError(f"confidence of {self.bone!r} must be in [0, 1], got {self.confidence!r}")
        object.__setattr__(self, "confidence", c)


def _checked_methods(methods: Mapping[str, str] | None) -> dict[str, str]:
    return {s: m for s, m in check_method_table(methods).items() if m != GEOMETRIC}


class BoneMapping:
    """Slot -> bone for one rig, with the conflicts found while mapping it.

    A mapping is plain data: it round-trips through JSON (:meth:`to_json`, :meth:`save`), can be
    edited (:meth:`with_bone` returns an edited copy) and shipped as a preset. Two mappings are
    equal when slots (bone, confidence, reason), conflicts, convention and refusal are equal.
    """

    __slots__ = ("slots", "conflicts", "convention", "refusal", "methods", "body")

    def __init__(
        self,
        slots: Mapping[str, MappedBone] | None = None,
        conflicts: Iterable[str] = (),
        convention: str | None = None,
        refusal: str | None = None,
        methods: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        given = dict(slots or {})
        # A quadruped's chains (docs/mapping.md#quadrupeds) or the humanoid profile's slots.
        unknown = [s for s in given if s not in SLOT_PARENT and not is_quadruped_slot(s)]
        if unknown:
            raise MappingError(f"unknown humanoid slot(s): {', '.join(sorted(unknown))}")
        owner: dict[str, str] = {}
        for slot, mb in given.items():
            if not isinstance(mb, MappedBone):
                raise MappingError(f"slot {slot!r} must hold a MappedBone, got {type(mb).__name__}")
            if mb.bone in owner:
                raise MappingError(f"bone {mb.bone!r} is mapped to both {owner[mb.bone]!r} and {slot!r}")
            owner[mb.bone] = slot
        # Profile order (parents first) so listings and JSON read the same way every time.
        self.slots: dict[str, MappedBone] = {s: given[s] for s in SLOTS if s in given}
        self.slots.update({s: given[s] for s in sorted((s for s in given if s not in SLOT_PARENT), key=slot_order)})
        self.conflicts: list[str] = [str(c) for c in conflicts]
        self.convention = convention
        self.refusal = refusal
        # Slot -> retarget method for slots not using geometric frames (the default needs no entry).
        self.methods: dict[str, str] = _checked_methods(methods)
        # A body described as chains (docs/pipeline.md#other-bodies), for rigs no profile fits.
        self.body: dict[str, Any] | None = checked_body(body)

    # --- queries ---------------------------------------------------------------------------

    def bone_for(self, slot: str) -> str | None:
        if slot not in SLOT_PARENT and not is_quadruped_slot(slot):
            raise MappingError(f"unknown humanoid slot {slot!r}")
        mb = self.slots.get(slot)
        return None if mb is None else mb.bone

    def slot_for(self, bone: str) -> str | None:
        for slot, mb in self.slots.items():
            if mb.bone == bone:
                return slot
        return None

    def missing(self, slots: Iterable[str] = MINIMUM_SLOTS) -> list[str]:
        return [s for s in slots if s not in self.slots]

    @property
    def is_humanoid(self) -> bool:
        return self.refusal is None and not self.missing()

    def require_humanoid(self) -> None:
        """Refuse (:class:`MappingError`) a rig that cannot be retargeted as a humanoid, naming
        what is missing (docs/mapping.md#conflicts-and-refusal)."""
        message = self.refusal_message()
        if message is not None:
            raise MappingError(message)

    def refusal_message(self) -> str | None:
        """Why the rig cannot be retargeted as a humanoid (``None`` when it can): the refusal, the
        missing slots with the nearest bones passed over for each and why, and how to fix it."""
        missing = self.missing()
        if self.refusal is None and not missing:
            return None
        parts = []
        if self.refusal is not None:
            parts.append(f"not a humanoid rig: {self.refusal}")
        if missing:
            found = ", ".join(s for s in MINIMUM_SLOTS if s in self.slots) or "none"
            parts.append(f"missing {', '.join(missing)} (found: {found})")
            parts += [c for c in self.conflicts if c.partition(" not found:")[0] in missing]
            parts.append(f"to fix it, {FIX_ADVICE}")
        return "; ".join(parts)

    def __len__(self) -> int:
        return len(self.slots)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BoneMapping):
            return NotImplemented
        return (
            self.slots == other.slots
            and self.conflicts == other.conflicts
            and self.convention == other.convention
            and self.refusal == other.refusal
            and self.methods == other.methods
            and self.body == other.body
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-looking data: compare, do not hash

    def __repr__(self) -> str:
        extra = f", {len(self.conflicts)} conflicts" if self.conflicts else ""
        conv = f", convention {self.convention!r}" if self.convention else ""
        ref = ", refused" if self.refusal else ""
        return f"BoneMapping({len(self.slots)} slots{conv}{extra}{ref})"

    def bones(self) -> dict[str, str]:
        """Slot -> bone name, the form the retarget consumes."""
        return {s: mb.bone for s, mb in self.slots.items()}

    # --- editing ---------------------------------------------------------------------------

    def with_bone(self, slot: str, bone: str | None, reason: str = "set by hand") -> BoneMapping:
        """A copy with ``slot`` set to ``bone`` (confidence 1) or cleared (``bone=None``). A bone
        already used by another slot moves to this one."""
        if slot not in SLOT_PARENT and not is_quadruped_slot(slot):
            raise MappingError(f"unknown humanoid slot {slot!r}")
        slots = {s: mb for s, mb in self.slots.items() if s != slot and (bone is None or mb.bone != bone)}
        if bone is not None:
            slots[slot] = MappedBone(bone, 1.0, reason)
        return BoneMapping(slots, self.conflicts, self.convention, self.refusal, self.methods, self.body)

    # --- serialisation ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "convention": self.convention,
            "slots": {
                s: {"bone": mb.bone, "confidence": mb.confidence, "reason": mb.reason} for s, mb in self.slots.items()
            },
            "conflicts": list(self.conflicts),
            "refusal": self.refusal,
            **({"methods": dict(self.methods)} if self.methods else {}),
            **({"body": self.body} if self.body is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BoneMapping:
        if not isinstance(data, Mapping):
            raise MappingError(f"a bone mapping must be a JSON object, got {type(data).__name__}")
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise MappingError(f"not a Marionette bone mapping (format {fmt!r}, expected {FORMAT!r})")
        version = data.get("version", FORMAT_VERSION)
        if not isinstance(version, int) or version < 1:
            raise MappingError(f"bone mapping version must be a positive integer, got {version!r}")
        if version > FORMAT_VERSION:
            raise MappingError(f"bone mapping version {version} is newer than this Marionette reads ({FORMAT_VERSION})")
        raw = data.get("slots", {})
        if not isinstance(raw, Mapping):
            raise MappingError("'slots' must be an object of slot -> bone")
        slots: dict[str, MappedBone] = {}
        for slot, value in raw.items():
            # A hand-written preset may give just the bone name.
            if isinstance(value, str):
                slots[slot] = MappedBone(value, 1.0, "from file")
            elif isinstance(value, Mapping) and isinstance(value.get("bone"), str):
                slots[slot] = MappedBone(
                    value["bone"], float(value.get("confidence", 1.0)), str(value.get("reason", "from file"))
                )
            else:
                raise MappingError(f"slot {slot!r}: expected a bone name or {{'bone': ...}}, got {value!r}")
        conflicts = data.get("conflicts", [])
        if not isinstance(conflicts, list):
            raise MappingError("'conflicts' must be a list of strings")
        methods = data.get("methods", {})
        if not isinstance(methods, Mapping):
            raise MappingError("'methods' must be an object of slot -> retarget method")
        return cls(slots, conflicts, data.get("convention"), data.get("refusal"), methods, data.get("body"))

    @classmethod
    def from_json(cls, text: str) -> BoneMapping:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MappingError(f"bone mapping is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        p = Path(path)
        tmp = p.with_name(p.name + ".partial")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(p)  # never leave a half-written preset behind

    @classmethod
    def load(cls, path: str | Path) -> BoneMapping:
        p = Path(path)
        why = not_regular(str(p)) if p.exists() else None
        if why is not None:  # a named pipe would keep the read waiting for a writer forever
            raise MappingError(f"cannot read bone mapping {p}: {why}")
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise MappingError(f"cannot read bone mapping {p}: {exc}") from exc
        try:
            return cls.from_json(text)
        except MappingError as exc:
            raise MappingError(f"{p.name}: {exc}") from exc

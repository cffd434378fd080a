"""Humanoid bone mapping: which bone of a rig fills which slot of the canonical profile (SPEC 3).

Conventions
-----------
* Slots are the names of :mod:`core.mapping.humanoid` (``hips``, ``upper_arm.L``, ``thumb_1.R`` ...).
  ``.L`` / ``.R`` mean the *character's* own left and right. They are decided from joint
  positions relative to the body (left = up x forward, with up from the hips toward the arms and
  forward from the feet, knees and face); letters in bone names are evidence only, and a name
  that contradicts the positions is reported as a conflict.
* Inputs are plain arrays: ``names`` (B), ``parents`` (B,) indices with ``-1`` for a root, in any
  order, and skeleton-space rest ``heads`` / ``tails`` (B, 3) in any units, any up axis and any
  facing: a Z-up clip lying on its back and a character facing +X map the same way.
* Name rules are data (:data:`CONVENTIONS`): for each naming convention, the bone names of each
  slot and the bones it deliberately leaves out. The shipped presets (``presets/*.json``) are
  written from the same tables by :func:`write_presets`.
* Structure decides, names advise. Limb chains are found as mirrored pairs of subtrees; the hips
  are the bone that carries both legs and the spine; each chain is cut into clavicle / upper arm /
  forearm / hand (or thigh / shin / foot / toes) by lengths, straightness and where the chain
  branches, with name rules as a strong vote. Where a name rule and the structure disagree, the
  mapping picks the best candidate and records the disagreement in :attr:`BoneMapping.conflicts`;
  nothing is resolved silently.
* Confidence is in [0, 1]: about 0.97 when a convention's name rule and the structure agree, 0.75
  for structure alone, lower where evidence is weak or contradictory.
* Bones between two mapped bones stay unmapped on purpose (extra spine and neck segments, CMU's
  ``LHipJoint``, MakeHuman's ``__`` offsets, palms): the retarget moves them with the slot above.
  Twist slots are filled only from names (``upperarm_twist_01_l``, ``upperarm02.L``).
* When the structure is not recognised (no mirrored legs and arms), names alone map the rig, with
  confidence at most 0.5 and a reason that says so.
* A rig that is not a humanoid gets a mapping whose :attr:`BoneMapping.refusal` says why (a
  quadruped's spine runs across its legs instead of continuing them upward), and
  :meth:`BoneMapping.require_humanoid` refuses it naming what is missing; :func:`check_humanoid`
  re-checks an edited or loaded mapping against the rig's positions.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..batch.pack_limits import not_regular
from ..errors import MappingError
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton
from .fingers import finger_slots
from .head_parts import face_slots
from .humanoid import AXIAL, FINGERS, MINIMUM_SLOTS, SIDES, SLOT_PARENT, SLOTS, mirror_slot, sided
from .limb_ends import (
    degenerate_tails,
    describe_rejected,
    end_markers,
    find_limb_end,
    head_of_chain,
    joint_ends,
    limb_end_point,
    loose_root_parents,
    rest_below_ankle,
    tip_after,
    toes_of,
    toes_on_path,
)
from .name_prefix import shared_prefix, without_copy_numbers, without_prefix

FORMAT = "marionette.bone_mapping"
#: How a user fills slots the auto-mapper left empty (the end of every refusal for missing slots).
FIX_ADVICE = (
    "pick the bones for the missing slots in the Bone Mapping list (sidebar > Retarget) and retarget, "
    "or pass --mapping FILE.json (a mapping saved from that list)"
)
FORMAT_VERSION = 1

# --- the mapping as data ---------------------------------------------------------------------


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


RETARGET_METHODS = ("GEOMETRIC", "REST_SPACE", "LOCAL_CURL")


def _checked_methods(methods: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for slot, method in (methods or {}).items():
        if slot not in SLOT_PARENT:
            raise MappingError(f"unknown humanoid slot {slot!r} in the mapping's methods")
        m = str(method).strip().upper().replace("-", "_")
        if m not in RETARGET_METHODS:
            raise MappingError(f"slot {slot!r}: unknown retarget method {method!r} ({', '.join(RETARGET_METHODS)})")
        if m != "GEOMETRIC":
            out[slot] = m
    return out


class BoneMapping:
    """Slot -> bone for one rig, with the conflicts found while mapping it.

    A mapping is plain data: it round-trips through JSON (:meth:`to_json`, :meth:`save`), can be
    edited (:meth:`with_bone` returns an edited copy) and shipped as a preset. Two mappings are
    equal when slots (bone, confidence, reason), conflicts, convention and refusal are equal.
    """

    __slots__ = ("slots", "conflicts", "convention", "refusal", "methods")

    def __init__(
        self,
        slots: Mapping[str, MappedBone] | None = None,
        conflicts: Iterable[str] = (),
        convention: str | None = None,
        refusal: str | None = None,
        methods: Mapping[str, str] | None = None,
    ) -> None:
        given = dict(slots or {})
        unknown = [s for s in given if s not in SLOT_PARENT]
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
        self.conflicts: list[str] = [str(c) for c in conflicts]
        self.convention = convention
        self.refusal = refusal
        # Slot -> retarget method for slots not using geometric frames (the default needs no entry).
        self.methods: dict[str, str] = _checked_methods(methods)

    # --- queries ---------------------------------------------------------------------------

    def bone_for(self, slot: str) -> str | None:
        if slot not in SLOT_PARENT:
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
        what is missing (SPEC 3.4)."""
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
        if slot not in SLOT_PARENT:
            raise MappingError(f"unknown humanoid slot {slot!r}")
        slots = {s: mb for s, mb in self.slots.items() if s != slot and (bone is None or mb.bone != bone)}
        if bone is not None:
            slots[slot] = MappedBone(bone, 1.0, reason)
        return BoneMapping(slots, self.conflicts, self.convention, self.refusal, self.methods)

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
        return cls(slots, conflicts, data.get("convention"), data.get("refusal"), methods)

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


# --- name rules (data) -----------------------------------------------------------------------

#: Side placeholders usable in name templates: ``{Side}`` -> Left/Right, ``{side}`` -> left/right,
#: ``{S}`` -> L/R, ``{s}`` -> l/r, ``{jp}`` -> 左/右 (MMD).
_SIDE_WORDS: dict[str, tuple[str, str]] = {
    "Side": ("Left", "Right"),
    "side": ("left", "right"),
    "S": ("L", "R"),
    "s": ("l", "r"),
    "jp": ("左", "右"),
}


@dataclass(frozen=True)
class NameConvention:
    """The bone names one exporter or rig family uses.

    ``slots`` maps an axial slot (``"hips"``) or a sided part (``"upper_arm"``, ``"thumb_1"``) to
    name templates, the first being the canonical spelling used for presets. ``unmapped`` lists
    bones the convention has that deliberately fill no slot (helpers, end markers, extra spine
    segments the retarget treats as intermediate). ``presets`` gives (preset name, prefix) pairs:
    the prefix is prepended to every name when a preset is written (``mixamorig:``).
    """

    key: str
    title: str
    slots: Mapping[str, tuple[str, ...]]
    unmapped: tuple[str, ...] = ()
    presets: tuple[tuple[str, str], ...] = ()

    def names_by_slot(self) -> dict[str, tuple[str, ...]]:
        """Concrete slot -> names, both sides expanded."""
        out: dict[str, tuple[str, ...]] = {}
        for part, templates in self.slots.items():
            if part in SLOT_PARENT and not _is_sided_template(templates):
                out[part] = tuple(templates)
                continue
            for k, side in enumerate(SIDES):
                out[sided(part, side)] = tuple(_expand(t, k) for t in templates)
        return out

    def unmapped_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for t in self.unmapped:
            if _is_sided_template((t,)):
                names.extend(_expand(t, k) for k in range(2))
            else:
                names.append(t)
        return tuple(names)


def _is_sided_template(templates: Iterable[str]) -> bool:
    return any("{" in t for t in templates)


def _expand(template: str, side_index: int) -> str:
    return template.format(**{k: v[side_index] for k, v in _SIDE_WORDS.items()})


def _fingers(
    pattern: str, names: Mapping[str, str], segments: Sequence[str] = ("1", "2", "3")
) -> dict[str, tuple[str, ...]]:
    """Finger entries from one pattern: ``pattern.format(f=<finger word>, n=<segment>)``."""
    out: dict[str, tuple[str, ...]] = {}
    for finger in FINGERS:
        for k, seg in enumerate(segments, start=1):
            out[f"{finger}_{k}"] = (pattern.format(f=names[finger], n=seg, **{s: "{" + s + "}" for s in _SIDE_WORDS}),)
    return out


_MIXAMO = NameConvention(
    key="mixamo",
    title="Mixamo",
    slots={
        "hips": ("Hips",),
        "spine": ("Spine",),
        "chest": ("Spine1",),
        "upper_chest": ("Spine2",),
        "neck": ("Neck",),
        "head": ("Head",),
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}Arm",),
        "forearm": ("{Side}ForeArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpLeg",),
        "shin": ("{Side}Leg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}ToeBase",),
        "eye": ("{Side}Eye",),
        **_fingers(
            "{Side}Hand{f}{n}",
            {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Pinky"},
        ),
    },
    unmapped=(
        "HeadTop_End",
        "{Side}Toe_End",
        "{Side}HandThumb4",
        "{Side}HandIndex4",
        "{Side}HandMiddle4",
        "{Side}HandRing4",
        "{Side}HandPinky4",
    ),
    presets=(("mixamo", "mixamorig:"),),
)

_CMU_MOTIONBUILDER = NameConvention(
    key="cmu_motionbuilder",
    title="CMU BVH (MotionBuilder-friendly)",
    slots={
        "hips": ("Hips",),
        "spine": ("LowerBack",),
        "chest": ("Spine",),
        "upper_chest": ("Spine1",),
        "neck": ("Neck",),
        "head": ("Head",),
        # Here "Shoulder" is the clavicle and "Arm" the upper arm.
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}Arm",),
        "forearm": ("{Side}ForeArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpLeg",),
        "shin": ("{Side}Leg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}ToeBase",),
        "thumb_1": ("{S}Thumb",),
        "index_1": ("{Side}HandIndex1",),
    },
    # LHipJoint runs from the hip centre to the hip joint; FingerBase is the palm; Neck1 is an
    # upper neck segment between two mapped bones.
    unmapped=("{S}HipJoint", "{Side}FingerBase", "Neck1"),
    presets=(("cmu_motionbuilder", ""),),
)

_BIOVISION = NameConvention(
    key="cmu_3dsmax",
    title="CMU BVH (3ds Max-friendly) / Biovision",
    slots={
        "hips": ("Hips",),
        "spine": ("Chest",),
        "chest": ("Chest2",),
        "upper_chest": ("Chest3",),
        "neck": ("Neck",),
        "head": ("Head",),
        # Here "Shoulder" is the upper arm and "Collar" the clavicle.
        "shoulder": ("{Side}Collar",),
        "upper_arm": ("{Side}Shoulder", "{Side}UpArm"),
        "forearm": ("{Side}Elbow", "{Side}LowArm"),
        "hand": ("{Side}Wrist", "{Side}Hand"),
        "thigh": ("{Side}Hip", "{Side}UpLeg"),
        "shin": ("{Side}Knee", "{Side}LowLeg"),
        "foot": ("{Side}Ankle", "{Side}Foot"),
        "toes": ("{Side}Toe",),
    },
    unmapped=("{S}HipJoint", "Chest4"),
    presets=(("cmu_3dsmax", ""),),
)

_RIGIFY_SLOTS: dict[str, tuple[str, ...]] = {
    "hips": ("spine",),
    "spine": ("spine.001",),
    "chest": ("spine.002",),
    "upper_chest": ("spine.003",),
    "neck": ("spine.004",),
    "head": ("spine.006",),
    "jaw": ("jaw",),
    "eye": ("eye.{S}",),
    "shoulder": ("shoulder.{S}",),
    "upper_arm": ("upper_arm.{S}",),
    "forearm": ("forearm.{S}",),
    "hand": ("hand.{S}",),
    "thigh": ("thigh.{S}",),
    "shin": ("shin.{S}",),
    "foot": ("foot.{S}",),
    "toes": ("toe.{S}",),
    **_fingers(
        "{f}.0{n}.{S}",
        {"thumb": "thumb", "index": "f_index", "middle": "f_middle", "ring": "f_ring", "little": "f_pinky"},
    ),
}
_RIGIFY_UNMAPPED: tuple[str, ...] = (
    "spine.005",
    "pelvis.{S}",
    "heel.02.{S}",
    "breast.{S}",
    "palm.01.{S}",
    "palm.02.{S}",
    "palm.03.{S}",
    "palm.04.{S}",
    "face",
)

_RIGIFY_METARIG = NameConvention(
    key="rigify_metarig",
    title="Rigify metarig",
    slots=_RIGIFY_SLOTS,
    unmapped=_RIGIFY_UNMAPPED,
    presets=(("rigify_metarig", ""),),
)

# A generated Rigify rig deforms with DEF- copies of the metarig bones; its limb bones are split
# in two (``DEF-upper_arm.L`` + ``DEF-upper_arm.L.001``), the second half being the twist.
_RIGIFY_GENERATED = NameConvention(
    key="rigify_generated",
    title="Rigify generated rig (DEF- bones)",
    slots={
        **{
            part: tuple("DEF-" + t for t in names)
            for part, names in _RIGIFY_SLOTS.items()
            if part not in ("eye", "jaw")
        },
        "upper_arm_twist": ("DEF-upper_arm.{S}.001",),
        "forearm_twist": ("DEF-forearm.{S}.001",),
        "thigh_twist": ("DEF-thigh.{S}.001",),
        "shin_twist": ("DEF-shin.{S}.001",),
    },
    unmapped=tuple("DEF-" + t for t in _RIGIFY_UNMAPPED),
    presets=(("rigify_generated", ""),),
)

_UNREAL = NameConvention(
    key="unreal_mannequin",
    title="Unreal Engine mannequin",
    slots={
        "hips": ("pelvis",),
        "spine": ("spine_01",),
        "chest": ("spine_02",),
        "upper_chest": ("spine_03",),
        "neck": ("neck_01",),
        "head": ("head",),
        "shoulder": ("clavicle_{s}",),
        "upper_arm": ("upperarm_{s}",),
        "forearm": ("lowerarm_{s}",),
        "hand": ("hand_{s}",),
        "thigh": ("thigh_{s}",),
        "shin": ("calf_{s}",),
        "foot": ("foot_{s}",),
        "toes": ("ball_{s}",),
        "upper_arm_twist": ("upperarm_twist_01_{s}",),
        "forearm_twist": ("lowerarm_twist_01_{s}",),
        "thigh_twist": ("thigh_twist_01_{s}",),
        "shin_twist": ("calf_twist_01_{s}",),
        **_fingers(
            "{f}_0{n}_{s}", {"thumb": "thumb", "index": "index", "middle": "middle", "ring": "ring", "little": "pinky"}
        ),
    },
    unmapped=(
        "root",
        "spine_04",
        "spine_05",
        "neck_02",
        "upperarm_twist_02_{s}",
        "lowerarm_twist_02_{s}",
        "thigh_twist_02_{s}",
        "calf_twist_02_{s}",
        "index_metacarpal_{s}",
        "middle_metacarpal_{s}",
        "ring_metacarpal_{s}",
        "pinky_metacarpal_{s}",
    ),
    presets=(("unreal_mannequin", ""),),
)

_UNITY = NameConvention(
    key="unity_humanoid",
    title="Unity humanoid (Mecanim bone names)",
    slots={
        "hips": ("Hips",),
        "spine": ("Spine",),
        "chest": ("Chest",),
        "upper_chest": ("UpperChest",),
        "neck": ("Neck",),
        "head": ("Head",),
        "jaw": ("Jaw",),
        "eye": ("{Side}Eye",),
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}UpperArm",),
        "forearm": ("{Side}LowerArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpperLeg",),
        "shin": ("{Side}LowerLeg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}Toes",),
        **_fingers(
            "{Side}{f}{n}",
            {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Little"},
            ("Proximal", "Intermediate", "Distal"),
        ),
    },
    presets=(("unity_humanoid", ""),),
)

_VRM = NameConvention(
    key="vrm",
    title="VRM humanoid (Blender VRM add-on names)",
    slots={
        "hips": ("hips",),
        "spine": ("spine",),
        "chest": ("chest",),
        "upper_chest": ("upper_chest",),
        "neck": ("neck",),
        "head": ("head",),
        "jaw": ("jaw",),
        "eye": ("eye.{S}",),
        "shoulder": ("shoulder.{S}",),
        "upper_arm": ("upper_arm.{S}",),
        "forearm": ("lower_arm.{S}",),
        "hand": ("hand.{S}",),
        "thigh": ("upper_leg.{S}",),
        "shin": ("lower_leg.{S}",),
        "foot": ("foot.{S}",),
        "toes": ("toes.{S}",),
        # VRM 0.x names; VRM 1.0 calls the thumb's segments metacarpal/proximal/distal, which the
        # finger ranking handles (segments are numbered along the chain, not by word).
        **_fingers(
            "{f}.{n}.{S}",
            {"thumb": "thumb", "index": "index", "middle": "middle", "ring": "ring", "little": "little"},
            ("proximal", "intermediate", "distal"),
        ),
    },
    unmapped=("root",),
    presets=(("vrm", ""),),
)

_VROID = NameConvention(
    key="vroid",
    title="VRoid / UniVRM (J_Bip_ names)",
    slots={
        "hips": ("J_Bip_C_Hips",),
        "spine": ("J_Bip_C_Spine",),
        "chest": ("J_Bip_C_Chest",),
        "upper_chest": ("J_Bip_C_UpperChest",),
        "neck": ("J_Bip_C_Neck",),
        "head": ("J_Bip_C_Head",),
        "eye": ("J_Adj_{S}_FaceEye",),
        "shoulder": ("J_Bip_{S}_Shoulder",),
        "upper_arm": ("J_Bip_{S}_UpperArm",),
        "forearm": ("J_Bip_{S}_LowerArm",),
        "hand": ("J_Bip_{S}_Hand",),
        "thigh": ("J_Bip_{S}_UpperLeg",),
        "shin": ("J_Bip_{S}_LowerLeg",),
        "foot": ("J_Bip_{S}_Foot",),
        "toes": ("J_Bip_{S}_ToeBase",),
        **_fingers(
            "J_Bip_{S}_{f}{n}",
            {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Little"},
        ),
    },
    unmapped=("Root",),
    presets=(("vroid", ""),),
)

_DAZ_POSER = NameConvention(
    key="daz_poser",
    title="Daz Genesis 1-2 / Poser / CMU Daz-friendly BVH",
    slots={
        "hips": ("hip",),
        "spine": ("abdomen",),
        "chest": ("chest",),
        "neck": ("neck",),
        "head": ("head",),
        "eye": ("{side}Eye", "{s}Eye"),
        "shoulder": ("{s}Collar",),
        "upper_arm": ("{s}Shldr",),
        "forearm": ("{s}ForeArm",),
        "hand": ("{s}Hand",),
        "thigh": ("{s}Thigh",),
        "shin": ("{s}Shin",),
        "foot": ("{s}Foot",),
        "toes": ("{s}Toe",),
        **_fingers(
            "{s}{f}{n}", {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"}
        ),
    },
    unmapped=("abdomen2", "{s}Buttock", "pelvis"),
    presets=(("daz_poser", ""),),
)

_DAZ_GENESIS = NameConvention(
    key="daz_genesis",
    title="Daz Genesis 3 / 8",
    slots={
        "hips": ("hip",),
        "spine": ("abdomenLower",),
        "chest": ("chestLower",),
        "upper_chest": ("chestUpper",),
        "neck": ("neckLower",),
        "head": ("head",),
        "jaw": ("lowerJaw",),
        "eye": ("{s}Eye",),
        "shoulder": ("{s}Collar",),
        "upper_arm": ("{s}ShldrBend",),
        "upper_arm_twist": ("{s}ShldrTwist",),
        "forearm": ("{s}ForearmBend",),
        "forearm_twist": ("{s}ForearmTwist",),
        "hand": ("{s}Hand",),
        "thigh": ("{s}ThighBend",),
        "thigh_twist": ("{s}ThighTwist",),
        "shin": ("{s}Shin",),
        "foot": ("{s}Foot",),
        "toes": ("{s}Toe",),
        **_fingers(
            "{s}{f}{n}", {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"}
        ),
    },
    # Genesis hangs the legs from "pelvis", a sibling of the spine under "hip".
    unmapped=(
        "pelvis",
        "abdomenUpper",
        "neckUpper",
        "{s}Metatarsals",
        "{s}Carpal1",
        "{s}Carpal2",
        "{s}Carpal3",
        "{s}Carpal4",
    ),
    presets=(("daz_genesis", ""),),
)

_MAKEHUMAN = NameConvention(
    key="makehuman",
    title="MakeHuman default skeleton",
    slots={
        "hips": ("root",),
        "spine": ("spine05",),
        "chest": ("spine03",),
        "upper_chest": ("spine01",),
        "neck": ("neck01",),
        "head": ("head",),
        "jaw": ("jaw",),
        "eye": ("eye.{S}",),
        "shoulder": ("clavicle.{S}",),
        "upper_arm": ("upperarm01.{S}",),
        "upper_arm_twist": ("upperarm02.{S}",),
        "forearm": ("lowerarm01.{S}",),
        "forearm_twist": ("lowerarm02.{S}",),
        "hand": ("wrist.{S}",),
        "thigh": ("upperleg01.{S}",),
        "thigh_twist": ("upperleg02.{S}",),
        "shin": ("lowerleg01.{S}",),
        "shin_twist": ("lowerleg02.{S}",),
        "foot": ("foot.{S}",),
        **_fingers("finger{f}-{n}.{S}", {"thumb": "1", "index": "2", "middle": "3", "ring": "4", "little": "5"}),
    },
    unmapped=(
        "spine04",
        "spine02",
        "neck02",
        "neck03",
        "pelvis.{S}",
        "shoulder01.{S}",
        "metacarpal1.{S}",
        "metacarpal2.{S}",
        "metacarpal3.{S}",
        "metacarpal4.{S}",
        "breast.{S}",
    ),
    presets=(("makehuman", ""),),
)

_MAKEHUMAN_GAME = NameConvention(
    key="makehuman_game",
    title="MakeHuman game / BVH skeleton",
    slots={
        # The legs hang from "Hips", a child of "Root" beside the spine: "Root" carries both.
        "hips": ("Root",),
        "spine": ("Spine1",),
        "chest": ("Spine2",),
        "upper_chest": ("Spine3",),
        "neck": ("Neck",),
        "head": ("Head",),
        "jaw": ("Jaw",),
        "eye": ("Eye_{S}",),
        "shoulder": ("Clavicle_{S}",),
        "upper_arm": ("UpArm_{S}",),
        "forearm": ("LoArm_{S}",),
        "hand": ("Hand_{S}",),
        "thigh": ("UpLeg_{S}",),
        "shin": ("LoLeg_{S}",),
        "foot": ("Foot_{S}",),
        "toes": ("Toe_{S}",),
        **_fingers(
            "{f}{n}_{S}", {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Pinky"}
        ),
    },
    unmapped=("Hips",),
    presets=(("makehuman_game", ""),),
)

_QUATERNIUS = NameConvention(
    key="quaternius",
    title="Quaternius characters",
    slots={
        # "Body" carries legs and spine; "Hips" (its child) carries only the spine.
        "hips": ("Body",),
        "spine": ("Abdomen",),
        "chest": ("Torso",),
        "neck": ("Neck",),
        "head": ("Head",),
        "shoulder": ("Shoulder.{S}",),
        "upper_arm": ("UpperArm.{S}",),
        "forearm": ("LowerArm.{S}",),
        "hand": ("Palm.{S}",),
        "thumb_1": ("Thumb1.{S}",),
        "thumb_2": ("Thumb2.{S}",),
        # One mitten for the four fingers beside the thumb: the index, as any lone finger
        # beside the thumb reads by shape ("MiddleHand" is the metacarpus, Mittelhand).
        "index_1": ("MiddleHand.{S}",),
        "index_2": ("Fingers.{S}",),
        "thigh": ("UpperLeg.{S}",),
        "shin": ("LowerLeg.{S}",),
        "foot": ("Foot.{S}",),
    },
    unmapped=("Hips", "Bone"),
    presets=(("quaternius", ""),),
)

_BIPED = NameConvention(
    key="3dsmax_biped",
    title="3ds Max Biped",
    slots={
        "hips": ("Bip01 Pelvis",),
        "spine": ("Bip01 Spine",),
        "chest": ("Bip01 Spine1",),
        "upper_chest": ("Bip01 Spine2",),
        "neck": ("Bip01 Neck",),
        "head": ("Bip01 Head",),
        "shoulder": ("Bip01 {S} Clavicle",),
        "upper_arm": ("Bip01 {S} UpperArm",),
        "forearm": ("Bip01 {S} Forearm",),
        "hand": ("Bip01 {S} Hand",),
        "thigh": ("Bip01 {S} Thigh",),
        "shin": ("Bip01 {S} Calf",),
        "foot": ("Bip01 {S} Foot",),
        "toes": ("Bip01 {S} Toe0",),
        "upper_arm_twist": ("Bip01 {S}UpArmTwist",),
        "forearm_twist": ("Bip01 {S} ForeTwist",),
        **_fingers(
            "Bip01 {S} Finger{f}{n}",
            {"thumb": "0", "index": "1", "middle": "2", "ring": "3", "little": "4"},
            ("", "1", "2"),
        ),
    },
    unmapped=("Bip01", "Bip01 Spine3", "Bip01 Neck1", "Bip01 HeadNub"),
    presets=(("3dsmax_biped", ""),),
)

_MMD = NameConvention(
    key="mmd",
    title="MikuMikuDance (PMX/PMD Japanese names)",
    slots={
        # センター (centre) carries the whole body; 下半身 (lower body) only the legs.
        "hips": ("センター",),
        "spine": ("上半身",),
        "chest": ("上半身2",),
        "upper_chest": ("上半身3",),
        "neck": ("首",),
        "head": ("頭",),
        "eye": ("{jp}目",),
        "shoulder": ("{jp}肩",),
        "upper_arm": ("{jp}腕",),
        "forearm": ("{jp}ひじ",),
        "hand": ("{jp}手首",),
        "upper_arm_twist": ("{jp}腕捩",),
        "forearm_twist": ("{jp}手捩",),
        "thigh": ("{jp}足",),
        "shin": ("{jp}ひざ",),
        "foot": ("{jp}足首",),
        "toes": ("{jp}つま先",),
        **_fingers(
            "{jp}{f}{n}",
            {"thumb": "親指", "index": "人指", "middle": "中指", "ring": "薬指", "little": "小指"},
            ("１", "２", "３"),
        ),
        # The thumb counts from ０ (a semi-standard bone); where it is absent the chain ranking
        # moves 親指１ up to the first segment.
        "thumb_1": ("{jp}親指０",),
        "thumb_2": ("{jp}親指１",),
        "thumb_3": ("{jp}親指２",),
    },
    unmapped=(
        "全ての親",
        "グルーブ",
        "腰",
        "下半身",
        "両目",
        "腰キャンセル{jp}",
        "{jp}足D",
        "{jp}ひざD",
        "{jp}足首D",
        "{jp}足先EX",
        "{jp}肩P",
        "{jp}肩C",
        "{jp}ダミー",
    ),
    presets=(("mmd", ""),),
)

_CHARACTER_CREATOR = NameConvention(
    key="character_creator",
    title="Reallusion Character Creator / iClone (CC_Base_)",
    slots={
        # CC_Base_Hip carries CC_Base_Pelvis (the legs) and CC_Base_Waist (the spine).
        "hips": ("CC_Base_Hip",),
        "spine": ("CC_Base_Waist",),
        "chest": ("CC_Base_Spine01",),
        "upper_chest": ("CC_Base_Spine02",),
        "neck": ("CC_Base_NeckTwist01",),
        "head": ("CC_Base_Head",),
        "jaw": ("CC_Base_JawRoot",),
        "eye": ("CC_Base_{S}_Eye",),
        "shoulder": ("CC_Base_{S}_Clavicle",),
        "upper_arm": ("CC_Base_{S}_Upperarm",),
        "forearm": ("CC_Base_{S}_Forearm",),
        "hand": ("CC_Base_{S}_Hand",),
        "thigh": ("CC_Base_{S}_Thigh",),
        "shin": ("CC_Base_{S}_Calf",),
        "foot": ("CC_Base_{S}_Foot",),
        "toes": ("CC_Base_{S}_ToeBase",),
        "upper_arm_twist": ("CC_Base_{S}_UpperarmTwist01",),
        "forearm_twist": ("CC_Base_{S}_ForearmTwist01",),
        "thigh_twist": ("CC_Base_{S}_ThighTwist01",),
        "shin_twist": ("CC_Base_{S}_CalfTwist01",),
        **_fingers(
            "CC_Base_{S}_{f}{n}",
            {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"},
        ),
    },
    unmapped=(
        "CC_Base_BoneRoot",
        "CC_Base_Pelvis",
        "CC_Base_NeckTwist02",
        "CC_Base_{S}_UpperarmTwist02",
        "CC_Base_{S}_ForearmTwist02",
        "CC_Base_{S}_ThighTwist02",
        "CC_Base_{S}_CalfTwist02",
    ),
    presets=(("character_creator", ""),),
)

#: Every naming convention the mapper knows, in the order ties are broken.
CONVENTIONS: tuple[NameConvention, ...] = (
    _MIXAMO,
    _UNITY,
    _VRM,
    _VROID,
    _UNREAL,
    _RIGIFY_METARIG,
    _RIGIFY_GENERATED,
    _CMU_MOTIONBUILDER,
    _BIOVISION,
    _DAZ_POSER,
    _DAZ_GENESIS,
    _MAKEHUMAN,
    _MAKEHUMAN_GAME,
    _QUATERNIUS,
    _BIPED,
    _MMD,
    _CHARACTER_CREATOR,
)


def preset_mapping(name: str) -> BoneMapping:
    """The preset mapping ``name`` (see :func:`preset_names`), built from the name tables."""
    for conv in CONVENTIONS:
        for preset, prefix in conv.presets:
            if preset == name:
                slots = {
                    slot: MappedBone(prefix + names[0], 1.0, f"preset {preset}")
                    for slot, names in conv.names_by_slot().items()
                }
                return BoneMapping(slots, convention=conv.key)
    raise MappingError(f"no preset called {name!r}; known presets: {', '.join(preset_names())}")


def preset_names() -> list[str]:
    return [preset for conv in CONVENTIONS for preset, _ in conv.presets]


def write_presets(directory: str | Path) -> list[Path]:
    """Write every preset as ``<directory>/<name>.json``; returns the paths written."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in preset_names():
        p = d / f"{name}.json"
        preset_mapping(name).save(p)
        out.append(p)
    return out


# --- reading names ---------------------------------------------------------------------------

_NAMESPACE = re.compile(r"^.*[:|]")
_KEY_SEPARATORS = re.compile(r"[\s_.\-]+")
_KEY_PREFIX = re.compile(r"^(mixamorig\d*|valvebiped)")
_KEY_BIPED = re.compile(r"^bip0*1")
_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+")


def name_key(name: str) -> str:
    """The form bone names are compared in: Unicode-compatibility folded (full-width digits and
    letters of MMD names become ASCII), namespace dropped (``mixamorig:``), case folded and
    separators removed, so ``upper_arm.L``, ``Upper Arm L`` and ``upperarm_l`` compare equal."""
    s = unicodedata.normalize("NFKC", name)
    s = _NAMESPACE.sub("", s).casefold()
    s = _KEY_SEPARATORS.sub("", s)
    s = _KEY_PREFIX.sub("", s)
    return _KEY_BIPED.sub("bip01", s)


def _tokens(name: str) -> list[str]:
    s = _NAMESPACE.sub("", unicodedata.normalize("NFKC", name))
    return _TOKEN.findall(s)


_LEFT_TOKENS = frozenset({"l", "left"})
_RIGHT_TOKENS = frozenset({"r", "right"})
# Words that only prefix a rig family's names and say nothing about the body part.
_NOISE_TOKENS = frozenset(
    {"j", "bip", "b", "skeleton", "def", "org", "mixamorig", "cc", "base", "valvebiped", "c", "adj"}
)
# Bones that drive or decorate a rig rather than being part of the body's deforming chain.
_CONTROL_TOKENS = frozenset(
    {
        "ik", "fk", "pole", "target", "ctrl", "control", "ctl", "mch", "wgt", "vis", "tweak", "master",
        "socket", "attach", "prop", "weapon", "gun", "aim", "lookat", "parent", "sec", "ikfk",
    }
)  # fmt: skip
_END_TOKENS = frozenset({"end", "nub"})

ARM_PARTS = ("shoulder", "upper_arm", "forearm", "hand")
LEG_PARTS = ("thigh", "shin", "foot", "toes")
_TWIST_BASE = {"upper_arm_twist": "upper_arm", "forearm_twist": "forearm", "thigh_twist": "thigh", "shin_twist": "shin"}
_COLUMN = frozenset({"spine", "chest", "upper_chest"})


def _region(part: str) -> str:
    if part in ARM_PARTS or part in ("upper_arm_twist", "forearm_twist"):
        return "arm"
    if part in LEG_PARTS or part in ("thigh_twist", "shin_twist"):
        return "leg"
    if part.split("_")[0] in FINGERS:
        return "hand"
    if part in ("eye", "jaw"):
        return "head"
    return "axial"


@dataclass(frozen=True)
class _Hint:
    """What a bone's name says, with how much weight (1 for a convention's table, less for a
    generic keyword, 0 for nothing)."""

    slot: str | None = None  # exact slot named by a convention table
    parts: frozenset[str] = frozenset()  # slot parts the name allows (``upper_arm``, ``spine``...)
    region: str | None = None  # "arm", "leg", "axial", "hand", "head"
    side: str | None = None  # side letter in the name, "L"/"R"
    weight: float = 0.0
    source: str = ""  # convention key, or "keyword"
    known_unmapped: bool = False  # the convention knows this bone and leaves it out on purpose
    role: str = "body"  # "body", "control", "end", "helper"
    finger: str | None = None
    number: int | None = None  # last number in the name (orders finger segments)


# Generic keywords, tried in order on the name's words joined without side letters or numbers.
# Weights: 0.6 for a word that names one part, 0.3 for an ambiguous one ("shoulder" is the clavicle
# in some conventions and the upper arm in others; "leg" is the shin for Mixamo).
_KEYWORDS: tuple[tuple[re.Pattern[str], tuple[str, ...], float], ...] = tuple(
    (re.compile(p), parts, w)
    for p, parts, w in (
        (r"^(arm|leg|torso|neck|spine|head)joint$", (), 0.0),  # glTF generic: region only
        (r"^(face)?(eye|eyeball)$", ("eye",), 0.6),
        (r"^(lower)?jaw(bone)?$|^mandible$", ("jaw",), 0.6),  # only without a side (see below)
        (r"^(toes?|toebase|ball|toe0)$", ("toes",), 0.6),
        (r"^(hand)?thumb", ("thumb",), 0.6),
        (r"^(hand)?(index|pointer)", ("index",), 0.6),
        (r"^(hand)?(middle|mid)", ("middle",), 0.6),
        (r"^(hand)?ring", ("ring",), 0.6),
        (r"^(hand)?(pinky|pinkie|little)", ("little",), 0.6),
        (r"^(hand|wrist|palm)$", ("hand",), 0.6),
        (r"^(forearm|lowerarm|loarm|lowarm|elbow|forearmbend)$", ("forearm",), 0.6),
        (r"^(upperarm|uparm|shldr|shldrbend|humerus)$", ("upper_arm",), 0.6),
        (r"^arm$", ("upper_arm",), 0.3),
        (r"^(clavicle|collar|clav|scapula)$", ("shoulder",), 0.6),
        (r"^shoulder$", ("shoulder", "upper_arm"), 0.3),
        (r"^(thigh|upleg|upperleg|femur|thighbend)$", ("thigh",), 0.6),
        (r"^(shin|calf|lowerleg|loleg|lowleg|knee|crus|tibia)$", ("shin",), 0.6),
        (r"^(foot|ankle)$", ("foot",), 0.6),
        (r"^leg$", ("thigh", "shin"), 0.3),
        (r"^(hips?|pelvis)$", ("hips",), 0.6),
        (
            r"^(spine|abdomen|abdomenlower|abdomenupper|lowerback|waist|torso|back|lumbar)$",
            ("spine", "chest", "upper_chest"),
            0.3,
        ),
        (r"^(chest|upperchest|chestupper|chestlower|ribcage|thorax)$", ("chest", "upper_chest"), 0.4),
        (r"^neck$", ("neck",), 0.6),
        (r"^(head|skull)$", ("head",), 0.6),
    )
)
_TWIST_WORDS = (
    (re.compile(r"^(upperarm|uparm|shldr|shoulder|arm)"), "upper_arm_twist"),
    (re.compile(r"^(forearm|lowerarm|loarm|fore|elbow)"), "forearm_twist"),
    (re.compile(r"^(thigh|upleg|upperleg)"), "thigh_twist"),
    (re.compile(r"^(calf|shin|lowerleg|loleg|knee)"), "shin_twist"),
)


def _generic_hint(name: str, is_leaf: bool) -> _Hint:
    toks = _tokens(name)
    low = [t.lower() for t in toks]
    side: str | None = None
    sides = {("L" if t in _LEFT_TOKENS else "R") for t in low if t in _LEFT_TOKENS | _RIGHT_TOKENS}
    for t in toks:
        if t[0] in "左右" and not t.isascii():
            sides.add("L" if t[0] == "左" else "R")
    if len(sides) == 1:
        side = next(iter(sides))
    numbers = [int(t) for t in low if t.isdigit()]
    number = numbers[-1] if numbers else None
    role = "body"
    if name.startswith("__"):
        role = "helper"  # MakeHuman's offset joints
    elif set(low) & _CONTROL_TOKENS:
        role = "control"
    elif is_leaf and (set(low) & _END_TOKENS or ("top" in low and "head" in low)):
        role = "end"
    words = [t for t in low if not t.isdigit() and t not in _LEFT_TOKENS | _RIGHT_TOKENS and t not in _NOISE_TOKENS]
    compact = "".join(words)
    if ("metacarpal" in compact or "carpal" in compact) and "thumb" not in compact:
        return _Hint(region="hand", side=side, role=role, number=number)  # palm bone, not a finger
    if "twist" in words or "roll" in words:
        rest = "".join(w for w in words if w not in ("twist", "roll"))
        for pat, part in _TWIST_WORDS:
            if pat.match(rest):
                return _Hint(None, frozenset({part}), _region(part), side, 0.6, "keyword", role=role, number=number)
        return _Hint(side=side, role=role, number=number)
    for pat, parts, weight in _KEYWORDS:
        m = pat.match(compact)
        if m is None:
            continue
        if not parts:
            region = {"arm": "arm", "leg": "leg", "torso": "axial", "spine": "axial", "neck": "axial", "head": "axial"}[
                m.group(1)
            ]
            return _Hint(region=region, side=side, source="keyword", role=role, number=number)
        pset = frozenset(parts)
        if parts[0] in FINGERS:
            # A finger word with digits names a segment; MakeHuman's "toe1-1" style per-digit toes
            # never reach here because "toe" does not match a finger word.
            return _Hint(None, frozenset(), "hand", side, weight, "keyword", role=role, finger=parts[0], number=number)
        if parts == ("jaw",) and side is not None:
            return _Hint(region="head", side=side, role=role, number=number)  # one side of the jaw line
        if parts == ("hips",) and side is not None:
            # "pelvis.L" / "hip.L": the side half of the pelvis, a leg helper, not the hips.
            return _Hint(region="leg", side=side, source="keyword", role=role, number=number)
        if parts == ("toes",) and len(numbers) > 1:
            return _Hint(region="leg", side=side, role=role, number=number)  # one toe of five
        if compact == "palm" and number is not None:
            return _Hint(region="hand", side=side, role=role, number=number)  # a metacarpal
        return _Hint(None, pset, _region(parts[0]), side, weight, "keyword", role=role, number=number)
    if compact in ("metacarpal", "carpal", "fingerbase", "metatarsals"):
        return _Hint(region="hand", side=side, role=role, number=number)
    if compact in ("finger", "fingers"):
        return _Hint(None, frozenset(), "hand", side, 0.3, "keyword", role=role, finger="", number=number)
    return _Hint(side=side, role=role, number=number)


def _convention_table(conv: NameConvention) -> dict[str, str | None]:
    table: dict[str, str | None] = {}
    for name in conv.unmapped_names():
        table[name_key(name)] = None
    for slot, names in conv.names_by_slot().items():
        for name in names:
            table[name_key(name)] = slot
    return table


_TABLES: dict[str, dict[str, str | None]] = {c.key: _convention_table(c) for c in CONVENTIONS}


def detect_convention(names: Sequence[str]) -> tuple[NameConvention | None, int]:
    """The naming convention most of ``names`` follow, and how many bones it recognises
    (``None`` when no convention recognises at least four bones)."""
    keys = [name_key(n) for n in names]
    best: NameConvention | None = None
    best_score = 0.0
    best_count = 0
    mixamo_prefix = any(unicodedata.normalize("NFKC", n).casefold().startswith("mixamorig") for n in names)
    for conv in CONVENTIONS:
        table = _TABLES[conv.key]
        count = sum(1 for k in keys if k in table)
        # Slots recognised count more than deliberately unmapped names; the mixamorig namespace is
        # unmistakable.
        slots_hit = len({table[k] for k in keys if table.get(k)})
        score = count + slots_hit + (10 if conv.key == "mixamo" and mixamo_prefix else 0)
        if score > best_score:
            best, best_score, best_count = conv, score, count
    if best is None or best_count < 4:
        return None, 0
    return best, best_count


def _name_hints(names: Sequence[str], is_leaf: Sequence[bool]) -> tuple[list[_Hint], NameConvention | None]:
    conv, score = detect_convention(names)
    # A prefix on every bone (``Character1_``), or a copy number on every one, hides the
    # convention and the words alike: names read without them where that reads better.
    bare = without_copy_numbers(names)
    bare = without_prefix(bare, shared_prefix(bare)) if conv is None else bare
    if bare != list(names):
        bare_conv, bare_score = detect_convention(bare)
        if conv is None or bare_score > score:
            names, conv = bare, bare_conv
    table = _TABLES[conv.key] if conv is not None else {}
    hints = []
    for name, leaf in zip(names, is_leaf, strict=True):
        generic = _generic_hint(name, leaf)
        key = name_key(name)
        if key in table and generic.role != "helper":
            slot = table[key]
            if slot is None:
                hints.append(
                    _Hint(
                        side=generic.side,
                        weight=1.0,
                        source=conv.key if conv else "",
                        known_unmapped=True,
                        role=generic.role,
                        number=generic.number,
                    )
                )
                continue
            part, _, side = slot.partition(".")
            finger = part.split("_")[0] if part.split("_")[0] in FINGERS else None
            hints.append(
                _Hint(
                    slot,
                    frozenset() if finger else frozenset({part}),
                    _region(part),
                    side or None,
                    1.0,
                    conv.key if conv else "",
                    role="body",
                    finger=finger,
                    number=int(part.rsplit("_", 1)[1]) if finger else generic.number,
                )
            )
        else:
            hints.append(generic)
    return hints, conv


# --- structure: the analysis tree ------------------------------------------------------------

# Below this fraction of the body size two points coincide (zero-length joints, CMU LHipJoint's
# head on the hips).
_COINCIDENT = 1e-4
# Two chains are mirror images when their resampled shapes agree within this fraction of their
# length (mocap T-poses are a few percent asymmetric).
_MIRROR_TOLERANCE = 0.2
_RESAMPLE = 9


def _unit(v: FloatArray) -> FloatArray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.zeros_like(v)


def _angle(a: FloatArray, b: FloatArray) -> float:
    """Angle in degrees between two vectors; 0 when either has no length."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na < 1e-12 or nb < 1e-12:
        return 0.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(a @ b) / (na * nb)))))


def _resample(points: FloatArray, k: int = _RESAMPLE) -> FloatArray:
    """``k`` points spaced evenly by arc length along a polyline."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    if cum[-1] <= 0.0:
        return np.repeat(points[:1], k, axis=0)
    t = np.linspace(0.0, cum[-1], k)
    return np.stack([np.interp(t, cum, points[:, d]) for d in range(3)], axis=1)


class _Rig:
    """Arrays of one rig plus the analysis tree: bones that drive or decorate the rig (IK targets,
    poles, end markers, MakeHuman ``__`` offsets, Rigify's non-deforming bones) are left out and
    their children re-hung from the nearest kept ancestor."""

    def __init__(self, names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None) -> None:
        self.names = [str(n) for n in names]
        n = len(self.names)
        self.n = n
        par = np.asarray(parents, dtype=np.int64).reshape(-1)
        if par.shape != (n,):
            raise MappingError(f"parents must have shape ({n},) to match {n} names, got {par.shape}")
        if np.any((par < -1) | (par >= n)) or np.any(par == np.arange(n)):
            bad = int(np.argwhere((par < -1) | (par >= n) | (par == np.arange(n)))[0, 0])
            raise MappingError(f"bone {self.names[bad]!r} has an invalid parent index {int(par[bad])}")
        self.parents = par
        h = np.asarray(heads, dtype=np.float64)
        if h.shape != (n, 3):
            raise MappingError(f"heads must have shape ({n}, 3), got {h.shape}")
        if not np.all(np.isfinite(h)):
            raise MappingError("bone heads must be finite")
        self.heads = h
        self.kids: list[list[int]] = [[] for _ in range(n)]
        for i, p in enumerate(par):
            if p >= 0:
                self.kids[int(p)].append(i)
        self._check_acyclic()
        if tails is None:
            # Same convention as the retarget's default ends: children's heads, else the parent's line.
            ends = joint_ends(h, par, self.kids)
            self.has_tails = False
            self.tail_ok = np.zeros(n, dtype=bool)
        else:
            ends = np.asarray(tails, dtype=np.float64)
            if ends.shape != (n, 3):
                raise MappingError(f"tails must have shape ({n}, 3), got {ends.shape}")
            if not np.all(np.isfinite(ends)):
                raise MappingError("bone tails must be finite")
            self.has_tails = True
            # Near-zero bone lengths (glTF joints): where those bones go is read from the joints.
            pts = np.concatenate([h, ends])
            short = degenerate_tails(h, ends, par, self.kids, float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))))
            ends = np.where(short[:, None], joint_ends(h, par, self.kids, ends), ends)
            self.tail_ok = ~short
        self.ends = ends
        pts = np.concatenate([h, ends])
        self.size = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))) or 1.0
        self.hints, self.convention = _name_hints(self.names, [not k for k in self.kids])
        self._build_analysis_tree()

    def _check_acyclic(self) -> None:
        state = np.zeros(self.n, dtype=np.int8)
        for start in range(self.n):
            i = start
            trail = []
            while i >= 0 and state[i] == 0:
                state[i] = 1
                trail.append(i)
                i = int(self.parents[i])
            if i >= 0 and state[i] == 1 and i in trail:
                raise MappingError(f"the bone hierarchy has a cycle through {self.names[i]!r}")
            for t in trail:
                state[t] = 2

    def _build_analysis_tree(self) -> None:
        n = self.n
        keep = np.array([h.role == "body" for h in self.hints], dtype=bool)
        deform_prefixed = [nm.startswith("DEF-") for nm in self.names]
        index = {nm: i for i, nm in enumerate(self.names)}
        if sum(deform_prefixed) >= 10:
            # A generated Rigify rig: only the DEF- bones deform. They hang from ORG- bones, so the
            # deform hierarchy is recovered through the ORG- bone's DEF- twin.
            keep &= np.array(deform_prefixed)
        if self.has_tails:
            # An importer's end marker (the FBX importer's ``*_end`` leaves), whatever its name,
            # is not a body part.
            keep[end_markers(self.heads, self.ends, self.parents, self.kids, self.size)] = False
        self.keep = keep
        apar = np.full(n, -1, dtype=np.int64)
        for i in range(n):
            if not keep[i]:
                continue
            p = int(self.parents[i])
            while p >= 0:
                if keep[p]:
                    break
                twin = index.get("DEF-" + self.names[p][4:]) if self.names[p].startswith("ORG-") else None
                if twin is not None and twin != i and keep[twin]:
                    p = twin
                    break
                p = int(self.parents[p])
            apar[i] = p
        for root, anchor in loose_root_parents(self.heads, self.ends, apar, keep, self.size).items():
            apar[root] = anchor
        self.apar = apar
        self.akids: list[list[int]] = [[] for _ in range(n)]
        self.roots: list[int] = []
        for i in range(n):
            if keep[i]:
                (self.akids[int(apar[i])] if apar[i] >= 0 else self.roots).append(i)
        # Parents-first order of the analysis tree.
        order: list[int] = []
        stack = self.roots[::-1]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(self.akids[i][::-1])
        self.order = order
        depth = np.zeros(n, dtype=np.int64)
        for i in order:
            if apar[i] >= 0:
                depth[i] = depth[apar[i]] + 1
        self.depth = depth
        # Longest path (by joint-to-joint length) from each bone's head to a leaf's end point.
        reach = np.zeros(n)
        best_kid = np.full(n, -1, dtype=np.int64)
        for i in reversed(order):
            own = float(np.linalg.norm(self.ends[i] - self.heads[i]))
            reach[i] = own
            best = -1.0
            for c in self.akids[i]:
                # Prefer deliberately unmapped twins (MMD's D-bone legs) last on a tie.
                val = float(np.linalg.norm(self.heads[c] - self.heads[i])) + reach[c]
                val *= 0.999 if self.hints[c].known_unmapped else 1.0
                if val > best:
                    best, best_kid[i] = val, c
            if best > reach[i]:
                reach[i] = best
        self.reach = reach
        self.best_kid = best_kid

    # --- paths ---------------------------------------------------------------------------

    def main_path(self, start: int) -> list[int]:
        path = [start]
        while self.best_kid[path[-1]] >= 0:
            path.append(int(self.best_kid[path[-1]]))
        return path

    def path_points(self, path: Sequence[int]) -> FloatArray:
        return np.concatenate([self.heads[list(path)], self.ends[path[-1]][None]])

    def leaf_paths(self, start: int, limit: int = 6) -> list[list[int]]:
        """The ``limit`` longest root-to-leaf paths of ``start``'s subtree."""
        paths: list[tuple[float, list[int]]] = []
        stack: list[tuple[int, list[int], float]] = [(start, [start], 0.0)]
        while stack and len(paths) < 400:
            i, path, length = stack.pop()
            kids = self.akids[i]
            if not kids:
                paths.append((length + float(np.linalg.norm(self.ends[i] - self.heads[i])), path))
            for c in kids:
                stack.append((c, path + [c], length + float(np.linalg.norm(self.heads[c] - self.heads[i]))))
        paths.sort(key=lambda t: -t[0])
        return [p for _, p in paths[:limit]]

    def is_ancestor(self, a: int, b: int) -> bool:
        """``a`` is ``b`` or above it in the analysis tree."""
        while b >= 0:
            if b == a:
                return True
            b = int(self.apar[b])
        return False

    def lca(self, a: int, b: int) -> int:
        seen = set()
        while a >= 0:
            seen.add(a)
            a = int(self.apar[a])
        while b >= 0 and b not in seen:
            b = int(self.apar[b])
        return b

    def path_between(self, top: int, bottom: int) -> list[int]:
        """Bones from ``top`` (exclusive) down to ``bottom`` (inclusive)."""
        out = []
        while bottom >= 0 and bottom != top:
            out.append(bottom)
            bottom = int(self.apar[bottom])
        return out[::-1]

    def subtree(self, i: int) -> list[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.akids[j])
        return out


# --- structure: mirrored limbs and the body --------------------------------------------------


@dataclass(frozen=True)
class _Pair:
    parent: int  # -1 when the two subtrees are roots
    a: int
    b: int
    length: float  # the shorter of the two matched chains
    normal: FloatArray  # unit, from b's side to a's side
    origin: FloatArray  # a point on the mirror plane
    error: float  # mirror error as a fraction of length
    path_a: tuple[int, ...]  # the chains that mirror each other (a prop in one hand is not on them)
    path_b: tuple[int, ...]


def _path_length(points: FloatArray) -> float:
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def _mirror_pair(rig: _Rig, parent: int, a: int, b: int) -> _Pair | None:
    longest = max(rig.reach[a], rig.reach[b])
    # Limbs are a sizeable part of the body; fingers, toes and face bones are not (and skipping
    # them keeps face rigs with hundreds of paired bones fast).
    if min(rig.reach[a], rig.reach[b]) <= 0.05 * rig.size:
        return None
    found = _match_paths(rig, [rig.main_path(a)], [rig.main_path(b)], longest)
    if found is None or found[5] > _MIRROR_TOLERANCE:
        # The longest paths differ (a prop in one hand): try the other chains.
        found = _match_paths(rig, _with_prefixes(rig.leaf_paths(a, 8)), _with_prefixes(rig.leaf_paths(b, 8)), longest)
    if found is None or found[5] > _MIRROR_TOLERANCE:
        return None
    _, n, o, pa, pb, err = found
    length = min(_path_length(rig.path_points(pa)), _path_length(rig.path_points(pb)))
    return _Pair(parent, a, b, length, n, o, err, tuple(pa), tuple(pb))


def _with_prefixes(paths: list[list[int]]) -> list[list[int]]:
    """The paths and every prefix of two bones or more: a prop that is the hand's only child ends
    every path of its arm, and the arm alone is what mirrors the other one."""
    out: list[list[int]] = []
    for p in paths:
        for k in range(len(p), 1, -1):
            if p[:k] not in out:
                out.append(p[:k])
    return out


def _match_paths(
    rig: _Rig, paths_a: list[list[int]], paths_b: list[list[int]], longest: float
) -> tuple[float, FloatArray, FloatArray, list[int], list[int], float] | None:
    best: tuple[float, FloatArray, FloatArray, list[int], list[int], float] | None = None
    for pa in paths_a:
        pts_a = rig.path_points(pa)
        la = _path_length(pts_a)
        p = _resample(pts_a)
        for pb in paths_b:
            pts_b = rig.path_points(pb)
            lb = _path_length(pts_b)
            if min(la, lb) < 0.7 * max(la, lb) or max(la, lb) <= _COINCIDENT * rig.size:
                continue
            q = _resample(pts_b)
            mp, mq = p.mean(axis=0), q.mean(axis=0)
            sep = float(np.linalg.norm(mp - mq))
            if sep < 0.05 * max(la, lb):
                continue  # the same place twice (a duplicate chain), not a mirror image
            n = (mp - mq) / sep
            o = 0.5 * (mp + mq)
            reflected = q - 2.0 * ((q - o) @ n)[:, None] * n
            err = float(np.linalg.norm(p - reflected, axis=1).mean()) / max(la, lb)
            # Prefer the longest chains that mirror well (the limb, not a finger of it).
            score = err - 0.05 * min(la, lb) / longest
            if best is None or score < best[0]:
                best = (score, n, o, pa, pb, err)
    return best


def _mirror_pairs(rig: _Rig) -> list[_Pair]:
    pairs = []
    groups = [(-1, rig.roots)] + [(i, rig.akids[i]) for i in rig.order if len(rig.akids[i]) >= 2]
    for parent, kids in groups:
        for a, b in combinations(kids, 2):
            pair = _mirror_pair(rig, parent, a, b)
            if pair is not None:
                pairs.append(pair)
    return pairs


@dataclass
class _Body:
    legs: _Pair
    arms: _Pair
    hips: int  # lowest common ancestor of legs and arms
    chest: int  # the bone the arms hang from
    up: FloatArray
    score: float


def _region_vote(rig: _Rig, root: int, region: str) -> float:
    """+1 when the names in a subtree say ``region``, -1 when they say another limb region."""
    votes = [rig.hints[i].region for i in rig.subtree(root) if rig.hints[i].region in ("arm", "leg")]
    if not votes:
        return 0.0
    return (sum(1 for v in votes if v == region) - sum(1 for v in votes if v != region)) / len(votes)


def _find_body(rig: _Rig) -> _Body | None:
    pairs = _mirror_pairs(rig)
    if not pairs:
        return None
    longest = max(p.length for p in pairs)
    big = [p for p in pairs if p.length >= 0.3 * longest]
    best: _Body | None = None
    for legs in big:
        for arms in big:
            if legs is arms or arms.parent < 0 or legs.parent < 0:
                continue
            limbs_l = (legs.a, legs.b)
            limbs_a = (arms.a, arms.b)
            # Neither pair may hang inside the other's limbs.
            if any(rig.is_ancestor(x, arms.parent) for x in limbs_l) or any(
                rig.is_ancestor(x, legs.parent) for x in limbs_a
            ):
                continue
            hips = rig.lca(legs.parent, arms.parent)
            if hips < 0 or hips == arms.parent:
                continue  # the arms must hang above the hips, along a spine
            # Up runs from where the legs leave the body to where the arms do, whatever the
            # spine bones' own layout (one long spine bone may start right at the hips' head).
            up = 0.5 * (rig.heads[arms.a] + rig.heads[arms.b]) - 0.5 * (rig.heads[legs.a] + rig.heads[legs.b])
            column = float(np.linalg.norm(up))
            if column < 0.1 * legs.length:
                continue
            score = (legs.length + arms.length) / longest
            score -= 0.25 * float(rig.depth[legs.parent] - rig.depth[hips])
            score += 0.5 * (_region_vote(rig, legs.a, "leg") + _region_vote(rig, legs.b, "leg"))
            score += 0.5 * (_region_vote(rig, arms.a, "arm") + _region_vote(rig, arms.b, "arm"))
            # The lateral axes of legs and arms agree on a standing body.
            score += 0.3 * abs(float(legs.normal @ arms.normal))
            if best is None or score > best.score:
                best = _Body(legs, arms, hips, arms.parent, _unit(up), score)
    return None if best is None else _settle_arms(rig, best)


def _settle_arms(rig: _Rig, body: _Body) -> _Body:
    """Start each arm at its own root. When the clavicles hang from different spine bones, the
    mirrored pair found is (spine bone carrying one arm and the neck, other clavicle): the leading
    bones of a matched chain that sit on the midline and branch belong to the spine, not the arm."""
    arms = body.arms
    trimmed = []
    for path in (arms.path_a, arms.path_b):
        k = 0
        while (
            k < len(path) - 3
            and len(rig.akids[path[k]]) >= 2
            and abs(float((rig.heads[path[k]] - arms.origin) @ arms.normal)) < 0.05 * arms.length
        ):
            k += 1
        trimmed.append(path[k:])
    if len(trimmed[0]) == len(arms.path_a) and len(trimmed[1]) == len(arms.path_b):
        return body
    pa, pb = int(rig.apar[trimmed[0][0]]), int(rig.apar[trimmed[1][0]])
    # The arms hang, for the neck's sake, from the higher of the two attachment bones.
    chest = pb if rig.is_ancestor(pa, pb) else pa if rig.is_ancestor(pb, pa) else body.chest
    arms = replace(arms, a=trimmed[0][0], b=trimmed[1][0], path_a=tuple(trimmed[0]), path_b=tuple(trimmed[1]))
    return replace(body, arms=arms, chest=chest)


# --- structure: cutting chains into slots ----------------------------------------------------


def _name_vote(h: _Hint, role: str | None, parts: Sequence[str]) -> float:
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
class _Cut:
    """A limb chain cut into parts: part -> path index."""

    path: list[int]
    parts: dict[str, int]
    cost: float
    margin: float  # cost gap to the best different cut (small: a close call)
    points: FloatArray


def _branching(rig: _Rig, b: int, eps: float) -> bool:
    """Whether ``b`` is where a limb splits into several chains (fingers), not counting twist
    bones that lie along it."""
    own = rig.ends[b] - rig.heads[b]
    count = 0
    for c in rig.akids[b]:
        if rig.akids[c] or _angle(rig.ends[c] - rig.heads[c], own) > 25.0 or float(np.linalg.norm(own)) <= eps:
            count += 1
    return count >= 2


def _best_two(cands: list[tuple[float, tuple[int, ...]]]) -> tuple[float, tuple[int, ...], float]:
    cands.sort(key=lambda t: t[0])
    best = cands[0]
    second = next((c for c in cands[1:] if c[1] != best[1]), None)
    margin = (second[0] - best[0]) if second is not None else 10.0
    return best[0], best[1], margin


def _cut_arm(rig: _Rig, path: list[int], pair: _Pair, detached: bool = True) -> _Cut | None:
    """The arm chain cut into clavicle, upper arm, forearm and hand; with ``detached``, the cut
    may end at the forearm (the hand hangs elsewhere)."""
    pts = rig.path_points(path)
    m = len(path)
    eps = _COINCIDENT * rig.size
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
    return _Cut(path, parts, cost, margin, pts)


def _pick_clavicle(rig: _Rig, path: list[int], pts: FloatArray, s: int, pair: _Pair, eps: float) -> int:
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
        lateral = abs(float(_unit(v) @ pair.normal))
        if lateral > best:
            best, best_i = lateral, i
    return best_i


def _cut_leg(rig: _Rig, path: list[int], pair: _Pair, up: FloatArray) -> _Cut | None:
    pts = rig.path_points(path)
    m = len(path)
    eps = _COINCIDENT * rig.size
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
                if h > 0 and seglen[h - 1] > eps and _angle(pts[h] - pts[h - 1], line) < 20.0:
                    cost += 1.0
                if cum[h] > 0.6 * thigh:
                    cost += cum[h] / thigh - 0.6
                # Legs hang down from the hips.
                cost += max(0.0, _angle(line, -up) - 40.0) / 20.0
                if a < m:
                    # The foot turns forward at the ankle.
                    turn = _angle(pts[a + 1] - pts[a], line)
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
    return _Cut(path, parts, cost, margin, pts)


# --- assembling a mapping --------------------------------------------------------------------

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


class _Assembly:
    """Slots as they are decided, with their evidence; turned into a :class:`BoneMapping`."""

    def __init__(self, rig: _Rig) -> None:
        self.rig = rig
        self.slots: dict[str, tuple[int, float, str]] = {}
        self.conflicts: list[str] = []
        self.conv = rig.convention.key if rig.convention is not None else None

    def put(self, slot: str, bone: int, why: str, base: float = 0.75, structural: bool = True) -> None:
        if slot in self.slots or any(b == bone for b, _, _ in self.slots.values()):
            return
        h = self.rig.hints[bone]
        part = slot.partition(".")[0]
        named_here = h.slot == slot or (h.slot is None and part in h.parts)
        if h.finger and part.split("_")[0] == h.finger:
            named_here = True
        if not structural:
            conf, reason = base, why
        elif named_here and h.source and h.source != "keyword":
            conf, reason = 0.97, f"name rule {h.source}; {why}"
        elif named_here:
            conf, reason = 0.88, f"structure: {why}; name agrees"
        elif h.region is not None and h.region == _region(part) and not h.parts and not h.finger:
            # glTF's generic names ("arm_joint_L_1") say which limb, not which segment.
            where = {"axial": "spine and head"}.get(h.region, h.region)
            conf, reason = 0.8, f"structure: {why}; name places it in the {where}"
        elif h.weight >= 0.6 and (h.slot is not None or h.parts) and not named_here:
            conf, reason = 0.5, f"structure: {why} (its name suggests otherwise)"
        else:
            conf, reason = base, f"structure: {why}"
        self.slots[slot] = (bone, conf, reason)

    def lower(self, slot: str, by: float, note: str) -> None:
        if slot in self.slots:
            b, c, r = self.slots[slot]
            self.slots[slot] = (b, max(0.05, c - by), f"{r}; {note}")

    def mapping(self, refusal: str | None = None) -> BoneMapping:
        names = self.rig.names
        slots = {s: MappedBone(names[b], round(c, 3), r) for s, (b, c, r) in self.slots.items()}
        return BoneMapping(slots, self.conflicts, self.conv, refusal)


def _side_letters(rig: _Rig, bones: Iterable[int]) -> str | None:
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


def _forward_vote(rig: _Rig, legs: list[tuple[_Cut, int, int]], head: int, up: FloatArray, scale: float) -> FloatArray:
    """Sum of unit cues pointing forward (perpendicular to up): feet toward the toes (weight 1),
    knees ahead of the hip-ankle line (0.5), the face ahead of the head (0.5). Cues shorter than
    2 % of the leg are noise and do not vote."""
    vote = np.zeros(3)

    def add(v: FloatArray, weight: float) -> None:
        nonlocal vote
        v = v - (v @ up) * up
        if float(np.linalg.norm(v)) > 0.02 * scale:
            vote = vote + weight * _unit(v)

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


def _map_with_body(rig: _Rig, body: _Body) -> BoneMapping:
    asm = _Assembly(rig)
    up = body.up
    eps = _COINCIDENT * rig.size
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
    leg_info: dict[int, tuple[_Cut, int, int]] = {}
    for root, matched in ((body.legs.a, body.legs.path_a), (body.legs.b, body.legs.path_b)):
        cut = _cut_leg(rig, _limb_path(rig, root, matched), body.legs, up)
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
    arm_cuts: dict[int, _Cut] = {}
    hands: dict[int, int] = {}
    for root, matched in ((body.arms.a, body.arms.path_a), (body.arms.b, body.arms.path_b)):
        cut = _cut_arm(rig, _limb_path(rig, root, matched), body.arms)
        if cut is not None:
            arm_cuts[root] = cut
            hand = cut.path[cut.parts["hand"]] if "hand" in cut.parts else -1
            if hand < 0:
                hand = _detached_end(rig, cut, "hand", body.arms, used, up, unfound, body)
            if hand < 0:
                # No hand away from the chain: the chain's own last bones hold it after all.
                cut = _cut_arm(rig, cut.path, body.arms, detached=False) or cut
                arm_cuts[root] = cut
                hand = cut.path[cut.parts["hand"]] if "hand" in cut.parts else -1
                if hand >= 0:
                    unfound.pop(root, None)
            hands[root] = hand

    # Left and right from the body: forward from feet, knees and face; left = up x forward.
    vote = _forward_vote(rig, list(leg_info.values()), head, up, body.legs.length)
    toward_a = body.legs.normal - (body.legs.normal @ up) * up  # lateral, from leg b to leg a
    forward_if_a_left = np.cross(toward_a, up)
    score = float(_unit(forward_if_a_left) @ vote)
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
    left_dir = _unit(toward_a if a_is_left else -toward_a)
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
    refusal = _upright_refusal(rig, asm)
    return asm.mapping(refusal)


def _detached_end(
    rig: _Rig, cut: _Cut, kind: str, pair: _Pair, used: set[int], up: FloatArray, unfound: dict[int, str], body: _Body
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


def _limb_path(rig: _Rig, root: int, matched: tuple[int, ...]) -> list[int]:
    """The chain to cut a limb along: the longest path, unless it leaves the chain that mirrors
    the other limb (a sword in one hand) -- then the mirrored chain."""
    main = rig.main_path(root)
    if not set(matched) <= set(main):
        return list(matched)
    # The longest path goes on past the mirrored chain: fingers do; a sword as long as the arm,
    # the hand's only child, does not belong to it.
    pts = rig.path_points(main)
    k = main.index(matched[-1]) + 1
    beyond = _path_length(pts[k:]) if k < len(main) else 0.0
    return main if beyond <= 0.6 * _path_length(pts[: k + 1]) else main[:k]


def _neck_chain(rig: _Rig, body: _Body, up: FloatArray, eps: float) -> list[int]:
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
            own = _unit(rig.ends[c] - rig.heads[c])
            if float(np.linalg.norm(step)) > eps:
                # It starts further up the neck and does not hang down (a jaw) -- a head bone may
                # lean well forward toward the face (MakeHuman's does).
                rising = float(_unit(step) @ up) > 0.5 and float(own @ up) > -0.2
                if not rig.akids[c] and len(rig.akids[x]) == 1:
                    rising = float(_unit(step) @ up) > 0.5  # a lone leaf's tail may be a guess
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


def _assign_column(asm: _Assembly, column: list[int]) -> None:
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


def _check_letters(asm: _Assembly, bones: list[int], side: str, limb: str) -> None:
    letters = _side_letters(asm.rig, bones)
    if letters is not None and letters != side:
        names = asm.rig.names
        word = {"L": "left", "R": "right"}
        asm.conflicts.append(
            f"the {limb} {names[bones[0]]!r}..{names[bones[-1]]!r} is named {word[letters]} but lies on the "
            f"character's {word[side]} (decided from joint positions); mapped as the {word[side]} {limb}"
        )


def _assign_twists(asm: _Assembly) -> None:
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
    asm: _Assembly, arm_cuts: Mapping[int, _Cut], legs: Mapping[int, tuple[_Cut, int, int]], column: list[int]
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


def _upright_refusal(rig: _Rig, asm: _Assembly) -> str | None:
    """A humanoid's spine continues its legs upward; a quadruped's runs across them."""
    s = {slot: b for slot, (b, _, _) in asm.slots.items()}
    top = s.get("head", s.get("neck", -1))
    if "hips" not in s or top < 0:
        return None
    legs = [
        rig.heads[s[sided("foot", k)]] - rig.heads[s[sided("thigh", k)]]
        for k in SIDES
        if sided("foot", k) in s and sided("thigh", k) in s
    ]
    if not legs:
        legs = [
            rig.ends[s[sided("shin", k)]] - rig.heads[s[sided("thigh", k)]]
            for k in SIDES
            if sided("shin", k) in s and sided("thigh", k) in s
        ]
    if not legs:
        return None
    down = _unit(np.mean([_unit(v) for v in legs], axis=0))
    spine = rig.heads[top] - rig.heads[s["hips"]]
    angle = _angle(spine, -down)
    if angle > 50.0:
        return (
            f"its spine runs {angle:.0f} degrees away from the line of its legs (a humanoid's spine continues "
            "its legs upward, a quadruped's runs across them), so it has no upright spine from the hips to the head"
        )
    return None


def _map_by_names(rig: _Rig) -> BoneMapping:
    """Mapping from names alone, when the structure shows no mirrored legs and arms: only what
    the hierarchy does not contradict."""
    asm = _Assembly(rig)
    idx = {}
    for i, h in enumerate(rig.hints):
        if not rig.keep[i] or h.weight < 0.6:
            continue
        if h.slot is not None:
            slot = h.slot
        elif len(h.parts) == 1:
            part = next(iter(h.parts))
            if part in AXIAL:
                slot = part
            elif h.side is not None:
                slot = sided(part, h.side)
            else:
                continue
        else:
            continue
        if slot not in idx:
            idx[slot] = i
    for slot in SLOTS:
        if slot not in idx:
            continue
        b = idx[slot]
        p = SLOT_PARENT[slot]
        while p is not None and p not in asm.slots:
            p = SLOT_PARENT[p]
        if p is not None and rig.is_ancestor(b, asm.slots[p][0]):
            asm.conflicts.append(
                f"{rig.names[b]!r} is named as {slot} but sits above {rig.names[asm.slots[p][0]]!r} ({p}); chain out of order"
            )
            continue
        src = rig.hints[b].source
        asm.put(slot, b, f"name rule {src} (structure not recognised; side from the name)", base=0.5, structural=False)
    refusal = None
    if not asm.slots:
        refusal = f"no mirrored pair of legs and arms among its {rig.n} bones and no bone named as a body part"
    else:
        refusal = _upright_refusal(rig, asm)
    return asm.mapping(refusal)


# --- public entry points ---------------------------------------------------------------------


def auto_map(names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None = None) -> BoneMapping:
    """Map a rig onto the humanoid profile from names, hierarchy and rest positions.

    ``parents`` are indices (``-1`` for roots, any order), ``heads``/``tails`` skeleton-space rest
    positions ``(B, 3)``; without tails a bone ends at its children's mean head. Never raises for a
    non-humanoid: the result carries :attr:`BoneMapping.refusal` and missing slots, and
    :meth:`BoneMapping.require_humanoid` refuses it.
    """
    if len(names) == 0:
        return BoneMapping(refusal="the armature has no bones")
    rig = _Rig(names, parents, heads, tails)
    body = _find_body(rig)
    if body is None:
        return _map_by_names(rig)
    return _map_with_body(rig, body)


def auto_map_skeleton(skeleton: Skeleton, tails: ArrayLike | None = None) -> BoneMapping:
    """:func:`auto_map` on a :class:`~core.rig.skeleton.Skeleton` (rest heads from its placements;
    ``tails`` in the skeleton's bone order)."""
    heads = skeleton.rest_placements()[:, :3, 3]
    return auto_map(skeleton.names, skeleton.parents, heads, tails)


def check_humanoid(
    names: Sequence[str],
    parents: ArrayLike,
    heads: ArrayLike,
    tails: ArrayLike | None = None,
    mapping: BoneMapping | None = None,
) -> BoneMapping:
    """The rig's mapping (``mapping`` or an automatic one), or :class:`MappingError` when the
    rig cannot be retargeted as a humanoid: missing slots named, or a body that is not upright."""
    if mapping is None:
        mapping = auto_map(names, parents, heads, tails)
    else:
        rig = _Rig(names, parents, heads, tails)
        index = {n: i for i, n in enumerate(rig.names)}
        asm = _Assembly(rig)
        for slot, mb in mapping.slots.items():
            if mb.bone not in index:
                raise MappingError(f"the mapping names bone {mb.bone!r} ({slot}), which is not in the rig")
            asm.slots[slot] = (index[mb.bone], mb.confidence, mb.reason)
        refusal = mapping.refusal or _upright_refusal(rig, asm)
        mapping = BoneMapping(mapping.slots, mapping.conflicts, mapping.convention, refusal, mapping.methods)
    mapping.require_humanoid()
    return mapping


def check_humanoid_skeleton(
    skeleton: Skeleton, tails: ArrayLike | None = None, mapping: BoneMapping | None = None
) -> BoneMapping:
    heads = skeleton.rest_placements()[:, :3, 3]
    return check_humanoid(skeleton.names, skeleton.parents, heads, tails, mapping)

"""What a bone's name says about the body part it is, read before any structure is looked at.

Names are compared in one folded form (:func:`name_key`: Unicode-compatibility folded, namespace
dropped, case folded, separators removed). :func:`detect_convention` picks the naming convention
most of a rig's names follow (:mod:`core.mapping.conventions`); :func:`read_names` then gives each
bone a :class:`NameHint`: the exact slot a convention's table names (weight 1), else what generic
words (``forearm``, ``calf``, ``thumb``) allow (weight 0.3-0.6), with the side letters, the last
number, and whether the bone drives or decorates the rig (IK targets, poles, end markers) rather
than being part of the body. Names advise; the structure decides (:mod:`core.mapping.map_by_shape`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from .conventions import CONVENTIONS
from .humanoid import FINGERS
from .name_prefix import shared_prefix, without_copy_numbers, without_prefix
from .naming_convention import NameConvention

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


def region_of(part: str) -> str:
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
class NameHint:
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


def _generic_hint(name: str, is_leaf: bool) -> NameHint:
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
        return NameHint(region="hand", side=side, role=role, number=number)  # palm bone, not a finger
    if "twist" in words or "roll" in words:
        rest = "".join(w for w in words if w not in ("twist", "roll"))
        for pat, part in _TWIST_WORDS:
            if pat.match(rest):
                return NameHint(None, frozenset({part}), region_of(part), side, 0.6, "keyword", role=role, number=number)
        return NameHint(side=side, role=role, number=number)
    for pat, parts, weight in _KEYWORDS:
        m = pat.match(compact)
        if m is None:
            continue
        if not parts:
            region = {"arm": "arm", "leg": "leg", "torso": "axial", "spine": "axial", "neck": "axial", "head": "axial"}[
                m.group(1)
            ]
            return NameHint(region=region, side=side, source="keyword", role=role, number=number)
        pset = frozenset(parts)
        if parts[0] in FINGERS:
            # A finger word with digits names a segment; MakeHuman's "toe1-1" style per-digit toes
            # never reach here because "toe" does not match a finger word.
            return NameHint(None, frozenset(), "hand", side, weight, "keyword", role=role, finger=parts[0], number=number)
        if parts == ("jaw",) and side is not None:
            return NameHint(region="head", side=side, role=role, number=number)  # one side of the jaw line
        if parts == ("hips",) and side is not None:
            # "pelvis.L" / "hip.L": the side half of the pelvis, a leg helper, not the hips.
            return NameHint(region="leg", side=side, source="keyword", role=role, number=number)
        if parts == ("toes",) and len(numbers) > 1:
            return NameHint(region="leg", side=side, role=role, number=number)  # one toe of five
        if compact == "palm" and number is not None:
            return NameHint(region="hand", side=side, role=role, number=number)  # a metacarpal
        return NameHint(None, pset, region_of(parts[0]), side, weight, "keyword", role=role, number=number)
    if compact in ("metacarpal", "carpal", "fingerbase", "metatarsals"):
        return NameHint(region="hand", side=side, role=role, number=number)
    if compact in ("finger", "fingers"):
        return NameHint(None, frozenset(), "hand", side, 0.3, "keyword", role=role, finger="", number=number)
    return NameHint(side=side, role=role, number=number)


def _convention_table(conv: NameConvention) -> dict[str, str | None]:
    table: dict[str, str | None] = {}
    for name in conv.unmapped_names():
        table[name_key(name)] = None
    for slot, names in conv.names_by_slot().items():
        for name in names:
            table[name_key(name)] = slot
    return table


CONVENTION_TABLES: dict[str, dict[str, str | None]] = {c.key: _convention_table(c) for c in CONVENTIONS}


def detect_convention(names: Sequence[str]) -> tuple[NameConvention | None, int]:
    """The naming convention most of ``names`` follow, and how many bones it recognises
    (``None`` when no convention recognises at least four bones)."""
    keys = [name_key(n) for n in names]
    best: NameConvention | None = None
    best_score = 0.0
    best_count = 0
    mixamo_prefix = any(unicodedata.normalize("NFKC", n).casefold().startswith("mixamorig") for n in names)
    for conv in CONVENTIONS:
        table = CONVENTION_TABLES[conv.key]
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


def read_names(names: Sequence[str], is_leaf: Sequence[bool]) -> tuple[list[NameHint], NameConvention | None]:
    conv, score = detect_convention(names)
    # A prefix on every bone (``Character1_``), or a copy number on every one, hides the
    # convention and the words alike: names read without them where that reads better.
    bare = without_copy_numbers(names)
    bare = without_prefix(bare, shared_prefix(bare)) if conv is None else bare
    if bare != list(names):
        bare_conv, bare_score = detect_convention(bare)
        if conv is None or bare_score > score:
            names, conv = bare, bare_conv
    table = CONVENTION_TABLES[conv.key] if conv is not None else {}
    hints = []
    for name, leaf in zip(names, is_leaf, strict=True):
        generic = _generic_hint(name, leaf)
        key = name_key(name)
        if key in table and generic.role != "helper":
            slot = table[key]
            if slot is None:
                hints.append(
                    NameHint(
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
                NameHint(
                    slot,
                    frozenset() if finger else frozenset({part}),
                    region_of(part),
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

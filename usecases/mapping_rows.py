"""The sidebar's mapping rows: auto-map the pair, save one side as a JSON preset, load one, apply
a shipped naming preset. Each entry refuses bad input (a
:class:`~marionette.core.errors.MarionetteError` whose text is the line to show) before it
changes the rows, and returns the line that says what it did."""

from __future__ import annotations

from typing import Any

from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from ..core.errors import MarionetteError
from ..core.mapping.auto_map import auto_map_skeleton
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.presets import preset_mapping
from ..properties.retarget_settings import fill_rows, mapping_from_rows


def auto_map_pair(settings: Any) -> tuple[str, str]:
    """Map both armatures' bones into the rows; returns the report level and line (a warning
    naming what is not retargetable as humanoid)."""
    s = settings
    maps = [_auto_map(s.source), _auto_map(s.target)]
    fill_rows(s, maps[0], maps[1])
    problems = [f"{o.name}: {m.refusal_message()}" for o, m in zip((s.source, s.target), maps, strict=True) if not m.is_humanoid]
    conflicts = sum(len(m.conflicts) for m in maps)
    if problems:
        return "WARNING", "Not retargetable as humanoid: " + "; ".join(problems)
    return "INFO", f"Mapped {len(s.mapping)} slots ({conflicts} conflicts to review)"


def save_mapping(settings: Any, side: str, path: str) -> str:
    """Write one side's mapping from the rows to ``path``."""
    mapping = mapping_from_rows(settings, side)
    if mapping is None:
        raise MarionetteError("No mapping to save")
    try:
        mapping.save(path)
    except (OSError, MarionetteError) as exc:
        raise MarionetteError(f"Cannot save {path}: {exc}") from exc
    return f"Saved {len(mapping)} slots to {path}"


def load_mapping(settings: Any, side: str, path: str) -> str:
    """Put the mapping in ``path`` on one side of the rows (bones the armature lacks are refused)."""
    s = settings
    loaded = BoneMapping.load(path)
    obj = s.source if side == "SOURCE" else s.target
    absent = [mb.bone for mb in loaded.slots.values() if mb.bone not in obj.data.bones]
    if absent:
        raise MarionetteError(f"{obj.name!r} has no bones called {', '.join(repr(b) for b in absent[:6])}")
    other = _other_side(s, side)
    fill_rows(s, *((loaded, other) if side == "SOURCE" else (other, loaded)))
    return f"Loaded {len(loaded)} slots for {obj.name!r}"


def apply_preset(settings: Any, side: str, name: str) -> str:
    """Apply the shipped preset ``name`` to one side (slots whose bone the armature lacks are left
    as they are)."""
    s = settings
    obj = s.source if side == "SOURCE" else s.target
    preset = preset_mapping(name)
    current = _side(s, side)
    other = _other_side(s, side)
    applied = 0
    for slot, mb in preset.slots.items():
        if mb.bone in obj.data.bones:
            current = current.with_bone(slot, mb.bone, reason=mb.reason)
            applied += 1
    if not applied:
        raise MarionetteError(f"{obj.name!r} has none of the {name} preset's bones")
    fill_rows(s, *((current, other) if side == "SOURCE" else (other, current)))
    return f"Applied {applied} of {len(preset)} preset slots to {obj.name!r}"


def _side(settings: Any, side: str) -> BoneMapping:
    """A side's mapping from the rows, or auto-mapped when there are no rows for this pair."""
    rows = mapping_from_rows(settings, side)
    if rows is not None:
        return rows
    return _auto_map(settings.source if side == "SOURCE" else settings.target)


def _auto_map(obj: Any) -> BoneMapping:
    return auto_map_skeleton(skeleton_from_armature(obj), rest_heads_tails(obj)[1])


def _other_side(settings: Any, side: str) -> BoneMapping:
    return _side(settings, "TARGET" if side == "SOURCE" else "SOURCE")


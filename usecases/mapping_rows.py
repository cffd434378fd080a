"""The sidebar's mapping rows: auto-map the pair, save one side as a JSON preset, load one, apply
a shipped naming preset, add and remove the chain rows of a body described as chains. Each entry refuses bad input (a
:class:`~marionette.core.errors.MarionetteError` whose text is the line to show) before it
changes the rows, and returns the line that says what it did."""

from __future__ import annotations

from typing import Any

from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from ..core.errors import MarionetteError
from ..core.mapping.auto_map import auto_map_skeleton
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.presets import preset_mapping
from ..properties.retarget_settings import fill_chain_rows, fill_rows, mapping_from_rows, pair_key


def auto_map_pair(settings: Any) -> tuple[str, str]:
    """Map both armatures' bones into the rows; returns the report level and line (a warning
    naming what is not retargetable as humanoid). Two rigs that are no humanoids but map as
    quadrupeds by shape fill the rows with their chains' bones."""
    from .rigs import quadruped_input

    s = settings
    maps = [_auto_map(s.source), _auto_map(s.target)]
    if not any(m.is_humanoid for m in maps):
        animals = [quadruped_input(s.source), quadruped_input(s.target)]
        if animals[0] is not None and animals[1] is not None:
            fill_rows(s, animals[0][1], animals[1][1])
            return "INFO", f"Mapped {len(s.mapping)} quadruped slots"
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
    absent += [b for b in body_bones(loaded.body) if b not in obj.data.bones]
    if absent:
        raise MarionetteError(f"{obj.name!r} has no bones called {', '.join(repr(b) for b in absent[:6])}")
    other = _other_side(s, side)
    fill_rows(s, *((loaded, other) if side == "SOURCE" else (other, loaded)))
    if loaded.body is not None:
        return f"Loaded {len(loaded.body['chains'])} chains for {obj.name!r}"
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


def body_bones(body: dict[str, Any] | None) -> list[str]:
    """Every bone a body description names (root, each chain's start and end)."""
    if body is None:
        return []
    return [body["root"], *(b for c in body["chains"].values() for b in (c["start"], c["end"]))]


def add_chain(settings: Any) -> str:
    """A new chain row (a body described as chains, docs/pipeline.md#other-bodies), named
    ``chain_N`` and made the active row; rows made for another pair of armatures are cleared
    first, as Auto-Map would."""
    s = settings
    if s.source is None or s.target is None:
        raise MarionetteError("Pick a source and a target armature first")
    if s.mapping_pair != pair_key(s):
        s.mapping.clear()
        fill_chain_rows(s, None, None)
        s.mapping_pair = pair_key(s)
    taken = {row.name for row in s.chains}
    name = next(f"chain_{k}" for k in range(len(s.chains) + 1, len(s.chains) + 2 + len(taken)) if f"chain_{k}" not in taken)
    row = s.chains.add()
    row.name = name
    s.chain_index = len(s.chains) - 1
    return f"Added chain {name!r}: pick its start and end bone on each side"


def remove_chain(settings: Any) -> str:
    """Remove the active chain row."""
    s = settings
    if not 0 <= s.chain_index < len(s.chains):
        raise MarionetteError("No chain row selected to remove")
    name = s.chains[s.chain_index].name
    s.chains.remove(s.chain_index)
    s.chain_index = min(s.chain_index, len(s.chains) - 1) if len(s.chains) else 0
    return f"Removed chain {name!r}"


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


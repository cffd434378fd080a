"""The shipped presets (``presets/*.json``): one mapping per naming convention, written from the
convention's own names so a preset and the name rules never disagree."""

from __future__ import annotations

from pathlib import Path

from ..errors import MappingError
from .bone_mapping import BoneMapping, MappedBone
from .conventions import CONVENTIONS


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

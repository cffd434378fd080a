"""What a batch bake's output file holds and what ``--resume`` reads back from it: the scene records
(the target's name, each file's clip ids, the last report), the Actions a batch bake wrote, the
earlier volumes of an output being continued (:func:`scan_volumes`), and the JSON report on disk
(:func:`write_report`)."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bpy

from ..bridge import compat
from ..core.batch.output_files import CLIP_PROPERTY, FILES_RECORD, SETTINGS_PROPERTY, SOURCE_PROPERTY, existing_volumes
from ..core.batch.plan import clip_key
from ..core.batch.report import BatchReport
from ..core.batch.settings import record_difference


def id_name_limit() -> int:
    """Bytes in an ID name: 255 from Blender 5.0, 63 before."""
    return 255 if bpy.app.version >= (5, 0, 0) else 63


@dataclass
class EarlierOutput:
    """What ``--resume`` found in the output's volumes other than the one it continues: clips kept
    (source path -> clip id -> (Action name, file name)), each file's clip ids, and the clips
    removed because they were baked with other settings (clip key -> why)."""

    baked: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    known: dict[str, list[str]] = field(default_factory=dict)
    stale: dict[str, str] = field(default_factory=dict)


def action_keys(action: Any) -> int:
    """Keys in every F-curve of ``action`` (what its memory grows with)."""
    return sum(len(fc.keyframe_points) for action_slot in action.slots for fc in compat.action_fcurves(action, action_slot))


def batch_actions() -> list[tuple[Any, str, str, Any]]:
    """``(action, source path, clip id, settings record)`` of every Action a batch bake wrote into
    the open file."""
    out = []
    for a in bpy.data.actions:
        src, clip = a.get(SOURCE_PROPERTY), a.get(CLIP_PROPERTY)
        if isinstance(src, str) and isinstance(clip, str):
            out.append((a, src, clip, a.get(SETTINGS_PROPERTY)))
    return out


def file_records() -> dict[str, list[str]]:
    raw = bpy.context.scene.get(FILES_RECORD)
    if not isinstance(raw, str):
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return {str(k): [str(c) for c in v] for k, v in data.items() if isinstance(v, list)}


def continued_volumes(output: str, resume: bool, earlier_start: float | None) -> list[str]:
    """The output's volumes a resumed run continues: every volume on disk, but when the
    interrupted run started afresh, only those it saved (not older than its start)."""
    if not resume:
        return []
    volumes = existing_volumes(output)
    if earlier_start is None:
        return volumes
    kept = []
    for v in volumes:
        if os.stat(v).st_mtime < earlier_start:
            break  # an earlier bake's file, and every one after it
        kept.append(v)
    return kept


def scan_volumes(volumes: Sequence[str], record: Mapping[str, Any]) -> EarlierOutput:
    """Open each volume in turn: the clips it holds, its files' clip ids, and the clips baked
    with other settings, which are removed from it (and it is saved again)."""
    from ..bridge.session import save_blend

    found = EarlierOutput()
    for path in volumes:
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        found.known.update(file_records())
        removed = 0
        for action, src, clip, text in batch_actions():
            why = record_difference(text, record)
            if why is None:
                found.baked.setdefault(src, {})[clip] = (action.name, os.path.basename(path))
                continue
            found.stale[clip_key(src, clip)] = why
            for obj in bpy.data.objects:
                if obj.animation_data is not None and obj.animation_data.action == action:
                    obj.animation_data.action = None
            bpy.data.actions.remove(action)
            removed += 1
        if removed:
            save_blend(path)
    return found


def write_report(report: BatchReport, path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    tmp.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    tmp.replace(p)
    return str(p)


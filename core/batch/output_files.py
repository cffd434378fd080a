"""What a batch bake leaves on disk: the custom properties on every baked Action, the *parts*
(each baked clip saved as ``.npz`` the moment it is computed, for ``--resume``) and the output's
*volumes* (``OUT.blend``, ``OUT.002.blend``...)."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from .messages import BAKED_ARRAYS, OPTIONAL_ARRAYS, Message
from .plan import clip_key

#: Custom properties on every baked Action (what ``--resume`` and the report read back).
SOURCE_PROPERTY = "marionette_batch_source"
CLIP_PROPERTY = "marionette_batch_clip"
SETTINGS_PROPERTY = "marionette_batch_settings"
#: Scene custom properties of an output file: the target's name, each file's clip ids, and (in
#: the open file of the Batch Bake operator) the last run's report.
TARGET_RECORD = "marionette_batch_target"
FILES_RECORD = "marionette_batch_files"
REPORT_RECORD = "marionette_batch_report"


# --- parts: baked clips on disk, for --resume ------------------------------------------------


def part_file_name(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20] + ".npz"


def write_part(directory: str, message: Mapping[str, Any]) -> str:
    """Save a baked clip message (with ``path`` and ``clip`` set) as ``.npz``, atomically: a
    part on disk is always complete. Returns its path."""
    key = clip_key(str(message["path"]), str(message["clip"]))
    final = os.path.join(directory, part_file_name(key))
    tmp = final + ".partial.npz"
    arrays = [k for k in (*BAKED_ARRAYS, *OPTIONAL_ARRAYS) if message.get(k) is not None]
    meta = {k: v for k, v in message.items() if k not in BAKED_ARRAYS and k not in OPTIONAL_ARRAYS}
    with open(tmp, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **{k: np.asarray(message[k]) for k in arrays})
    os.replace(tmp, final)
    return final


def read_part(path: str) -> Message | None:
    """One part as the message it was saved from; ``None`` when it is missing or cut short (a
    part the process died while writing holds nothing usable)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            m: Message = json.loads(str(z["meta"]))
            for k in BAKED_ARRAYS:
                m[k] = np.array(z[k])
            for k in OPTIONAL_ARRAYS:
                if k in z.files:
                    m[k] = np.array(z[k])
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None
    return m


def read_parts(directory: str) -> list[Message]:
    """Every complete part in ``directory`` (sorted by file name); unreadable ones are skipped."""
    out: list[Message] = []
    if not os.path.isdir(directory):
        return out
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".npz") or name.endswith(".partial.npz"):
            continue
        m = read_part(os.path.join(directory, name))
        if m is not None:
            out.append(m)
    return out


# --- output volumes --------------------------------------------------------------------------


def volume_path(output: str, index: int) -> str:
    """The ``index``-th file of an output written in volumes: ``OUT.blend`` itself first, then
    ``OUT.002.blend``, ``OUT.003.blend``..."""
    if index == 0:
        return output
    stem, ext = os.path.splitext(output)
    return f"{stem}.{index + 1:03d}{ext or '.blend'}"


def existing_volumes(output: str) -> list[str]:
    """The volumes of ``output`` on disk, in order, stopping at the first one missing."""
    out: list[str] = []
    while os.path.isfile(volume_path(output, len(out))):
        out.append(volume_path(output, len(out)))
    return out


def stray_volumes(output: str, kept: int) -> list[str]:
    """Volumes of ``output`` numbered past the first ``kept`` (left by an earlier, larger run)."""
    stem, ext = os.path.splitext(output)
    folder = os.path.dirname(stem) or "."
    base = os.path.basename(stem) + "."
    ext = ext or ".blend"
    out: list[str] = []
    if not os.path.isdir(folder):
        return out
    for name in os.listdir(folder):
        middle = name[len(base) : -len(ext)] if name.startswith(base) and name.endswith(ext) else ""
        if len(middle) == 3 and middle.isdigit() and int(middle) > max(kept, 1):
            out.append(os.path.join(folder, name))
    return sorted(out)


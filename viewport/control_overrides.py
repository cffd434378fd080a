"""Adding, removing and reordering controls on a library override, kept through save and reload.

What Blender 5.0 does with ``object.marionette_controls.controls`` on a library override (an
``IDProperty`` collection flagged ``LIBRARY_OVERRIDABLE`` + ``USE_INSERTION``):

* edits to the rows' settings are kept (``REPLACE`` operations on ``controls["name"].prop``);
* rows *added* on the override are kept (``INSERT_AFTER`` operations, anchored on the name of the
  row before them, so only while names are unique);
* rows that came from the library cannot be removed or moved: ``controls.remove()`` /
  ``controls.move()`` raise ``TypeError`` ("not supported for this collection"),
  ``controls.clear()`` does nothing, and a list rewritten at the ``IDProperty`` level is put back
  from the library at the next load (Blender has no override operation that removes or moves an
  item of the library's list).

So once the list of an override is changed (or any of its rows edited), every row is mirrored in
``marionette_controls.override_rows``, an overridable string Blender keeps (JSON: each row's
values, pointers by name and library, the library row it came from, and that library row's values
when the mirror was written). On file load, an override whose rows differ from its mirror gets
them rebuilt from it. A setting the override did not change follows the library: where the
mirror's value equals the library's value when the mirror was written, the library's current
value is taken (so the library file's later changes still come through); rows the library gains
later are added at the end; an untouched row the library loses is dropped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import bpy
from bpy.app.handlers import persistent

from . import live_preview

VERSION = 1
#: Row properties not mirrored (``library_row`` is carried as the entry's ``ref``).
_SKIP = {"rna_type", "library_row"}
_rebuilding = [0]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Row edits made here do not rewrite the mirror."""
    _rebuilding[0] += 1
    try:
        yield
    finally:
        _rebuilding[0] -= 1


def is_override(obj: Any) -> bool:
    return obj is not None and obj.library is None and obj.override_library is not None


def _reference(obj: Any) -> Any:
    ref = obj.override_library.reference if obj.override_library is not None else None
    return ref if ref is not None and getattr(ref, "marionette_controls", None) is not None else None


# --- values ----------------------------------------------------------------------------------


def _id_key(idb: Any) -> list[str] | None:
    """An ID as ``[name, library path]`` ("" for a local one); an override as what it overrides,
    so the library's pointer and the override's remapped pointer compare equal."""
    if idb is None:
        return None
    ol = idb.override_library
    if idb.library is None and ol is not None and ol.reference is not None:
        idb = ol.reference
    return [idb.name, idb.library.filepath if idb.library is not None else ""]


def _resolve(key: list[str] | None, collection: Any, obj: Any) -> Any:
    """The ID a key names in this file: the override of a linked ID in ``obj``'s override
    hierarchy first, then any override of it, then the linked ID itself; a local ID by name."""
    if not key:
        return None
    name, lib = key
    if not lib:
        return collection.get((name, None))
    root = obj.override_library.hierarchy_root if obj.override_library is not None else None
    found = []
    for idb in collection:
        ol = idb.override_library
        if idb.library is None and ol is not None and ol.reference is not None and _id_key(idb) == key:
            found.append(idb)
    for idb in found:
        if idb.override_library.hierarchy_root == root:
            return idb
    if found:
        return found[0]
    return next((idb for idb in collection if idb.library is not None and idb.name == name and idb.library.filepath == lib), None)


def _props(row: Any) -> list[Any]:
    """The settings of a control row (its property group's, read from the row itself)."""
    return [p for p in row.bl_rna.properties if p.identifier not in _SKIP]


def row_values(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in _props(row):
        v = getattr(row, p.identifier)
        if p.type == "POINTER":
            out[p.identifier] = _id_key(v)
        elif p.type in {"FLOAT", "INT", "BOOLEAN"} and getattr(p, "is_array", False):
            out[p.identifier] = list(v)
        else:
            out[p.identifier] = v
    return out


def _set_row(row: Any, values: dict[str, Any], obj: Any) -> None:
    for p in _props(row):
        if p.identifier not in values:
            continue
        v = values[p.identifier]
        if p.type == "POINTER":
            coll = bpy.data.collections if p.fixed_type.identifier == "Collection" else bpy.data.objects
            v = _resolve(v, coll, obj)
        try:
            setattr(row, p.identifier, v)
        except (TypeError, ValueError, AttributeError):
            pass  # a value the property no longer takes (an enum item removed): keep the default


# --- the mirror ------------------------------------------------------------------------------


def _library_rows(obj: Any) -> dict[str, Any]:
    ref = _reference(obj)
    if ref is None:
        return {}
    out: dict[str, Any] = {}
    for r in ref.marionette_controls.controls:
        out.setdefault(r.name, r)
    return out


def _origins(obj: Any) -> list[str]:
    """The library row each row came from ("" for rows added on the override). Rows carry it once
    a mirror was written; before that, a row whose name is a library row's is that row."""
    rows = obj.marionette_controls.controls
    if obj.marionette_controls.override_rows:
        return [r.library_row for r in rows]
    free = set(_library_rows(obj))
    out = []
    for r in rows:
        if r.name in free:
            free.discard(r.name)
            out.append(r.name)
        else:
            out.append("")
    return out


def entries(obj: Any) -> list[dict[str, Any]]:
    """The override's rows as mirror entries (its current list)."""
    lib = _library_rows(obj)
    out = []
    for r, ref in zip(obj.marionette_controls.controls, _origins(obj), strict=True):
        base = row_values(lib[ref]) if ref in lib else None
        out.append({"ref": ref if ref in lib else "", "values": row_values(r), "base": base})
    return out


def write(obj: Any, items: list[dict[str, Any]] | None = None) -> None:
    """Record an override's rows (or ``items``, the rows it is about to get) in its mirror."""
    if not is_override(obj) or _rebuilding[0]:
        return
    items = entries(obj) if items is None else items
    text = json.dumps({"version": VERSION, "library_rows": list(_library_rows(obj)), "rows": items}, sort_keys=True)
    settings = obj.marionette_controls
    with _quiet():
        for r, item in zip(settings.controls, items, strict=False):
            if r.library_row != item["ref"]:
                r.library_row = item["ref"]
        if settings.override_rows != text:
            settings.override_rows = text


def row_changed(obj: Any) -> None:
    """A row's setting changed (its update callback)."""
    if not _rebuilding[0] and is_override(obj):
        write(obj)


def set_rows(obj: Any, items: list[dict[str, Any]], notify: bool = True) -> None:
    """Give the override exactly these rows (mirror entries). The list is rewritten at the
    ``IDProperty`` level, since Blender's collection refuses to remove or move library rows on an
    override; the values are then set through the properties."""
    settings = obj.marionette_controls
    with _quiet(), live_preview.held():
        settings["controls"] = [{} for _ in items]
        for row, item in zip(settings.controls, items, strict=True):
            _set_row(row, item["values"], obj)
            row.library_row = item["ref"]
        if len(items):
            settings.active_index = min(max(settings.active_index, 0), len(items) - 1)
    write(obj, items)
    if notify:
        live_preview.definitions_changed(obj)


def remove(obj: Any, index: int) -> None:
    items = entries(obj)
    del items[index]
    set_rows(obj, items)


def move(obj: Any, i: int, j: int) -> None:
    items = entries(obj)
    items.insert(j, items.pop(i))
    set_rows(obj, items)


def _merged(obj: Any, mirror: dict[str, Any]) -> list[dict[str, Any]]:
    """The mirror's rows with the library's changes since it was written: per setting, the
    library's current value where the override kept the library's value of then."""
    lib = _library_rows(obj)
    out = []
    for item in mirror.get("rows", []):
        ref, values, base = item.get("ref", ""), dict(item.get("values", {})), item.get("base")
        if ref and base is not None:
            if ref not in lib:
                if values == base:
                    continue  # the library dropped a row the override did not touch
                ref = ""
            else:
                now = row_values(lib[ref])
                for k, v in now.items():
                    if k in base and values.get(k) == base[k]:
                        values[k] = v
                base = now
        out.append({"ref": ref, "values": values, "base": base if ref else None})
    known = set(mirror.get("library_rows", []))
    out += [{"ref": name, "values": row_values(r), "base": row_values(r)} for name, r in lib.items() if name not in known]
    return out


def restore(obj: Any) -> bool:
    """Rebuild an override's rows from its mirror if they differ; True if it did."""
    if not is_override(obj) or getattr(obj, "marionette_controls", None) is None:
        return False
    text = obj.marionette_controls.override_rows
    if not text:
        return False
    try:
        mirror = json.loads(text)
    except ValueError:
        return False
    items = _merged(obj, mirror)
    rows = obj.marionette_controls.controls
    same = len(rows) == len(items) and all(
        row_values(r) == item["values"] and r.library_row == item["ref"] for r, item in zip(rows, items, strict=True)
    )
    if same:
        write(obj, items)  # the library rows' values of now become the base
        return False
    # The live preview's own load handler drops every runtime: no need to tell it.
    set_rows(obj, items, notify=False)
    return True


@persistent
def _on_load(_filepath: Any = None) -> None:
    for obj in bpy.data.objects:
        if obj.type == "ARMATURE" and is_override(obj):
            with contextlib.suppress(ReferenceError, AttributeError, KeyError, TypeError, ValueError):
                restore(obj)


def register() -> None:
    handlers = bpy.app.handlers.load_post
    if _on_load not in handlers:
        # First, so the live preview's own load handler already sees the rebuilt rows.
        handlers.insert(0, _on_load)


def unregister() -> None:
    handlers = bpy.app.handlers.load_post
    while _on_load in handlers:
        handlers.remove(_on_load)

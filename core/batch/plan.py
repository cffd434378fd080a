"""Batch bake of an animation pack onto one character: the parts that need no Blender.

Domain words, as used here and in :mod:`operators.batch_bake`:

* A *pack* is what the user points at: folders (searched recursively) and files. Planning it
  (:func:`plan_pack`) lists the *pack files* that can hold clips (BVH, FBX, glTF/GLB, .blend), in
  a stable order (sorted paths), and what was left out and why.
* A pack file holds one or more *clips* (a BVH holds one; an FBX may hold eleven). A clip is
  identified by its *clip key* ``"<absolute path>::<clip id>"``, where the clip id is the BVH's
  file stem or the Action's full name as the importer made it in a fresh scene. The key is what
  ``--resume`` compares; it is stored on every baked Action.
* A *label* names a pack file in Action names: its path relative to the folder it was found in,
  without extension, ``/``-separated (a file given by itself: its stem). A baked Action is called
  ``label`` for a single-clip BVH and ``label|clip`` otherwise (the clip's last ``|`` part: the FBX
  importer's ``Armature|Armature|Walk`` is the clip ``Walk``).
* The *pack cache* (:class:`PackCache`) keeps the automatic mapping of each source skeleton layout
  (layout signature plus rounded bone ends) and the retarget bindings
  (:class:`core.retarget.binding_cache.BindingCache`: keyed by both mappings, both layout signatures, both
  rests and the options): a pack of 200 clips from one capture shoot maps and binds once.
* *Messages* are what crosses between processes: plain dicts of ``str``, numbers, lists and numpy
  arrays, never instances of this package's classes (a worker loads the package under a name of
  its own, so a pickled class would not resolve in the main process). A *baked clip* message
  carries the target-local keys of the bones the retarget drives; the Blender layer writes them
  with :func:`bridge.armature_io.write_action`, exactly as a single retarget does.
* A *part* is one baked clip message saved as ``.npz`` in the output's parts folder the moment it
  is computed; a run that dies leaves its parts, and ``--resume`` writes them into the output
  without computing them again.
* The *settings record* (:meth:`BakeSettings.record`) is what a clip's keys depend on besides the
  clip: method table, Match Rest, timing rule, scene rate, retarget options and the target
  mapping. Every baked Action and every part carries it, so ``--resume`` re-bakes a clip baked
  under other settings instead of keeping it (:func:`record_difference` says what changed).
* An output too large to hold in memory at once is written as *volumes*
  (:func:`volume_path`): ``OUT.blend``, ``OUT.002.blend``, ... each the target plus a share of
  the clips in pack order.
* A file with many long clips may be *split*: a second worker imports it too and bakes the last
  of its clips (:func:`split_point`), when that ends the file sooner despite the second import.

Timing follows :func:`usecases.jobs.retarget_action`: a clip keeps its own timing on the scene's
frame rate (resampled) unless ``keep_frames`` keeps its frame numbers. So does the choice of
method: with a method table (per slot; see :mod:`core.retarget.methods`) or ``match_rest`` a clip
is retargeted through :func:`core.retarget.methods.retarget_with_methods`, exactly as a single
retarget; without either, through the geometric-frame binding alone. In both cases a clip already
on the target's layout is bound natively (its keys unchanged), as a single retarget binds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import MarionetteError
from ..formats.bvh import BvhData, read_bvh
from ..mapping.auto_map import auto_map_skeleton
from ..mapping.bone_mapping import BoneMapping
from ..mapping.humanoid import SLOTS
from ..mapping.method_names import GEOMETRIC, METHODS, check_method_table
from ..retarget.binding_cache import BindingCache, native_binding
from ..retarget.geometric import Binding, RetargetOptions, RigInput, retarget
from ..retarget.methods import retarget_with_methods
from ..rig.clip import Clip
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton
from .pack_limits import not_regular

CLIP_EXTENSIONS = (".bvh", ".fbx", ".glb", ".gltf", ".blend")
#: Ends the reason of a pack entry refused from a stat alone.
SKIPPED_UNOPENED = "; skipped without opening it"
BVH_EXTENSION = ".bvh"

#: Custom properties on every baked Action (what ``--resume`` and the report read back).
SOURCE_PROPERTY = "marionette_batch_source"
CLIP_PROPERTY = "marionette_batch_clip"
SETTINGS_PROPERTY = "marionette_batch_settings"
KEY_SEPARATOR = "::"

REPORT_FORMAT = "marionette.batch_report"
REPORT_VERSION = 1

Message = dict[str, Any]


def clip_key(path: str, clip: str) -> str:
    return f"{path}{KEY_SEPARATOR}{clip}"


# --- planning a pack -------------------------------------------------------------------------


@dataclass(frozen=True)
class PackFile:
    """One file of the pack: absolute path, label (names its Actions) and whether Blender's
    importers are needed to read it (everything but BVH)."""

    path: str
    label: str

    @property
    def is_bvh(self) -> bool:
        return self.path.lower().endswith(BVH_EXTENSION)

    @property
    def needs_blender(self) -> bool:
        return not self.is_bvh


@dataclass(frozen=True)
class PackPlan:
    files: tuple[PackFile, ...]
    #: Inputs that cannot be baked at all: ``(path, reason)``; they count as failed files.
    refused: tuple[tuple[str, str], ...] = ()
    #: Folder entries that are not clip files (a README, textures): ``(path, reason)``; listed in
    #: the report, not failures.
    ignored: tuple[tuple[str, str], ...] = ()

    @property
    def needs_blender(self) -> bool:
        return any(f.needs_blender for f in self.files)


def _label(relative: str) -> str:
    stem, _ext = os.path.splitext(relative)
    return stem.replace(os.sep, "/")


def plan_pack(inputs: Sequence[str | os.PathLike[str]], exclude: Iterable[str | os.PathLike[str]] = ()) -> PackPlan:
    """The pack's files in a stable order (sorted absolute paths, each file once).

    Folders are searched recursively; their entries that are not clip files are ignored (and
    listed). A file named directly that is missing or of another type is refused, and so is a
    clip-named entry that is not a regular file (a FIFO, a socket, a device: never opened). Paths in
    ``exclude`` (the output file, its parts folder) are never part of the pack, so an output
    written inside the pack folder is not read back as a clip file.
    """
    excluded = [os.path.abspath(os.fspath(e)) for e in exclude]

    def is_excluded(p: str) -> bool:
        return any(p == e or p.startswith(e + os.sep) for e in excluded)

    found: dict[str, PackFile] = {}
    refused: list[tuple[str, str]] = []
    ignored: list[tuple[str, str]] = []
    for raw in inputs:
        path = os.path.abspath(os.fspath(raw))
        if os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not is_excluded(os.path.join(dirpath, d)))
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    if name.startswith(".") or is_excluded(full) or name.endswith(".partial.blend"):
                        continue
                    ext = os.path.splitext(name)[1].lower()
                    if ext not in CLIP_EXTENSIONS:
                        ignored.append((full, f"not a clip file ({ext or 'no extension'})"))
                        continue
                    why = not_regular(full)
                    if why is not None:
                        refused.append((full, why + SKIPPED_UNOPENED))
                        continue
                    found.setdefault(full, PackFile(full, _label(os.path.relpath(full, path))))
        elif os.path.lexists(path):
            ext = os.path.splitext(path)[1].lower()
            why = not_regular(path)
            if ext not in CLIP_EXTENSIONS:
                refused.append((path, f"unsupported file type {ext or '(no extension)'!r}; clip files are " + ", ".join(CLIP_EXTENSIONS)))
            elif why is not None:
                refused.append((path, why + SKIPPED_UNOPENED))
            elif not is_excluded(path):
                found.setdefault(path, PackFile(path, _label(os.path.basename(path))))
        else:
            refused.append((path, "no such file or folder"))
    files = tuple(found[p] for p in sorted(found))
    return PackPlan(files, tuple(refused), tuple(sorted(ignored)))


# --- naming ----------------------------------------------------------------------------------


def bvh_clip_id(path: str) -> str:
    """A BVH file holds one clip, named after the file (known before the file is read)."""
    return os.path.splitext(os.path.basename(path))[0]


def clip_display_name(clip_id: str) -> str:
    """The clip's own name: the last ``|`` part of an importer's ``Armature|Armature|Walk``."""
    return clip_id.rsplit("|", 1)[-1] or clip_id


def action_base_name(file: PackFile, clip_id: str) -> str:
    """``label`` for a BVH (its one clip is the file), ``label|clip`` otherwise."""
    return file.label if file.is_bvh else f"{file.label}|{clip_display_name(clip_id)}"


def _fit(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` UTF-8 bytes without splitting a character."""
    raw = name.encode("utf-8")
    if len(raw) <= limit:
        return name
    return raw[:limit].decode("utf-8", errors="ignore")


def final_action_names(wanted: Mapping[str, str], taken: Iterable[str], limit: int = 63) -> dict[str, str]:
    """Clip key -> Action name, the same whatever order the clips were baked in.

    Each clip gets its base name (cut to ``limit`` bytes) unless a name already in the file
    (``taken``) or another clip of the run wants it: of the clips sharing a base, the one with
    the smallest key keeps it and the others get ``base~hash`` (six hex digits of their key).
    """
    used = set(taken)
    out: dict[str, str] = {}
    by_base: dict[str, list[str]] = {}
    for key, base in wanted.items():
        by_base.setdefault(_fit(base, limit), []).append(key)
    for base in sorted(by_base):
        keys = sorted(by_base[base])
        for k, key in enumerate(keys):
            name = base
            if k > 0 or name in used:
                suffix = "~" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:6]
                name = _fit(base, limit - len(suffix)) + suffix
            out[key] = name
    # A suffixed name could, in theory, equal another clip's base; keep names unique regardless.
    seen: set[str] = set(used)
    for key in sorted(out):
        name = out[key]
        n = 2
        while name in seen:
            suffix = f"~{hashlib.sha1(f'{key}{n}'.encode()).hexdigest()[:6]}"
            name = _fit(out[key], limit - len(suffix)) + suffix
            n += 1
        seen.add(name)
        out[key] = name
    return out


# --- BVH rigs without Blender ----------------------------------------------------------------


def bvh_rest_tails(bvh: BvhData) -> FloatArray:
    """``(J, 3)`` bone tails exactly as Blender's BVH importer makes them, in file space.

    An End Site is the tail of its joint; else the only child's head, or the mean of the
    children's heads; a joint without either keeps its head. A tail within 0.001 of its head is
    moved up 0.1 along the file's Y (the importer's zero-length fix). The automatic mapping and
    the retarget's bone ends then see a BVH read here as they see it imported by Blender.
    """
    heads = bvh.rest_positions()
    tails = heads.copy()
    n = bvh.joint_count
    children: list[list[int]] = [[] for _ in range(n)]
    for j, p in enumerate(bvh.parents):
        if p >= 0:
            children[int(p)].append(j)
    for j in range(n):
        if np.all(np.isfinite(bvh.end_sites[j])):
            tails[j] = heads[j] + bvh.end_sites[j]
        elif children[j]:
            tails[j] = heads[children[j]].mean(axis=0)
        if np.linalg.norm(tails[j] - heads[j]) <= 0.001:
            tails[j, 1] += 0.1
    return tails


# --- rigs and settings as messages -----------------------------------------------------------


def rig_message(rig: RigInput) -> Message:
    sk = rig.skeleton
    return {
        "names": list(sk.names),
        "parents": np.asarray(sk.parents),
        "parent_frames": np.asarray(sk.parent_frames),
        "child_frames": None if sk.child_frames is None else np.asarray(sk.child_frames),
        "placement": np.asarray(sk.placement),
        "slots": dict(rig.slots),
        "ends": None if rig.ends is None else np.asarray(rig.ends, dtype=np.float64),
    }


def rig_from_message(m: Mapping[str, Any]) -> RigInput:
    sk = Skeleton(m["names"], m["parents"], m["parent_frames"], m["child_frames"], m["placement"])
    return RigInput(sk, dict(m["slots"]), m["ends"])


@dataclass(frozen=True)
class BakeSettings:
    """What every clip of a run shares: the target rig, its mapping's fingerprint, the retarget
    options, the timing rule and the retarget method: ``methods`` (slot -> method; empty:
    geometric frames everywhere) and ``match_rest``, as a single retarget takes them. The table
    is checked (and its names normalised) when the settings are made, so a bad one is refused
    before any clip is read."""

    target: RigInput
    target_mapping: str  # fingerprint of the target mapping (see :func:`mapping_key`)
    scene_fps: float
    keep_frames: bool = False
    options: RetargetOptions = field(default_factory=RetargetOptions)
    methods: Mapping[str, str] = field(default_factory=dict)
    match_rest: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", check_method_table(self.methods))

    @property
    def uses_methods(self) -> bool:
        """Whether clips go through :func:`core.retarget.methods.retarget_with_methods` (a table
        or ``match_rest`` given) rather than the geometric-frame binding alone."""
        return bool(self.methods) or self.match_rest

    def method_name(self) -> str:
        """The run's method in a few words: ``geometric``, ``rest-space``, or the methods the
        table mixes (``geometric+local-curl``)."""
        return method_summary(self.methods)

    def record(self) -> dict[str, Any]:
        """What a baked clip's keys depend on besides the clip itself (stored on every Action and
        part as :meth:`record_text`)."""
        return {
            "method": self.method_name(),
            "table": dict(sorted(self.methods.items())),
            "match_rest": bool(self.match_rest),
            "keep_frames": bool(self.keep_frames),
            "scene_fps": float(self.scene_fps),
            "options": json.loads(json.dumps(asdict(self.options))),
            "target_mapping": self.target_mapping,
        }

    def record_text(self) -> str:
        return json.dumps(self.record(), sort_keys=True)

    def to_message(self) -> Message:
        return {
            "target": rig_message(self.target),
            "target_mapping": self.target_mapping,
            "scene_fps": float(self.scene_fps),
            "keep_frames": bool(self.keep_frames),
            "options": asdict(self.options),
            "methods": dict(self.methods),
            "match_rest": bool(self.match_rest),
        }

    @classmethod
    def from_message(cls, m: Mapping[str, Any]) -> BakeSettings:
        opts = dict(m["options"])
        for k in ("source_forward", "target_forward"):
            if opts.get(k) is not None:
                opts[k] = tuple(opts[k])
        return cls(
            target=rig_from_message(m["target"]),
            target_mapping=str(m["target_mapping"]),
            scene_fps=float(m["scene_fps"]),
            keep_frames=bool(m["keep_frames"]),
            options=RetargetOptions(**opts),
            methods={str(k): str(v) for k, v in dict(m.get("methods") or {}).items()},
            match_rest=bool(m.get("match_rest", False)),
        )


def record_difference(earlier: Any, now: Mapping[str, Any]) -> str | None:
    """``None`` when a clip baked under the settings record ``earlier`` (the stored text) has the
    keys ``now`` would give; else what differs, in words (what ``--resume`` reports)."""
    if not isinstance(earlier, str):
        return "baked without a record of its settings"
    try:
        old = json.loads(earlier)
    except ValueError:
        return "baked with an unreadable record of its settings"
    if not isinstance(old, dict):
        return "baked with an unreadable record of its settings"
    if old == json.loads(json.dumps(dict(now))):
        return None
    said: list[str] = []
    flat_old = {**{k: v for k, v in old.items() if k != "options"}, **dict(old.get("options") or {})}
    flat_now = {**{k: v for k, v in now.items() if k != "options"}, **dict(now.get("options") or {})}
    for k in sorted(set(flat_old) | set(flat_now)):
        if k == "table" and old.get("method") != now.get("method"):
            continue  # the method's name says it
        a, b = flat_old.get(k), flat_now.get(k)
        if a != b:
            said.append(f"{k.replace('_', ' ')} {a if a is not None else '(none)'} -> {b if b is not None else '(none)'}")
    return "baked with other settings: " + ", ".join(said)


def method_summary(methods: Mapping[str, str]) -> str:
    """``geometric`` for an empty table; else the methods it uses, ``+``-joined in the order
    geometric, rest-space, local-curl (geometric when some slot is left out of it)."""
    used = set(methods.values())
    if any(s not in methods for s in SLOTS):
        used.add(GEOMETRIC)
    return "+".join(m.lower().replace("_", "-") for m in METHODS if m in used)


# --- binding cache ---------------------------------------------------------------------------


def layout_key(skeleton: Skeleton, ends: Any | None) -> str:
    """The skeleton's layout signature extended with its rounded bone ends (the mapping reads
    them), so two rigs share a key exactly when mapping and binding them gives the same result."""
    h = hashlib.sha1(skeleton.signature().encode("ascii"))
    if ends is not None:
        h.update((np.round(np.asarray(ends, dtype=np.float64), 4) + 0.0).astype("<f8").tobytes())
    return h.hexdigest()[:16]


def mapping_key(slots: Mapping[str, str]) -> str:
    """Fingerprint of a slot -> bone mapping (what the retarget consumes of it)."""
    text = "\n".join(f"{s}\x00{b}" for s, b in sorted(slots.items()))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class CacheStats:
    mapping_hits: int = 0
    mapping_misses: int = 0
    binding_hits: int = 0
    binding_misses: int = 0


class PackCache:
    """What a process remembers between the clips of a run, for one target and one set of options.

    ``source()`` maps a source skeleton once per layout (:func:`layout_key`): a refused source (not
    a humanoid) is remembered too, so a pack of quadruped clips is refused once. ``binding()``
    binds through :class:`core.retarget.binding_cache.BindingCache`, keyed by both mappings, both layout
    signatures, both rests and the options.
    """

    def __init__(self, settings: BakeSettings, capacity: int = 64) -> None:
        self.settings = settings
        self.bindings = BindingCache(capacity)
        self._mappings: dict[str, BoneMapping | MarionetteError] = {}
        self._mapping_hits = 0
        self._mapping_misses = 0

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self._mapping_hits, self._mapping_misses, self.bindings.hits, self.bindings.misses)

    def source(self, skeleton: Skeleton, ends: Any | None) -> tuple[RigInput, str]:
        """The source rig with its automatic mapping, and its layout key. Raises the mapping's
        refusal for a rig that is not a usable humanoid."""
        key = layout_key(skeleton, ends)
        found = self._mappings.get(key)
        if found is None:
            self._mapping_misses += 1
            mapping = auto_map_skeleton(skeleton, ends)
            try:
                mapping.require_humanoid()
                found = mapping
            except MarionetteError as exc:
                found = exc
            self._mappings[key] = found
        else:
            self._mapping_hits += 1
        if isinstance(found, MarionetteError):
            raise type(found)(str(found))
        return RigInput(skeleton, found.bones(), ends), key

    def binding(self, source: RigInput) -> tuple[Binding, bool]:
        """The binding of ``source`` onto the target, and whether it came from the cache."""
        hits = self.bindings.hits
        b = self.bindings.geometric(source, self.settings.target, self.settings.options)
        return b, self.bindings.hits > hits


# --- baking one clip -------------------------------------------------------------------------


def bake_clip(cache: PackCache, source: RigInput, layout: str, clip: Clip) -> Message:
    """Retarget ``clip`` (played by ``source``) onto the settings' target; the keys of the driven
    target bones, their frame numbers and rate, as a message. Same timing rule and method choice
    as a single retarget: resampled to the scene rate unless frame numbers are kept; the settings'
    method table and ``match_rest`` through :func:`core.retarget.methods.retarget_with_methods`
    when either is given, the geometric-frame binding alone otherwise.
    A clip already on the target's layout is bound natively either way (its keys unchanged, as a
    single retarget binds it). The message says which (``method``: ``native`` or the table's
    :func:`method_summary`)."""
    s = cache.settings
    source_frames, source_fps = clip.frame_count, clip.fps
    t0 = time.perf_counter()
    if s.uses_methods or native_binding(clip, source.skeleton, s.target.skeleton, s.options) is not None:
        misses = cache.bindings.misses
        t1 = t0  # binding happens inside the one call; counted with the retarget
        timed = clip if s.keep_frames else clip.resample(s.scene_fps)
        run = retarget_with_methods(cache.bindings, source, s.target, timed, s.methods, s.options, match_rest=s.match_rest)
        result, native, warnings = run.result, run.native, list(run.warnings)
        cached = cache.bindings.misses == misses
        bind_time = 0.0
    else:
        binding, cached = cache.binding(source)
        t1 = time.perf_counter()
        bind_time = t1 - t0
        timed = clip if s.keep_frames else clip.resample(s.scene_fps)
        result = retarget(binding, timed)
        native, warnings = False, list(binding.warnings)
    rate = timed.fps if s.keep_frames else s.scene_fps
    frames = timed.frame_numbers(rate)
    out = result.clip
    driven = np.flatnonzero(np.asarray(out.coverage) > 0.0)
    t2 = time.perf_counter()
    msg: Message = {
        "op": "clip",
        "names": [out.names[i] for i in driven],
        "rotations": np.ascontiguousarray(out.rotations[:, driven]),
        "translations": np.ascontiguousarray(out.translations[:, driven]),
        "frames": np.asarray(frames, dtype=np.float64),
        "fps": float(rate),
        "root_motion": np.asarray(result.root_motion, dtype=np.float64),
        "source_frames": int(source_frames),
        "source_fps": float(source_fps),
        "layout": layout,
        "cached_binding": bool(cached),
        "method": "native" if native else s.method_name(),
        "native": bool(native),
        "warnings": warnings,
        "timings": {"bind": bind_time, "retarget": t2 - t1},
    }
    if out.scales is not None:  # a native clip's own scale keys, written as a single retarget does
        msg["scales"] = np.ascontiguousarray(out.scales[:, driven])
    return msg


def clip_from_message(m: Mapping[str, Any], name: str) -> Clip:
    """The baked keys of a message as a :class:`Clip` on the driven target bones (coverage 1)."""
    frames = np.asarray(m["frames"], dtype=np.float64)
    fps = float(m["fps"])
    return Clip(
        names=tuple(m["names"]),
        times=(frames - frames[0]) / fps,
        fps=fps,
        rotations=m["rotations"],
        translations=m["translations"],
        scales=m.get("scales"),
        name=name,
        first_frame=float(frames[0]),
    )


def bvh_file_events(path: str, cache: PackCache, skip: Iterable[str] = (), data: BvhData | None = None) -> Iterator[Message]:
    """Read and retarget a BVH file without Blender, as the messages a worker sends.

    Yields ``{"op": "clips", "clips": [...]}`` once the file is read, then one ``clip`` message
    (or ``clip_failed``) per clip not in ``skip``. A file that cannot be read raises
    :class:`MarionetteError` before anything is yielded, one whose rig is refused right after
    the ``clips`` message. ``data`` is the file already read (a worker reads ahead while the
    main process starts).
    """
    t0 = time.perf_counter()
    if data is None:
        data = read_bvh(path)
    clip_id = bvh_clip_id(path)
    yield {"op": "clips", "clips": [clip_id], "timings": {"read": time.perf_counter() - t0}}
    if clip_id in set(skip):
        return
    t1 = time.perf_counter()
    skeleton = data.skeleton()
    tails = bvh_rest_tails(data)
    source, layout = cache.source(skeleton, tails)
    t2 = time.perf_counter()
    try:
        clip = data.clip(clip_id)
        t3 = time.perf_counter()
        msg = bake_clip(cache, source, layout, clip)
    except MarionetteError as exc:
        yield {"op": "clip_failed", "clip": clip_id, "reason": str(exc)}
        return
    msg["clip"] = clip_id
    msg["timings"].update(map=t2 - t1, read=t3 - t2)
    yield msg


# --- parts: baked clips on disk, for --resume ------------------------------------------------

_ARRAYS = ("rotations", "translations", "frames", "root_motion")
_OPTIONAL_ARRAYS = ("scales",)


def part_file_name(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20] + ".npz"


def write_part(directory: str, message: Mapping[str, Any]) -> str:
    """Save a baked clip message (with ``path`` and ``clip`` set) as ``.npz``, atomically: a
    part on disk is always complete. Returns its path."""
    key = clip_key(str(message["path"]), str(message["clip"]))
    final = os.path.join(directory, part_file_name(key))
    tmp = final + ".partial.npz"
    arrays = [k for k in (*_ARRAYS, *_OPTIONAL_ARRAYS) if message.get(k) is not None]
    meta = {k: v for k, v in message.items() if k not in _ARRAYS and k not in _OPTIONAL_ARRAYS}
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
            for k in _ARRAYS:
                m[k] = np.array(z[k])
            for k in _OPTIONAL_ARRAYS:
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


def message_bytes(message: Mapping[str, Any]) -> int:
    """Bytes of a baked clip message's arrays (what holding it costs)."""
    return sum(int(np.asarray(message[k]).nbytes) for k in (*_ARRAYS, *_OPTIONAL_ARRAYS) if message.get(k) is not None)


def drop_arrays(message: Message) -> None:
    """Free a baked clip message's arrays (its part on disk still holds them: :func:`read_part`)."""
    for k in (*_ARRAYS, *_OPTIONAL_ARRAYS):
        message.pop(k, None)


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


# --- splitting a file's clips between two workers --------------------------------------------

def split_point(costs: Sequence[float], second_start: float, min_saving: float = 0.5) -> int | None:
    """Where a second worker should take over a file's remaining clips, or ``None`` if that does
    not pay.

    ``costs`` are the estimated seconds of each remaining clip (in order); ``second_start`` the
    seconds the second worker needs before its first clip (importing the file, and starting
    Blender if it has not yet). The first worker keeps clips ``[:k]``, the second takes
    ``[k:]``: ``k`` makes the two finish as close together as the clips allow, and the split is
    only made when it ends the file at least ``min_saving`` seconds sooner.
    """
    c = np.asarray(costs, dtype=np.float64)
    if c.size < 2:
        return None
    total = float(c.sum())
    done_first = np.cumsum(c)[:-1]  # the first worker's time for k = 1 .. n-1
    finish = np.maximum(done_first, second_start + (total - done_first))
    k = int(np.argmin(finish))
    if total - float(finish[k]) < min_saving:
        return None
    return k + 1


# --- the report ------------------------------------------------------------------------------

CLIP_BAKED = "baked"
CLIP_ALREADY = "already baked"
CLIP_RECOVERED = "recovered"  # computed by an interrupted run, written from its part
CLIP_FAILED = "failed"
CLIP_LOST = "lost"
CLIP_CANCELLED = "cancelled"
_CLIP_GOOD = (CLIP_BAKED, CLIP_ALREADY, CLIP_RECOVERED)

FILE_BAKED = "baked"
FILE_PARTIAL = "partial"
FILE_FAILED = "failed"
FILE_LOST = "lost"
FILE_CANCELLED = "cancelled"
FILE_PENDING = "pending"


@dataclass
class ClipOutcome:
    clip: str
    status: str
    action: str | None = None
    reason: str | None = None
    frames: int | None = None
    source_frames: int | None = None
    source_fps: float | None = None
    #: How the clip was retargeted: ``native`` (already on the target's layout: keys unchanged)
    #: or the run's method (:func:`method_summary`: ``geometric``, ``rest-space``...).
    method: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: The output file (volume) holding the clip's Action, by file name.
    output: str | None = None
    #: Why a clip found in the output was baked again (:func:`record_difference`).
    rebaked: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != []}


@dataclass
class FileOutcome:
    path: str
    label: str
    clips: list[ClipOutcome] = field(default_factory=list)
    #: Clip ids the file holds, once read (``None`` before).
    clip_ids: list[str] | None = None
    #: A reason that concerns the whole file (unreadable, not a humanoid, worker lost...).
    reason: str | None = None
    lost: bool = False
    cancelled: bool = False
    finished: bool = False
    seconds: float = 0.0
    #: Clips per worker when the file was split between two (empty: one worker baked it).
    split: list[int] = field(default_factory=list)

    def clip(self, clip_id: str) -> ClipOutcome | None:
        for c in self.clips:
            if c.clip == clip_id:
                return c
        return None

    @property
    def status(self) -> str:
        good = [c for c in self.clips if c.status in _CLIP_GOOD]
        bad = [c for c in self.clips if c.status not in _CLIP_GOOD]
        if self.lost:
            return FILE_LOST
        if self.cancelled:
            return FILE_CANCELLED
        if not self.finished:
            return FILE_PENDING
        if self.reason is not None and not good:
            return FILE_FAILED
        if not self.clips:
            return FILE_FAILED
        if bad or self.reason is not None:
            return FILE_PARTIAL if good else FILE_FAILED
        return FILE_BAKED

    def summary_reason(self) -> str | None:
        if self.reason is not None:
            return self.reason
        if self.finished and not self.clips:
            return "the file has no animation to bake"
        bad = [c for c in self.clips if c.status not in _CLIP_GOOD]
        if bad:
            return "; ".join(f"clip {c.clip!r}: {c.reason or c.status}" for c in bad)
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "label": self.label, "status": self.status}
        reason = self.summary_reason()
        if reason:
            d["reason"] = reason
        d["clips"] = [c.to_dict() for c in self.clips]
        d["seconds"] = round(self.seconds, 4)
        if self.split:
            d["split"] = list(self.split)
        return d


class BatchReport:
    """Per-file outcome of a batch bake, built as messages arrive; :meth:`to_dict` is the JSON."""

    def __init__(self, plan: PackPlan) -> None:
        self.files: list[FileOutcome] = [FileOutcome(f.path, f.label) for f in plan.files]
        for path, reason in plan.refused:
            self.files.append(FileOutcome(path, _label(os.path.basename(path)), reason=reason, finished=True))
        self.ignored = list(plan.ignored)
        self.timings: dict[str, float] = {}
        self.counters: dict[str, int] = {}
        self.interrupted: str | None = None
        self.info: dict[str, Any] = {}

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + float(seconds)

    def count(self, what: str, n: int = 1) -> None:
        self.counters[what] = self.counters.get(what, 0) + n

    def by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            out[f.status] = out.get(f.status, 0) + 1
        return out

    def clip_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            for c in f.clips:
                out[c.status] = out.get(c.status, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        """Every file baked (now, earlier, or recovered from an interrupted run)."""
        return self.interrupted is None and all(f.status == FILE_BAKED for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "ok": self.ok,
            "interrupted": self.interrupted,
            **self.info,
            "files_by_status": self.by_status(),
            "clips_by_status": self.clip_counts(),
            "files": [f.to_dict() for f in self.files],
            "ignored": [{"path": p, "reason": r} for p, r in self.ignored],
            "timings": {k: round(v, 4) for k, v in sorted(self.timings.items())},
            "counters": dict(sorted(self.counters.items())),
        }

    def summary_lines(self) -> list[str]:
        """One line per file that did not bake, after a totals line (what a person reads)."""
        clips = self.clip_counts()
        good = sum(clips.get(s, 0) for s in _CLIP_GOOD)
        files = self.by_status()
        head = f"{good} clips baked from {files.get(FILE_BAKED, 0)} of {len(self.files)} files"
        extra = [f"{n} {s}" for s, n in sorted(files.items()) if s != FILE_BAKED]
        lines = [head + (f" ({', '.join(extra)})" if extra else "")]
        if self.interrupted:
            lines.append(f"interrupted: {self.interrupted}")
        lines.extend(f"note: {note}" for note in self.info.get("notes", []))
        for f in self.files:
            if f.status != FILE_BAKED:
                name, reason = os.path.basename(f.path), f.summary_reason() or ""
                # Readers' messages often start with the file already.
                said = reason.startswith((name, f.path))
                lines.append(f"  {f.status:9s} {reason if said else f'{name}: {reason}'}")
        return lines

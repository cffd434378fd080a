"""Baking clips without Blender: a BVH rig's bone ends as Blender's importer makes them, the pack
cache of mappings and bindings (:class:`PackCache`), one clip retargeted into a baked clip message
(:func:`bake_clip`), and a BVH file read and baked as the messages a worker sends."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MarionetteError
from ..formats.bvh import BvhData, read_bvh
from ..formats.mmd_standard import standard_model
from ..formats.pmx_rig import PmxRig, build_rig
from ..formats.vmd import read_vmd
from ..formats.vmd_pose import play
from ..mapping.auto_map import auto_map_skeleton
from ..mapping.bone_mapping import BoneMapping
from ..retarget.binding_cache import BindingCache, native_binding
from ..retarget.geometric import Binding, RigInput, retarget
from ..retarget.methods import retarget_with_methods
from ..rig.clip import Clip
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton
from .messages import Message
from .plan import bvh_clip_id
from .settings import BakeSettings


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


def layout_key(skeleton: Skeleton, ends: Any | None) -> str:
    """The skeleton's layout signature extended with its rounded bone ends (the mapping reads
    them), so two rigs share a key exactly when mapping and binding them gives the same result."""
    h = hashlib.sha1(skeleton.signature().encode("ascii"))
    if ends is not None:
        h.update((np.round(np.asarray(ends, dtype=np.float64), 4) + 0.0).astype("<f8").tobytes())
    return h.hexdigest()[:16]


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



_STANDARD: list[PmxRig] = []


def standard_rig() -> PmxRig:
    """The built-in standard MMD skeleton's rig (built once per process)."""
    if not _STANDARD:
        _STANDARD.append(build_rig(standard_model()))
    return _STANDARD[0]


def vmd_file_events(path: str, cache: PackCache, skip: Iterable[str] = ()) -> Iterator[Message]:
    """A VMD motion played on the standard MMD skeleton (:mod:`..formats.vmd_pose`) and retargeted,
    without Blender, as the messages a worker sends (as :func:`bvh_file_events`)."""
    t0 = time.perf_counter()
    motion = read_vmd(path)
    clip_id = bvh_clip_id(path)
    yield {"op": "clips", "clips": [clip_id], "timings": {"read": time.perf_counter() - t0}}
    if clip_id in set(skip):
        return
    t1 = time.perf_counter()
    rig = standard_rig()
    source, layout = cache.source(rig.skeleton, rig.tails)
    t2 = time.perf_counter()
    try:
        clip = play(rig, motion, name=clip_id).clip
        t3 = time.perf_counter()
        msg = bake_clip(cache, source, layout, clip)
    except MarionetteError as exc:
        yield {"op": "clip_failed", "clip": clip_id, "reason": str(exc)}
        return
    msg["clip"] = clip_id
    msg["timings"].update(map=t2 - t1, read=t3 - t2)
    yield msg

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
from ..mapping.quadruped import check_quadruped
from ..measure.chains import REFERENCE_ARRAYS, chain_reference, judge_played
from ..retarget.binding_cache import BindingCache, native_binding
from ..retarget.body_chains import BodyPlan, ChainBody, plan_of_description, read_body
from ..retarget.geometric import Binding, RigInput, retarget
from ..retarget.methods import retarget_with_methods
from ..retarget.quadruped import QuadrupedBinding, bind_quadrupeds, pose_of, retarget_quadruped
from ..retarget.quadruped_plant import plant_paws
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

    For a quadruped or chain-described target (:attr:`.settings.BakeSettings.chain_bodies`) a
    source is mapped as a quadruped by shape (or read as the settings' ``source_body``) and bound
    once per layout by :meth:`chain_binding`.
    """

    def __init__(self, settings: BakeSettings, capacity: int = 64) -> None:
        self.settings = settings
        self.bindings = BindingCache(capacity)
        self._mappings: dict[str, BoneMapping | MarionetteError] = {}
        self._chain_bindings: dict[str, QuadrupedBinding] = {}
        self._chain_hits = 0
        self._mapping_hits = 0
        self._mapping_misses = 0

    @property
    def stats(self) -> CacheStats:
        chain_misses = len(self._chain_bindings)
        return CacheStats(
            self._mapping_hits, self._mapping_misses, self.bindings.hits + self._chain_hits, self.bindings.misses + chain_misses
        )

    def source(self, skeleton: Skeleton, ends: Any | None) -> tuple[RigInput, str]:
        """The source rig with its automatic mapping, and its layout key. Raises the mapping's
        refusal for a rig that is not a usable humanoid."""
        key = layout_key(skeleton, ends)
        found = self._mappings.get(key)
        if found is None:
            self._mapping_misses += 1
            try:
                found = self._map_source(skeleton, ends)
            except MarionetteError as exc:
                found = exc
            self._mappings[key] = found
        else:
            self._mapping_hits += 1
        if isinstance(found, MarionetteError):
            raise type(found)(str(found))
        return RigInput(skeleton, found.bones(), ends), key

    def _map_source(self, skeleton: Skeleton, ends: Any | None) -> BoneMapping:
        s = self.settings
        if s.source_body is not None:
            return BoneMapping({}, body=s.source_body)
        if s.chain_bodies:
            if s.body is not None:
                raise MarionetteError("the target's body is described as chains: describe the sources' too (a source mapping with chains)")
            heads = skeleton.rest_placements()[:, :3, 3]
            try:
                return check_quadruped(skeleton.names, skeleton.parents, heads, ends)
            except MarionetteError as exc:
                try:
                    auto_map_skeleton(skeleton, ends).require_humanoid()
                except MarionetteError:
                    raise exc from None
                raise MarionetteError(f"a humanoid's clip, and the target is a quadruped: a humanoid drives a humanoid, a quadruped a quadruped ({exc})") from None
        mapping = auto_map_skeleton(skeleton, ends)
        mapping.require_humanoid()
        return mapping

    def chain_binding(self, source: RigInput, layout: str) -> tuple[QuadrupedBinding, bool]:
        """The chain-by-chain binding of ``source`` (of layout key ``layout``) onto a quadruped or
        chain-described target, and whether it came from the cache."""
        found = self._chain_bindings.get(layout)
        if found is not None:
            self._chain_hits += 1
            return found, True
        s = self.settings
        src_plan = plan_of_description(dict(s.source_body), source.skeleton) if s.source_body is not None else dict(source.slots)
        b = bind_quadrupeds(
            source.skeleton, src_plan, s.target.skeleton, _target_plan(s),
            None if source.ends is None else np.asarray(source.ends), None if s.target.ends is None else np.asarray(s.target.ends),
            root_motion=s.options.root_motion, options=s.options,
        )
        self._chain_bindings[layout] = b
        return b, False

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
    if s.chain_bodies:
        return _bake_chain_clip(cache, source, layout, clip)
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


#: The frames (spread over the clip) the per-chain figures of a baked clip are measured on, as a
#: single retarget measures them.
MEASURED_FRAMES = 120


def chain_reference_message(binding: QuadrupedBinding, source: Clip) -> Message:
    """What the per-chain figures of a chain-by-chain bake judge the pose Blender plays against
    (:func:`..measure.chains.chain_reference`), on at most :data:`MEASURED_FRAMES` frames of
    ``source`` (timed as the result), as message entries: its arrays (``reference_*``, the
    frames' indices ``reference_picks``) and the rest (``reference``). The writer, which holds
    the target, plays the written Action on those frames and judges it
    (:func:`played_chain_figures`)."""
    picks = np.unique(np.linspace(0, source.frame_count - 1, min(source.frame_count, MEASURED_FRAMES)).astype(int))
    ref = chain_reference(binding, pose_of(binding.source.skeleton, source.take(picks)), source.times[picks])
    out: Message = {f"reference_{k}": np.ascontiguousarray(ref.pop(k)) for k in REFERENCE_ARRAYS}
    out["reference_picks"] = picks
    out["reference"] = ref
    return out


def _target_plan(s: BakeSettings) -> BodyPlan | dict[str, str]:
    """The target's chains: its described body, else its quadruped slots."""
    return plan_of_description(dict(s.body), s.target.skeleton) if s.body is not None else dict(s.target.slots)


def target_body(settings: BakeSettings) -> ChainBody:
    """The target read as chains, as :meth:`PackCache.chain_binding` reads it for every source."""
    s = settings
    return read_body(s.target.skeleton, _target_plan(s), None if s.target.ends is None else np.asarray(s.target.ends))


def played_chain_figures(body: ChainBody, msg: Message, played: FloatArray) -> dict[str, Any]:
    """A chain-by-chain bake's per-chain figures (:func:`..measure.chains.judge_played`): the
    target ``body`` played at the message's reference frames (``played``: placements ``(P, B,
    4, 4)`` of the frames ``msg["frames"][msg["reference_picks"]]``) against the message's
    reference, as plain numbers for the report."""
    ref = {**msg["reference"], **{k: msg[f"reference_{k}"] for k in REFERENCE_ARRAYS}}
    full = judge_played(body, ref, played)
    return {
        "measured_frames": int(np.asarray(msg["reference_picks"]).size),
        "chains": full["chains"],
        "summary": full["summary"],
        "paw_slide": full["paw_slide"],
    }


def _bake_chain_clip(cache: PackCache, source: RigInput, layout: str, clip: Clip) -> Message:
    """:func:`bake_clip` onto a quadruped or chain-described target, as a single retarget does it
    (:func:`..retarget.quadruped.retarget_quadruped`, Plant Feet by
    :func:`..retarget.quadruped_plant.plant_paws`); the message also carries what Plant Feet held
    (``figures``) and the reference the writer judges the played pose against
    (:func:`chain_reference_message`)."""
    s = cache.settings
    t0 = time.perf_counter()
    binding, cached = cache.chain_binding(source, layout)
    t1 = time.perf_counter()
    timed = clip if s.keep_frames else clip.resample(s.scene_fps)
    result = retarget_quadruped(binding, timed)
    figures: dict[str, Any] = {}
    if s.options.plant_feet:
        result, planted, drop = plant_paws(binding, timed, result)
        if planted:
            figures["planted_feet"], figures["planted_hip_drop"] = planted, {"max": float(drop)}
    rate = timed.fps if s.keep_frames else s.scene_fps
    out = result.clip
    driven = np.flatnonzero(np.asarray(out.coverage) > 0.0)
    t2 = time.perf_counter()
    reference = chain_reference_message(binding, timed)
    return {
        **reference,
        "op": "clip",
        "names": [out.names[i] for i in driven],
        "rotations": np.ascontiguousarray(out.rotations[:, driven]),
        "translations": np.ascontiguousarray(out.translations[:, driven]),
        "frames": np.asarray(timed.frame_numbers(rate), dtype=np.float64),
        "fps": float(rate),
        "root_motion": np.asarray(result.root_motion, dtype=np.float64),
        "source_frames": int(clip.frame_count),
        "source_fps": float(clip.fps),
        "layout": layout,
        "cached_binding": bool(cached),
        "method": "quadruped chains",
        "native": False,
        "warnings": list(binding.warnings),
        "figures": figures,
        "timings": {"bind": t1 - t0, "retarget": t2 - t1, "measure": time.perf_counter() - t2},
    }


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
    yield _one_clip(cache, source, layout, clip_id, lambda: data.clip(clip_id), t1)


def _one_clip(cache: PackCache, source: RigInput, layout: str, clip_id: str, read: Any, t1: float) -> Message:
    """The message of a file's one clip: ``read()`` gives the clip, then it is baked; or the
    clip's failure. ``t1``: when mapping the source began."""
    t2 = time.perf_counter()
    try:
        clip = read()
        t3 = time.perf_counter()
        msg = bake_clip(cache, source, layout, clip)
    except MarionetteError as exc:
        return {"op": "clip_failed", "clip": clip_id, "reason": str(exc)}
    msg["clip"] = clip_id
    msg["timings"].update(map=t2 - t1, read=t3 - t2)
    return msg



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
    yield _one_clip(cache, source, layout, clip_id, lambda: play(rig, motion, name=clip_id).clip, t1)

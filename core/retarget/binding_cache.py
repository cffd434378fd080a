"""Native binding and the binding cache (docs/methods.md#native-binding-and-the-binding-cache).

Native binding. A clip read from a rig whose layout matches the target's -- same joint names,
same parents, same rest data, i.e. the same layout signature (:meth:`Skeleton.signature`) -- needs
no conversion at all: its keys are the target's keys. :func:`native_binding` decides that and
:meth:`NativeBinding.apply` hands the keys over bit for bit. Equal names are not enough: the same
rig with other bone rolls has other joint axes, so its keys mean something else (docs/conventions.md#layout-signature). Options
that ask for a change (root motion moved off the hips, an explicit travel scale other than 1,
fingers left out) also need a conversion, so they rule native binding out.

Binding cache. Binding a rig pair (facing, canonical poses, carry rotations) costs far more than
sampling one clip, and a pack of clips shares one pair. :class:`BindingCache` keeps bindings keyed
by :class:`BindingKey`: the method, both rigs' mapping definitions (slot -> bone), both layout
signatures, an exact digest of both rigs' rest frames and bone end points, and the options. Every
input a binding is computed from is part of its key, so an edited mapping or an edited rest can
only miss: a stale binding is never handed out. The exact rest digest makes the cache stricter
than the rounded layout signature (a rest nudged by less than the signature's rounding still gets
its own binding); native binding, by contrast, follows the signature, as docs/conventions.md#layout-signature defines
compatibility.

Hits and misses are counted (:attr:`BindingCache.hits`, :attr:`BindingCache.misses`); the least
recently used binding is dropped past ``capacity``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from ..rig.clip import Clip
from ..rig.skeleton import Skeleton
from .geometric import Binding, RetargetOptions, RigInput, bind
from .rest_space import RestSpaceBinding, bind_rest_space

_B = TypeVar("_B")


# --- native binding --------------------------------------------------------------------------


@dataclass(frozen=True)
class NativeBinding:
    """A clip bound to the target as it is: column ``c`` of the clip is target joint
    ``columns[c]``."""

    target_layout: str
    target_names: tuple[str, ...]
    columns: NDArray[np.int64]

    def apply(self, clip: Clip) -> Clip:
        """The clip's keys on the target's joints, unchanged (bit-exact); joints the clip does not
        name get identity keys and coverage 0."""
        n = len(self.target_names)
        if tuple(clip.names) == self.target_names:
            return clip  # already in the target's order: nothing to move
        t = clip.frame_count
        rot = np.zeros((t, n, 4))
        rot[..., 0] = 1.0
        tr = np.zeros((t, n, 3))
        rot[:, self.columns] = clip.rotations
        tr[:, self.columns] = clip.translations
        sc = None
        if clip.scales is not None:
            sc = np.ones((t, n, 3))
            sc[:, self.columns] = clip.scales
        cov = np.zeros(n)
        assert clip.coverage is not None  # Clip fills it in
        cov[self.columns] = clip.coverage
        return replace(clip, names=self.target_names, rotations=rot, translations=tr, scales=sc, coverage=cov)


def _neutral(options: RetargetOptions | None) -> bool:
    """Whether the options leave a native clip as it is."""
    if options is None:
        return True
    unit = all(v is None or float(v) == 1.0 for v in (options.scale, options.horizontal_scale, options.vertical_scale))
    # Planted feet need no conversion either: a clip on the target's own rig has its proportions.
    return options.root_motion == "HIPS" and unit and options.fingers


def native_refusal(clip: Clip, clip_layout: Skeleton, target: Skeleton, options: RetargetOptions | None = None) -> str | None:
    """Why ``clip`` (read from ``clip_layout``) cannot be bound natively to ``target``; ``None``
    when it can."""
    if clip_layout.names != target.names:
        return "the clip's rig and the target have different joint names or order"
    if clip_layout.signature() != target.signature():
        return "the clip's rig and the target have the same joint names but a different layout (parents or rest)"
    unknown = [nm for nm in clip.names if target.find(nm) is None]
    if unknown:
        return f"the clip names joints the target does not have: {', '.join(unknown[:5])}"
    if not _neutral(options):
        return "the options ask for a conversion (root motion off the hips, a travel scale, or no fingers)"
    return None


def native_binding(
    clip: Clip, clip_layout: Skeleton, target: Skeleton, options: RetargetOptions | None = None
) -> NativeBinding | None:
    """The native binding of ``clip`` onto ``target``, or ``None`` when it needs a conversion."""
    if native_refusal(clip, clip_layout, target, options) is not None:
        return None
    columns = np.array([target.index(nm) for nm in clip.names], dtype=np.int64)
    return NativeBinding(target.signature(), target.names, columns)


# --- the cache -------------------------------------------------------------------------------


def mapping_digest(slots: Mapping[str, str]) -> str:
    """Stable digest of a mapping definition (slot -> bone), independent of dict order."""
    h = hashlib.sha1()
    for slot in sorted(slots):
        h.update(f"{slot}\x00{slots[slot]}\x01".encode())
    return h.hexdigest()[:16]


def rest_digest(rig: RigInput) -> str:
    """Exact digest of what a binding reads from a rig besides names and parents: attachment
    frames and bone end points, to the last bit."""
    sk = rig.skeleton
    h = hashlib.sha1()
    h.update("\x00".join(sk.names).encode("utf-8"))
    h.update(np.ascontiguousarray(sk.parents, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(sk.parent_frames, dtype="<f8").tobytes())
    if sk.child_frames is not None:
        h.update(np.ascontiguousarray(sk.child_frames, dtype="<f8").tobytes())
    h.update(b"ends" if rig.ends is not None else b"no ends")
    if rig.ends is not None:
        h.update(np.ascontiguousarray(np.asarray(rig.ends, dtype=np.float64), dtype="<f8").tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class BindingKey:
    method: str
    source_mapping: str
    target_mapping: str
    source_layout: str
    target_layout: str
    rest: str
    settings: str


def binding_key(method: str, source: RigInput, target: RigInput, options: RetargetOptions | None, **settings: object) -> BindingKey:
    opts = options or RetargetOptions()
    extra = ",".join(f"{k}={settings[k]!r}" for k in sorted(settings))
    return BindingKey(
        method=method,
        source_mapping=mapping_digest(source.slots),
        target_mapping=mapping_digest(target.slots),
        source_layout=source.skeleton.signature(),
        target_layout=target.skeleton.signature(),
        rest=rest_digest(source) + rest_digest(target),
        settings=f"{opts!r};{extra}",
    )


class BindingCache:
    """Bindings of rig pairs, reused while nothing they were computed from has changed."""

    def __init__(self, capacity: int = 16) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[BindingKey, object] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()

    def _get(self, key: BindingKey, build: Callable[[], _B], kind: type[_B]) -> _B:
        found = self._entries.get(key)
        if isinstance(found, kind):
            self.hits += 1
            self._entries.move_to_end(key)
            return found
        self.misses += 1
        made = build()
        self._entries[key] = made
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return made

    def geometric(self, source: RigInput, target: RigInput, options: RetargetOptions | None = None) -> Binding:
        """The geometric-frame binding (:func:`core.retarget.geometric.bind`) of the pair."""
        key = binding_key("geometric", source, target, options)
        return self._get(key, lambda: bind(source, target, options), Binding)

    def rest_space(
        self,
        source: RigInput,
        target: RigInput,
        options: RetargetOptions | None = None,
        *,
        match_rest: bool = False,
        translate: bool = True,
    ) -> RestSpaceBinding:
        """The rest-space binding (:func:`core.retarget.rest_space.bind_rest_space`) of the pair."""
        key = binding_key("rest_space", source, target, options, match_rest=match_rest, translate=translate)
        return self._get(
            key,
            lambda: bind_rest_space(source, target, options, match_rest=match_rest, translate=translate),
            RestSpaceBinding,
        )

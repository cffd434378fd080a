"""A run's shared settings (:class:`BakeSettings`): what every clip's keys depend on besides the
clip, as a message for the workers and as the record stored on every baked Action and part."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..mapping.humanoid import SLOTS
from ..mapping.method_names import GEOMETRIC, METHODS, check_method_table
from ..mapping.quadruped_profile import is_quadruped_mapping
from ..retarget.geometric import RetargetOptions, RigInput
from .messages import Message, rig_from_message, rig_message


@dataclass(frozen=True)
class BakeSettings:
    """What every clip of a run shares: the target rig, its mapping's fingerprint, the retarget
    options, the timing rule and the retarget method: ``methods`` (slot -> method; empty:
    geometric frames everywhere) and ``match_rest``, as a single retarget takes them. The table
    is checked (and its names normalised) when the settings are made, so a bad one is refused
    before any clip is read.

    On a control rig (docs/control_rigs.md), ``target``'s slots are the bones the plan reads (a
    Rigify rig's ``ORG-`` bones), ``control_rig`` names the plan (recorded: a clip keyed on other
    controls is baked again on ``--resume``) and ``control`` is the plan itself
    (:class:`.bridge.control_target.ControlTarget`), which only the process that writes uses: it
    is not part of the workers' message.

    A quadruped target (its slots the quadruped profile's) or a target whose body is described as
    chains (``body``, docs/pipeline.md#other-bodies) is retargeted chain by chain
    (:attr:`chain_bodies`): each source is mapped as a quadruped by shape, or described by
    ``source_body`` (the source mapping's chains, one for the whole pack)."""

    target: RigInput
    target_mapping: str  # fingerprint of the target mapping (see :func:`mapping_key`)
    scene_fps: float
    keep_frames: bool = False
    options: RetargetOptions = field(default_factory=RetargetOptions)
    methods: Mapping[str, str] = field(default_factory=dict)
    match_rest: bool = False
    control_rig: str | None = None  # the control-rig plan's name ("Rigify, FK"); None: the mapped bones are keyed
    control: Any = field(default=None, compare=False, repr=False)
    body: Mapping[str, Any] | None = None  # the target's body described as chains
    source_body: Mapping[str, Any] | None = None  # every source's body described as chains

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", check_method_table(self.methods))

    @property
    def uses_methods(self) -> bool:
        """Whether clips go through :func:`core.retarget.methods.retarget_with_methods` (a table
        or ``match_rest`` given) rather than the geometric-frame binding alone."""
        return bool(self.methods) or self.match_rest

    @property
    def chain_bodies(self) -> bool:
        """Whether clips are carried chain by chain (a quadruped or chain-described target)."""
        return self.body is not None or is_quadruped_mapping(self.target.slots)

    def method_name(self) -> str:
        """The run's method in a few words: ``geometric``, ``rest-space``, or the methods the
        table mixes (``geometric+local-curl``); ``quadruped chains`` for a chain-by-chain run."""
        return "quadruped chains" if self.chain_bodies else method_summary(self.methods)

    def record(self) -> dict[str, Any]:
        """What a baked clip's keys depend on besides the clip itself (stored on every Action and
        part as :meth:`record_text`)."""
        out: dict[str, Any] = {
            "method": self.method_name(),
            "table": dict(sorted(self.methods.items())),
            "match_rest": bool(self.match_rest),
            "keep_frames": bool(self.keep_frames),
            "scene_fps": float(self.scene_fps),
            "options": json.loads(json.dumps(asdict(self.options))),
            "target_mapping": self.target_mapping,
        }
        if self.control_rig is not None:  # absent on other targets: their records are as they were
            out["control_rig"] = self.control_rig
        if self.chain_bodies:  # likewise absent on humanoid targets
            out["bodies"] = json.loads(json.dumps({"target": self.body, "source": self.source_body}, sort_keys=True))
        return out

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
            "control_rig": self.control_rig,
            "body": None if self.body is None else dict(self.body),
            "source_body": None if self.source_body is None else dict(self.source_body),
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
            control_rig=None if m.get("control_rig") is None else str(m["control_rig"]),
            body=m.get("body"),
            source_body=m.get("source_body"),
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


def mapping_key(slots: Mapping[str, str]) -> str:
    """Fingerprint of a slot -> bone mapping (what the retarget consumes of it)."""
    text = "\n".join(f"{s}\x00{b}" for s, b in sorted(slots.items()))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]

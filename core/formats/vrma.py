"""VRM Animation (``.vrma``): the normalised humanoid a clip is carried onto, and the file's extension.

A ``.vrma`` file is glTF 2.0 whose ``VRMC_vrm_animation`` extension names, for each VRM humanoid
bone, the node that carries its motion (``specVersion`` ``"1.0"``, ``humanoid.humanBones.<bone>.node``;
``expressions`` and ``lookAt`` optional; vrm-c/vrm-specification,
``specification/VRMC_vrm_animation-1.0/schema``). A player turns each node's rotation into the
avatar's own rest (VRMC_vrm_animation-1.0 ``how_to_transform_human_pose.md``): it reads the
node's rotation relative to the file's T-pose. Here every humanoid node's rest rotation is the
identity (the "normalised" pose of that document, VRM-0.x's convention), so each node's keyed
rotation is the bone's rotation since the T-pose as it is.

The T-pose follows VRM 1.0's ``tpose.md``: glTF axes (Y up, metres), facing +Z, symmetric about
X = 0, the character's left at +X, legs straight down, feet and toes along +Z, arms, hands and the
four fingers along ±X, each thumb at 45° between ±X and +Z, grounded at Y = 0. Joint heights and
widths are fractions of the standing height ``H`` from Drillis & Contini's segment proportions as
reproduced in D. A. Winter, *Biomechanics and Motor Control of Human Movement* (4th ed., 2009),
Fig. 4.1: hip (greater trochanter) 0.530, shoulder 0.818, chin 0.870, ankle 0.039, upper arm
0.186, forearm 0.146, hand 0.108, shoulder width 0.259, hip width 0.191, foot length 0.152. Joints
those figures do not give are placed by construction, stated beside each: the spine's joints divide
hips to neck in quarters, the clavicle starts a quarter of the way out from the midline, the
fingers' joints divide the hand as the comments say. Only rotations (and the hips' travel) reach
a player, so these lengths matter only as the directions of the rest bones and the hips' height.

Pure numpy: the glb container (:func:`read_glb`, :func:`write_glb`) and the extension's JSON
(:func:`vrma_extension`) are read and written here; the glTF itself is Blender's exporter's.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import MarionetteError
from ..retarget.geometric import RigInput
from ..rig.skeleton import Skeleton

FloatArray = NDArray[np.float64]

EXTENSION = "VRMC_vrm_animation"
SPEC_VERSION = "1.0"
#: Standing height of the normalised humanoid (metres); the hips stand at 0.530 of it.
HEIGHT = 1.70

# Drillis & Contini (Winter, Fig. 4.1), fractions of the height.
_HIP, _SHOULDER, _CHIN, _ANKLE = 0.530, 0.818, 0.870, 0.039
_UPPER_ARM, _FOREARM, _HAND = 0.186, 0.146, 0.108
_SHOULDER_HALF, _HIP_HALF, _FOOT = 0.259 / 2, 0.191 / 2, 0.152
_WRIST = _SHOULDER_HALF + _UPPER_ARM + _FOREARM
_THUMB = np.array([1.0, 0.0, 1.0]) / np.sqrt(2.0)  # 45° between +X and +Z (tpose.md, Definition 1.8)


@dataclass(frozen=True)
class HumanBone:
    """One VRM humanoid bone: its VRM name, the Marionette slot it plays, its VRM parent, and its
    head and tail in the T-pose (glTF axes, fractions of the height, left side or midline)."""

    name: str
    slot: str
    parent: str | None
    head: tuple[float, float, float]
    tail: tuple[float, float, float]


def _left(name: str, slot: str, parent: str | None, head: Sequence[float], tail: Sequence[float]) -> HumanBone:
    return HumanBone(name, slot, parent, (float(head[0]), float(head[1]), float(head[2])), (float(tail[0]), float(tail[1]), float(tail[2])))


def _finger_bones() -> list[HumanBone]:
    """The left hand's fingers: four fingers along +X from the knuckles (half the hand past the
    wrist), their three segments 0.45, 0.30 and 0.25 of the remaining half, side by side 1 % of
    the height apart in Z (index forward); the thumb's metacarpal starts at the wrist, 1 % forward,
    and its three segments (0.30, 0.25, 0.20 of the hand) run at 45° between +X and +Z."""
    out: list[HumanBone] = []
    knuckle = _WRIST + 0.5 * _HAND
    rest = 0.5 * _HAND
    for k, (finger, label) in enumerate((("index", "Index"), ("middle", "Middle"), ("ring", "Ring"), ("little", "Little"))):
        z = 0.015 - 0.01 * k
        joints = [knuckle, knuckle + 0.45 * rest, knuckle + 0.75 * rest, knuckle + rest]
        parent = "leftHand"
        for seg, part in enumerate(("Proximal", "Intermediate", "Distal")):
            name = f"left{label}{part}"
            out.append(_left(name, f"{finger}_{seg + 1}.L", parent, (joints[seg], _SHOULDER, z), (joints[seg + 1], _SHOULDER, z)))
            parent = name
    base = np.array([_WRIST, _SHOULDER, 0.01])
    ends = [base, base + 0.30 * _HAND * _THUMB, base + 0.55 * _HAND * _THUMB, base + 0.75 * _HAND * _THUMB]
    parent = "leftHand"
    for seg, part in enumerate(("Metacarpal", "Proximal", "Distal")):
        name = f"leftThumb{part}"
        out.append(_left(name, f"thumb_{seg + 1}.L", parent, ends[seg], ends[seg + 1]))
        parent = name
    return out


def _quarter(k: int) -> float:
    """The spine's joints divide hips to neck (shoulder height) in quarters."""
    return _HIP + 0.25 * k * (_SHOULDER - _HIP)


_MIDLINE: tuple[HumanBone, ...] = (
    _left("hips", "hips", None, (0.0, _HIP, 0.0), (0.0, _quarter(1), 0.0)),
    _left("spine", "spine", "hips", (0.0, _quarter(1), 0.0), (0.0, _quarter(2), 0.0)),
    _left("chest", "chest", "spine", (0.0, _quarter(2), 0.0), (0.0, _quarter(3), 0.0)),
    _left("upperChest", "upper_chest", "chest", (0.0, _quarter(3), 0.0), (0.0, _SHOULDER, 0.0)),
    _left("neck", "neck", "upperChest", (0.0, _SHOULDER, 0.0), (0.0, _CHIN, 0.0)),
    # The head's tail: the top of the head (1.0 of the height).
    _left("head", "head", "neck", (0.0, _CHIN, 0.0), (0.0, 1.0, 0.0)),
)

_LEFT: tuple[HumanBone, ...] = (
    _left("leftUpperLeg", "thigh.L", "hips", (_HIP_HALF, _HIP, 0.0), (_HIP_HALF, 0.285, 0.0)),  # knee 0.285
    _left("leftLowerLeg", "shin.L", "leftUpperLeg", (_HIP_HALF, 0.285, 0.0), (_HIP_HALF, _ANKLE, 0.0)),
    # Ball of the foot: 0.55 of the foot's length ahead of the ankle, 0.01 above the ground; toe tip at 0.75.
    _left("leftFoot", "foot.L", "leftLowerLeg", (_HIP_HALF, _ANKLE, 0.0), (_HIP_HALF, 0.01, 0.55 * _FOOT)),
    _left("leftToes", "toes.L", "leftFoot", (_HIP_HALF, 0.01, 0.55 * _FOOT), (_HIP_HALF, 0.01, 0.75 * _FOOT)),
    _left("leftShoulder", "shoulder.L", "upperChest", (0.25 * _SHOULDER_HALF, _SHOULDER, 0.0), (_SHOULDER_HALF, _SHOULDER, 0.0)),
    _left("leftUpperArm", "upper_arm.L", "leftShoulder", (_SHOULDER_HALF, _SHOULDER, 0.0), (_SHOULDER_HALF + _UPPER_ARM, _SHOULDER, 0.0)),
    _left("leftLowerArm", "forearm.L", "leftUpperArm", (_SHOULDER_HALF + _UPPER_ARM, _SHOULDER, 0.0), (_WRIST, _SHOULDER, 0.0)),
    _left("leftHand", "hand.L", "leftLowerArm", (_WRIST, _SHOULDER, 0.0), (_WRIST + _HAND, _SHOULDER, 0.0)),
    *_finger_bones(),
)


def _mirrored(bone: HumanBone) -> HumanBone:
    def flip(p: tuple[float, float, float]) -> tuple[float, float, float]:
        return (-p[0], p[1], p[2])

    def right(name: str | None) -> str | None:
        return None if name is None or not name.startswith("left") else "right" + name[4:]

    return HumanBone(str(right(bone.name)), bone.slot[:-2] + ".R", right(bone.parent) or bone.parent, flip(bone.head), flip(bone.tail))


#: Every VRM humanoid bone a ``.vrma`` carries, parents first (the eyes go through ``lookAt`` and
#: the jaw is left out: no clip of a body carries them).
HUMAN_BONES: tuple[HumanBone, ...] = _MIDLINE + _LEFT + tuple(_mirrored(b) for b in _LEFT)

#: The VRM humanoid's required bones (VRMC_vrm-1.0 ``humanoid.md``).
REQUIRED: tuple[str, ...] = (
    "hips", "spine", "head",
    "leftUpperLeg", "leftLowerLeg", "leftFoot", "rightUpperLeg", "rightLowerLeg", "rightFoot",
    "leftUpperArm", "leftLowerArm", "leftHand", "rightUpperArm", "rightLowerArm", "rightHand",
)

#: The humanBones the published schema lists (VRMC_vrm_animation.humanoid.humanBones.schema.json).
SCHEMA_BONES: frozenset[str] = frozenset(
    ["hips", "spine", "chest", "upperChest", "neck", "head", "jaw"]
    + [f"{side}{part}" for side in ("left", "right") for part in ("UpperLeg", "LowerLeg", "Foot", "Toes", "Shoulder", "UpperArm", "LowerArm", "Hand")]
    + [
        f"{side}{finger}{part}"
        for side in ("left", "right")
        for finger, parts in (
            ("Thumb", ("Metacarpal", "Proximal", "Distal")),
            *((f, ("Proximal", "Intermediate", "Distal")) for f in ("Index", "Middle", "Ring", "Little")),
        )
        for part in parts
    ]
)

#: Bones that may exist only with their parent (VRMC_vrm-1.0 ``humanoid.md``, "Needs Parent Bone").
NEEDS_PARENT: frozenset[str] = frozenset(
    ["upperChest"]
    + [f"{side}Thumb{part}" for side in ("left", "right") for part in ("Proximal", "Distal")]
    + [f"{side}{finger}{part}" for side in ("left", "right") for finger in ("Index", "Middle", "Ring", "Little") for part in ("Intermediate", "Distal")]
)

_BY_NAME = {b.name: b for b in HUMAN_BONES}

#: Turns glTF's axes (Y up, +Z forward) into Blender's (Z up, -Y forward): (x, y, z) -> (x, -z, y).
BLENDER_FROM_GLTF = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
#: The rest rotation of every bone in Blender's armature space: the bone's Y axis up (+Z), so that
#: Blender's glTF exporter writes each node's rest rotation as the identity.
BONE_REST = BLENDER_FROM_GLTF.copy()


def normalised_bones(slots: Iterable[str]) -> tuple[HumanBone, ...]:
    """The humanoid bones of the normalised rest a rig mapping ``slots`` can drive, parents first;
    each bone's parent is its nearest VRM ancestor that is kept (the spec's advice for a source
    with fewer bones: animate only the bones it has); a bone VRM allows only with its parent
    (:data:`NEEDS_PARENT`) is left out without it. Refuses a rig without a required bone."""
    have = set(slots)
    kept: list[HumanBone] = []
    names: set[str] = set()
    for b in HUMAN_BONES:  # parents first; a bone that needs its parent goes with it
        if b.slot in have and not (b.name in NEEDS_PARENT and b.parent not in names):
            kept.append(b)
            names.add(b.name)
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise MarionetteError(f"a VRM animation needs the humanoid bones {', '.join(missing)}: the rig maps no bone to them")
    out: list[HumanBone] = []
    for b in kept:
        parent = b.parent
        while parent is not None and parent not in names:
            parent = _BY_NAME[parent].parent
        out.append(HumanBone(b.name, b.slot, parent, b.head, b.tail))
    return tuple(out)


def normalised_rig(slots: Iterable[str], height: float = HEIGHT) -> RigInput:
    """The normalised T-pose as the retarget sees a rig (Blender's armature space, metres): one
    bone per humanoid bone in :func:`normalised_bones`, named after it, each with the rest
    rotation :data:`BONE_REST`, slot -> bone name, and the bones' tails."""
    bones = normalised_bones(slots)
    heads = np.array([b.head for b in bones]) * height @ BLENDER_FROM_GLTF.T
    tails = np.array([b.tail for b in bones]) * height @ BLENDER_FROM_GLTF.T
    rest = np.tile(np.eye(4), (len(bones), 1, 1))
    rest[:, :3, :3] = BONE_REST
    rest[:, :3, 3] = heads
    skeleton = Skeleton.from_rest_matrices([b.name for b in bones], [b.parent for b in bones], rest)
    order = [skeleton.index(b.name) for b in bones]
    ends = np.empty_like(tails)
    ends[order] = tails
    return RigInput(skeleton, {b.slot: b.name for b in bones}, ends)


def vrma_extension(node_names: Sequence[str | None], bones: Iterable[str]) -> dict[str, Any]:
    """The ``VRMC_vrm_animation`` object: ``bones`` (VRM names) found by name among the glTF's
    nodes (``node_names``, one per node, in order), each to its node index."""
    index = {nm: i for i, nm in enumerate(node_names) if nm is not None}
    human: dict[str, Any] = {}
    for bone in bones:
        if bone not in index:
            raise MarionetteError(f"the exported glTF has no node for the humanoid bone {bone!r}")
        human[bone] = {"node": index[bone]}
    return {"specVersion": SPEC_VERSION, "humanoid": {"humanBones": human}}


def schema_problems(gltf: Mapping[str, Any]) -> list[str]:
    """What in ``gltf`` (a parsed glTF JSON) breaks the VRMC_vrm_animation-1.0 schema's fields or
    the glTF's node indices; empty when nothing does."""
    out: list[str] = []
    ext = gltf.get("extensions", {}).get(EXTENSION)
    if not isinstance(ext, dict):
        return [f"no {EXTENSION} extension"]
    if EXTENSION not in gltf.get("extensionsUsed", []):
        out.append(f"{EXTENSION} is not in extensionsUsed")
    if ext.get("specVersion") != SPEC_VERSION:
        out.append(f"specVersion is {ext.get('specVersion')!r}, not {SPEC_VERSION!r}")
    known = {"specVersion", "humanoid", "expressions", "lookAt", "extensions", "extras"}
    out += [f"unknown property {k!r}" for k in ext if k not in known]
    humanoid = ext.get("humanoid")
    bones = humanoid.get("humanBones") if isinstance(humanoid, dict) else None
    if not isinstance(bones, dict):
        return [*out, "humanoid.humanBones is missing"]
    nodes = gltf.get("nodes", [])
    for name, value in bones.items():
        if name not in SCHEMA_BONES:
            out.append(f"humanBones.{name} is not a humanoid bone of the schema")
        node = value.get("node") if isinstance(value, dict) else None
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < len(nodes):
            out.append(f"humanBones.{name}.node is {node!r}, not a node index (0..{len(nodes) - 1})")
    targets = [v.get("node") for v in bones.values() if isinstance(v, dict)]
    if len(set(targets)) != len(targets):
        out.append("two humanBones name one node")
    return out


# --- the glb container (glTF 2.0, "Binary glTF Layout") -------------------------------------------

_MAGIC, _JSON, _BIN = 0x46546C67, 0x4E4F534A, 0x004E4942


def read_glb(data: bytes) -> tuple[dict[str, Any], bytes | None]:
    """The JSON chunk (parsed) and the BIN chunk of a ``.glb`` file's bytes."""
    if len(data) < 20:
        raise MarionetteError("not a glb file: shorter than its header")
    magic, version, length = struct.unpack_from("<III", data, 0)
    if magic != _MAGIC or version != 2 or length != len(data):
        raise MarionetteError("not a glTF 2.0 binary file (glb)")
    chunks: dict[int, bytes] = {}
    at = 12
    while at + 8 <= length:
        size, kind = struct.unpack_from("<II", data, at)
        chunks.setdefault(kind, data[at + 8 : at + 8 + size])
        at += 8 + size
    if _JSON not in chunks:
        raise MarionetteError("the glb file has no JSON chunk")
    return json.loads(chunks[_JSON].decode("utf-8")), chunks.get(_BIN)


def write_glb(gltf: Mapping[str, Any], binary: bytes | None) -> bytes:
    """A ``.glb`` file's bytes: ``gltf`` as the JSON chunk (padded with spaces to 4 bytes), then
    ``binary`` as the BIN chunk (padded with zeros) when there is one."""
    text = json.dumps(gltf, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 4)
    parts = [struct.pack("<II", len(text), _JSON), text]
    if binary is not None:
        body = binary + b"\0" * (-len(binary) % 4)
        parts += [struct.pack("<II", len(body), _BIN), body]
    payload = b"".join(parts)
    return struct.pack("<III", _MAGIC, 2, 12 + len(payload)) + payload


def humanoid_channels_only(gltf: dict[str, Any], human: Mapping[str, int]) -> None:
    """Keep, in every animation of ``gltf``, only what VRMC_vrm_animation plays: the rotations of
    the humanoid nodes (``human``: bone -> node) and the hips' translation. Blender's exporter
    keys translation, rotation and scale on every bone; a player refuses a scale channel
    (three-vrm's loader throws "Invalid path") and ignores translations below the hips. The
    samplers left unused go too; their accessors stay in the buffer, unused."""
    nodes = set(human.values())
    hips = human.get("hips")
    for animation in gltf.get("animations", []):
        kept = [
            c for c in animation.get("channels", [])
            if c.get("target", {}).get("node") in nodes
            and (c["target"].get("path") == "rotation" or (c["target"].get("path") == "translation" and c["target"]["node"] == hips))
        ]
        samplers = animation.get("samplers", [])
        used = sorted({c["sampler"] for c in kept})
        renumber = {old: new for new, old in enumerate(used)}
        animation["samplers"] = [samplers[i] for i in used]
        animation["channels"] = [{**c, "sampler": renumber[c["sampler"]]} for c in kept]


def drop_unused_data(gltf: dict[str, Any], binary: bytes | None) -> bytes | None:
    """Remove the accessors no animation sampler reads, the buffer views no accessor kept reads,
    and their bytes from ``binary`` (the glb's one buffer); renumber what is left. A glTF with
    meshes, skins, images or more than one buffer is left as it is (returned ``binary``)."""
    if binary is None or any(gltf.get(k) for k in ("meshes", "skins", "images")) or len(gltf.get("buffers", [])) != 1:
        return binary
    accessors, views = gltf.get("accessors", []), gltf.get("bufferViews", [])
    used = sorted({s[k] for a in gltf.get("animations", []) for s in a.get("samplers", []) for k in ("input", "output")})
    if any("sparse" in accessors[i] or "bufferView" not in accessors[i] for i in used):
        return binary
    acc_index = {old: new for new, old in enumerate(used)}
    view_used = sorted({accessors[i]["bufferView"] for i in used})
    view_index = {old: new for new, old in enumerate(view_used)}
    out = bytearray()
    new_views = []
    for v in view_used:
        view = dict(views[v])
        start = view.get("byteOffset", 0)
        out += b"\0" * (-len(out) % 4)  # every component type reads from a 4-byte boundary
        view["byteOffset"] = len(out)
        out += binary[start : start + view["byteLength"]]
        new_views.append(view)
    gltf["accessors"] = [{**accessors[i], "bufferView": view_index[accessors[i]["bufferView"]]} for i in used]
    gltf["bufferViews"] = new_views
    for a in gltf.get("animations", []):
        for smp in a.get("samplers", []):
            smp["input"], smp["output"] = acc_index[smp["input"]], acc_index[smp["output"]]
    gltf["buffers"][0]["byteLength"] = len(out)
    return bytes(out)


def add_extension(data: bytes, bones: Iterable[str]) -> bytes:
    """A glb exported by Blender with the ``VRMC_vrm_animation`` extension added for ``bones``,
    its animations kept to the channels the extension plays (:func:`humanoid_channels_only`) and
    the data no channel reads removed (:func:`drop_unused_data`)."""
    gltf, binary = read_glb(data)
    ext = vrma_extension([n.get("name") for n in gltf.get("nodes", [])], bones)
    gltf.setdefault("extensions", {})[EXTENSION] = ext
    humanoid_channels_only(gltf, {b: v["node"] for b, v in ext["humanoid"]["humanBones"].items()})
    binary = drop_unused_data(gltf, binary)
    used = gltf.setdefault("extensionsUsed", [])
    if EXTENSION not in used:
        used.append(EXTENSION)
    return write_glb(gltf, binary)

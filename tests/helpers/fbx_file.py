"""A minimal reader of binary FBX files (version 7.x), for tests that check what an exported file
holds: the node tree with its properties, the GlobalSettings (axes, unit), the models' local
transforms and the animation stacks' names. Written from the public description of the format
(Blender's ``io_scene_fbx/parse_fbx.py`` reads it the same way); arrays are left undecoded."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"Kaydara FBX Binary  \x00"


@dataclass
class Node:
    name: str
    props: list[Any]
    children: list[Node] = field(default_factory=list)

    def find(self, name: str) -> list[Node]:
        return [c for c in self.children if c.name == name]

    def first(self, name: str) -> Node:
        return self.find(name)[0]


def _prop(data: bytes, at: int) -> tuple[Any, int]:
    code = chr(data[at])
    at += 1
    scalar = {"Y": "<h", "C": "<?", "I": "<i", "F": "<f", "D": "<d", "L": "<q"}
    if code in scalar:
        fmt = scalar[code]
        return struct.unpack_from(fmt, data, at)[0], at + struct.calcsize(fmt)
    if code in "SR":
        (n,) = struct.unpack_from("<I", data, at)
        raw = data[at + 4 : at + 4 + n]
        return (raw.decode("utf-8", "replace") if code == "S" else raw), at + 4 + n
    if code in "fdlibc":
        _count, _encoding, size = struct.unpack_from("<III", data, at)
        return None, at + 12 + size  # arrays are not needed here
    raise ValueError(f"unknown FBX property type {code!r} at byte {at - 1}")


def _node(data: bytes, at: int, wide: bool) -> tuple[Node | None, int]:
    head = "<QQQB" if wide else "<IIIB"
    end, count, _plen, nlen = struct.unpack_from(head, data, at)
    at += struct.calcsize(head)
    if end == 0:
        return None, at
    name = data[at : at + nlen].decode("ascii", "replace")
    at += nlen
    props = []
    for _ in range(count):
        value, at = _prop(data, at)
        props.append(value)
    node = Node(name, props)
    while at < end:
        child, at = _node(data, at, wide)
        if child is None:
            break
        node.children.append(child)
    return node, end


def read_fbx(path: str | Path) -> Node:
    """The root of a binary FBX file's node tree."""
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path}: not a binary FBX file")
    (version,) = struct.unpack_from("<I", data, 23)
    wide = version >= 7500
    root = Node("", [])
    at = 27
    while at < len(data):
        child, at = _node(data, at, wide)
        if child is None:
            break
        root.children.append(child)
    return root


def properties70(node: Node) -> dict[str, list[Any]]:
    """A node's ``Properties70`` as name -> values (after the type strings)."""
    out: dict[str, list[Any]] = {}
    for holder in node.find("Properties70"):
        for p in holder.find("P"):
            out[str(p.props[0])] = p.props[4:]
    return out


def global_settings(root: Node) -> dict[str, list[Any]]:
    return properties70(root.first("GlobalSettings"))


def models(root: Node) -> dict[str, tuple[str, dict[str, list[Any]]]]:
    """Every Model: name (without the ``\\x00\\x01Model`` suffix) -> (kind, properties)."""
    out = {}
    for m in root.first("Objects").find("Model"):
        name = str(m.props[1]).split("\x00")[0]
        out[name] = (str(m.props[2]), properties70(m))
    return out


def take_names(root: Node) -> list[str]:
    """The names of the file's animation stacks (its clips)."""
    return [str(s.props[1]).split("\x00")[0] for s in root.first("Objects").find("AnimationStack")]


def _euler_xyz(deg: list[float]) -> Any:
    import numpy as np

    x, y, z = np.radians(deg)
    rx = np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(z), -np.sin(z), 0], [np.sin(z), np.cos(z), 0], [0, 0, 1]])
    return rz @ ry @ rx


def global_positions(root: Node) -> dict[str, Any]:
    """Every Model's rest position in the file's own coordinates and units, from its ``Lcl``
    translation, rotation (Euler XYZ, degrees) and scaling composed down the ``Connections`` tree
    (the files Blender writes carry no pre/post rotations or pivots)."""
    import numpy as np

    ids = {}
    local = {}
    for m in root.first("Objects").find("Model"):
        name = str(m.props[1]).split("\x00")[0]
        p = properties70(m)
        mat = np.eye(4)
        mat[:3, :3] = _euler_xyz(p.get("Lcl Rotation", [0, 0, 0])) * np.array(p.get("Lcl Scaling", [1, 1, 1]))[None]
        mat[:3, 3] = p.get("Lcl Translation", [0, 0, 0])
        ids[m.props[0]] = name
        local[name] = mat
    parent = {}
    for c in root.first("Connections").find("C"):
        if c.props[0] == "OO" and c.props[1] in ids and c.props[2] in ids:
            parent[ids[c.props[1]]] = ids[c.props[2]]

    def world(name: str) -> Any:
        return world(parent[name]) @ local[name] if name in parent else local[name]

    return {name: world(name)[:3, 3] for name in local}

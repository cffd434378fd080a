"""VMD files written for the tests, record by record as the format lays them out (the reader's own
code is not used), so a test can make any motion, any interpolation and any corruption."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

LINEAR = (20, 20, 107, 107)


@dataclass
class Key:
    bone: str
    frame: int
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)  # x, y, z, w
    #: Per channel X, Y, Z, rotation: (x1, y1, x2, y2) in 0..127.
    curves: Sequence[tuple[int, int, int, int]] = (LINEAR,) * 4
    physics: bool = True


@dataclass
class Motion:
    model: str = "テスト"
    keys: list[Key] = field(default_factory=list)
    morphs: list[tuple[str, int, float]] = field(default_factory=list)
    #: (frame, visible, {ik name: on}).
    properties: list[tuple[int, bool, dict[str, bool]]] = field(default_factory=list)
    #: Write the camera, light, self-shadow and property sections (older files stop after morphs).
    full: bool = True
    old: bool = False


def _name(text: str, size: int) -> bytes:
    raw = text.encode("cp932")[:size]
    return raw + b"\0" + b"\xfd" * (size - len(raw) - 1) if len(raw) < size else raw


def interpolation(curves: Sequence[tuple[int, int, int, int]], physics: bool = True) -> bytes:
    """MMD's 64-byte block: row c holds channel c's x1, then the rows' usual shifted copies; bytes 2
    and 3 flag physics off with 99, 15."""
    flat = list(curves)
    # Row 0 order: X_x1 Y_x1 Z_x1 R_x1  X_y1 Y_y1 Z_y1 R_y1  X_x2 ... R_x2  X_y2 ... R_y2.
    base = [flat[c][k] for k in range(4) for c in range(4)]
    rows = []
    for r in range(4):
        row = (base[r:] + ([1] + [0] * (r - 1) if r else []))[:16]
        rows.extend(row)
    if not physics:
        rows[2], rows[3] = 99, 15
    return bytes(rows)


def vmd_bytes(m: Motion) -> bytes:
    out = bytearray()
    if m.old:
        out += b"Vocaloid Motion Data file".ljust(30, b"\0") + _name(m.model, 10)
    else:
        out += b"Vocaloid Motion Data 0002".ljust(30, b"\0") + _name(m.model, 20)
    out += struct.pack("<I", len(m.keys))
    for k in m.keys:
        out += _name(k.bone, 15) + struct.pack("<I3f4f", k.frame, *k.position, *k.rotation) + interpolation(k.curves, k.physics)
    out += struct.pack("<I", len(m.morphs))
    for name, frame, weight in m.morphs:
        out += _name(name, 15) + struct.pack("<If", frame, weight)
    if not m.full:
        return bytes(out)
    out += struct.pack("<I", 1) + struct.pack("<If3f3f", 0, -45.0, 0, 10, 0, 0, 0, 0) + bytes([20, 107, 20, 107] * 6) + struct.pack("<IB", 30, 0)
    out += struct.pack("<I", 1) + struct.pack("<I3f3f", 0, 0.6, 0.6, 0.6, -0.5, -1.0, 0.5)
    out += struct.pack("<I", 0)
    out += struct.pack("<I", len(m.properties))
    for frame, visible, iks in m.properties:
        out += struct.pack("<IBI", frame, int(visible), len(iks))
        for name, on in iks.items():
            out += _name(name, 20) + bytes([int(on)])
    return bytes(out)

"""A small humanoid BVH written by the tests themselves (no third-party file needed).

Like the CMU files: Y-up, the rest at the origin (its feet a hip height below it) while the
motion's root stands at hip height on the floor, so its own floor lies a hip height above its
rest feet. Each frame bends the joints by a few degrees and the root walks forward.
"""

from __future__ import annotations

import math
from pathlib import Path

HIP_HEIGHT = 43.0

# (name, parent, offset from the parent's head, end-site offset or None)
JOINTS = [
    ("Hips", None, (0.0, 0.0, 0.0), None),
    ("Spine", "Hips", (0.0, 8.0, 0.0), None),
    ("Chest", "Spine", (0.0, 10.0, 0.0), None),
    ("Neck", "Chest", (0.0, 12.0, 0.0), None),
    ("Head", "Neck", (0.0, 5.0, 0.5), (0.0, 9.0, 0.0)),
    *[
        joint
        for side, x in (("Left", 1.0), ("Right", -1.0))
        for joint in (
            (f"{side}Shoulder", "Chest", (x * 2.0, 10.0, 0.0), None),
            (f"{side}Arm", f"{side}Shoulder", (x * 6.0, 0.0, 0.0), None),
            (f"{side}ForeArm", f"{side}Arm", (x * 12.0, 0.0, -0.5), None),
            (f"{side}Hand", f"{side}ForeArm", (x * 11.0, 0.0, 0.5), (x * 7.0, 0.0, 0.0)),
            (f"{side}UpLeg", "Hips", (x * 4.5, -2.0, 0.0), None),
            (f"{side}Leg", f"{side}UpLeg", (0.0, -19.0, 0.8), None),
            (f"{side}Foot", f"{side}Leg", (0.0, -18.5, -0.8), None),
            (f"{side}ToeBase", f"{side}Foot", (0.0, -3.5, 6.0), (0.0, 0.0, 3.0)),
        )
    ],
]


def bvh_text(frames: int = 12, frame_time: str = "0.0333333") -> str:
    children: dict[str | None, list[int]] = {}
    for k, (_, parent, _, _) in enumerate(JOINTS):
        children.setdefault(parent, []).append(k)
    lines = ["HIERARCHY"]

    def write(k: int, depth: int) -> None:
        name, parent, offset, end = JOINTS[k]
        pad = "  " * depth
        lines.append(f"{pad}{'ROOT' if parent is None else 'JOINT'} {name}")
        lines.append(pad + "{")
        lines.append(f"{pad}  OFFSET {offset[0]:.4f} {offset[1]:.4f} {offset[2]:.4f}")
        channels = "Zrotation Xrotation Yrotation"
        lines.append(f"{pad}  CHANNELS 6 Xposition Yposition Zposition {channels}" if parent is None else f"{pad}  CHANNELS 3 {channels}")
        for c in children.get(name, []):
            write(c, depth + 1)
        if end is not None:
            lines.extend([f"{pad}  End Site", pad + "  {", f"{pad}    OFFSET {end[0]:.4f} {end[1]:.4f} {end[2]:.4f}", pad + "  }"])
        lines.append(pad + "}")

    write(0, 0)
    lines += ["MOTION", f"Frames: {frames}", f"Frame Time: {frame_time}"]
    for f in range(frames):
        phase = 2.0 * math.pi * f / frames
        row = [0.3 * math.sin(phase), HIP_HEIGHT + 0.5 * math.cos(2 * phase), 4.0 * f]
        for k, (name, _, _, _) in enumerate(JOINTS):
            s = math.sin(phase + 0.4 * k)
            swing = 20.0 * s if "Leg" in name or "Arm" in name else 6.0 * s
            row += [3.0 * math.cos(phase + k), swing, 2.0 * s]  # Z, X, Y rotations (degrees)
        lines.append(" ".join(f"{v:.4f}" for v in row))
    return "\n".join(lines) + "\n"


def write_bvh(path: Path, frames: int = 12, frame_time: str = "0.0333333") -> Path:
    path.write_text(bvh_text(frames, frame_time))
    return path

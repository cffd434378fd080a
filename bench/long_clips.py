"""Long mocap clips for the benchmarks, made from a short CMU take without a seam.

:func:`write_ping_pong_bvh` writes the take forwards, then backwards, then forwards again, ...
until the wanted number of frames: every frame follows a frame it was next to in the take, so
the clip has no jump (a plain loop would teleport the hips back at each seam).
"""

from __future__ import annotations

from pathlib import Path

from bench.bench_files import DATA

CMU_WALK = DATA / "bvh" / "cmu" / "12_03_motionbuilder.bvh"
QUATERNIUS = DATA / "fbx" / "quaternius_male_casual.fbx"


def write_ping_pong_bvh(source: Path, frames: int, out: Path) -> Path:
    """``out``: ``source``'s hierarchy and its motion played back and forth for ``frames`` frames."""
    text = source.read_text()
    head, _, motion = text.partition("MOTION")
    lines = [ln for ln in motion.splitlines() if ln.strip()]
    rows = lines[2:]  # after "Frames:" and "Frame Time:"
    cycle = rows + rows[-2:0:-1]
    picked = [cycle[k % len(cycle)] for k in range(frames)]
    with out.open("w") as f:
        f.write(head + "MOTION\n" + f"Frames: {frames}\n" + lines[1].strip() + "\n")
        f.write("\n".join(picked) + "\n")
    return out

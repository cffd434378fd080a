"""A picture of a retarget report: per-bone direction error over time, and source vs target stick
figures at key frames (front and side). Drawn from the JSON report alone, with matplotlib
(installed with the command-line extras; Blender's own Python does not need it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def write_report_png(report: dict[str, Any], path: str | Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - the extras install it
        from ..core.errors import MarionetteError

        raise MarionetteError(f"the report picture needs matplotlib ({exc}); pip install matplotlib") from exc

    over_time = report["direction_error_over_time_deg"]
    slots = list(over_time)
    errors = np.array([over_time[s] for s in slots])
    sketches = report["key_frames"]
    n_keys = len(sketches["frames"])
    fig = plt.figure(figsize=(max(10, 2.2 * n_keys), 9), dpi=100)
    grid = fig.add_gridspec(3, n_keys, height_ratios=[1.3, 1, 1])
    ax = fig.add_subplot(grid[0, :])
    vmax = max(1.0, float(np.nanmax(errors)) if errors.size else 1.0)
    im = ax.imshow(errors, aspect="auto", cmap="RdYlGn_r", vmin=0.0, vmax=vmax, interpolation="nearest")
    ax.set_yticks(range(len(slots)), slots, fontsize=6)
    ax.set_xlabel("frame")
    s = report["summary"]
    ax.set_title(
        f"bone direction error (deg): mean {s['mean_direction_error']:.2f}, max {s['max_direction_error']:.2f}; "
        f"hips height error {100 * s['hips_height_error']:.1f}%"
    )
    fig.colorbar(im, ax=ax, fraction=0.02)
    for row, view in ((1, "front"), (2, "side")):
        for k, frame in enumerate(sketches["frames"]):
            a = fig.add_subplot(grid[row, k])
            for side, colour in (("source", "tab:blue"), ("target", "tab:orange")):
                for x0, y0, x1, y1 in sketches[side][view][k]:
                    a.plot([x0, x1], [y0, y1], color=colour, linewidth=2 if side == "source" else 1.2)
            a.set_aspect("equal")
            a.set_xlim(-1.2, 1.2)
            a.set_ylim(-1.2, 1.3)
            a.set_xticks([])
            a.set_yticks([])
            a.set_title(f"{view}, frame {frame}", fontsize=8)
    fig.text(0.01, 0.01, "blue: source (aligned, in its hip heights)   orange: target", fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

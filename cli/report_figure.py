"""A picture of a retarget report: per-bone direction error over time, and source vs target stick
figures at key frames (front and side); for a quadruped or a body described as chains, each
chain's direction error and each paw's slide against the source's. Drawn from the JSON report
alone, with matplotlib (installed with the command-line extras; Blender's own Python does not
need it)."""

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

    if "direction_error_over_time_deg" not in report:
        _chains_png(plt, report, path)
        return
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


def _chains_png(plt: Any, report: dict[str, Any], path: str | Path) -> None:
    """A chain-by-chain report's picture: each chain's mean and largest direction error, and each
    planted paw's slide beside the source's."""
    chains = report["chains"]
    names = list(chains)
    slides = report.get("paw_slide", {})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.6 * len(names)), 8), dpi=100, height_ratios=[1.4, 1])
    x = np.arange(len(names))
    top.bar(x - 0.2, [chains[c]["mean_direction_error"] for c in names], 0.4, label="mean", color="tab:blue")
    top.bar(x + 0.2, [chains[c]["max_direction_error"] for c in names], 0.4, label="largest", color="tab:red")
    top.set_xticks(x, names, rotation=45, ha="right", fontsize=7)
    top.set_ylabel("direction error (deg)")
    s = report["summary"]
    top.set_title(
        f"{report.get('body_plan', 'chains')}: direction error mean {s['mean_direction_error']:.2f} deg, largest "
        f"{s['max_direction_error']:.2f} deg\ntravel off the source's by at most {s['travel']['largest_gap_hip_heights']:.3f} pelvis heights",
        fontsize=10,
    )
    top.legend(fontsize=8)
    paws = list(slides)
    px = np.arange(len(paws))
    bottom.bar(px - 0.2, [100 * slides[p]["source_slide"] for p in paws], 0.4, label="source", color="tab:gray")
    bottom.bar(px + 0.2, [100 * slides[p]["slide"] for p in paws], 0.4, label="target", color="tab:orange")
    bottom.set_xticks(px, paws, fontsize=8)
    bottom.set_ylabel("planted slide (% of pelvis height)")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

"""Per-chain figures of a quadruped retarget (docs/pipeline.md#quadrupeds), measured on the
placements Blender plays against the source carried into the target's body frame and scale:

* **chain directions**: for every driven bone of a chain, the angle between its played segment
  and the source chain's chord over the same arc interval, mean and max per chain;
* **pelvis orientation**: the angle between the played pelvis and the source's carried one;
* **travel**: the played pelvis' distance from its first-frame place against the source's, scaled,
  and the largest gap between the two paths, in target pelvis heights;
* **facing**: the angle between the played body's forward (pelvis to head, across the ground)
  and the source's carried forward, mean and max;
* **paw slide**: given the frames' times, how far each target paw slides over the ground while
  the source's is planted (:func:`..retarget.quadruped_plant.paw_contacts`), in target pelvis
  heights, against the source paw's own slide in source pelvis heights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..retarget.quadruped import QuadrupedBinding, carried_orientations, pelvis_path
from ..retarget.quadruped_plant import paw_contacts
from ..rig.rotations import FloatArray


def _angles(a: FloatArray, b: FloatArray) -> FloatArray:
    cos = np.einsum("...i,...i->...", a, b) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    return np.asarray(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))), dtype=np.float64)


def _rot_angles(a: FloatArray, b: FloatArray) -> FloatArray:
    rel = np.swapaxes(a, -1, -2) @ b
    tr = np.trace(rel, axis1=-2, axis2=-1)
    return np.asarray(np.degrees(np.arccos(np.clip((tr - 1.0) / 2.0, -1.0, 1.0))), dtype=np.float64)


def _orient(m: FloatArray) -> FloatArray:
    r = m[..., :3, :3]
    return np.asarray(r / np.linalg.norm(r, axis=-2, keepdims=True), dtype=np.float64)


def forward_of(body: Any, placements: FloatArray) -> FloatArray:
    """A body's forward ``(T, 3)`` at ``placements``: pelvis head to head across its rest ground
    (a body without a head chain: its rest forward turned with its root)."""
    up = body.axes.up
    if body.head < 0:
        turn = _orient(placements[:, body.pelvis]) @ _orient(body.rest[body.pelvis]).T
        run = turn @ body.axes.forward
    else:
        run = placements[:, body.head, :3, 3] - placements[:, body.pelvis, :3, 3]
    return np.asarray(run - np.outer(run @ up, up), dtype=np.float64)


def paw_slide(binding: QuadrupedBinding, source: FloatArray, played: FloatArray, times: FloatArray) -> dict[str, dict[str, float]]:
    """Per leg chain both rigs have: the target paw's slide and the source paw's own over the
    source's planted frames (see module doc)."""
    src, tgt = binding.source, binding.target
    out = {}
    for chain, planted in paw_contacts(src, source, times).items():
        if chain not in tgt.chains:
            continue
        both = planted[1:] & planted[:-1]
        slides = []
        for body, pose in ((tgt, played), (src, source)):
            paw = pose[:, body.chains[chain][-1], :3, 3]
            flat = paw - np.outer(paw @ body.axes.up, body.axes.up)
            steps = np.linalg.norm(np.diff(flat, axis=0), axis=-1) / max(body.hip_height, 1e-9)
            slides.append(float(steps[both].sum()))
        out[chain] = {"slide": slides[0], "source_slide": slides[1], "contact_frames": int(both.sum())}
    return out


def measure_chains(binding: QuadrupedBinding, source: FloatArray, played: FloatArray, times: FloatArray | None = None) -> dict[str, Any]:
    """The figures (see module doc) of ``played`` target placements ``(T, Bt, 4, 4)`` against the
    ``source`` placements ``(T, Bs, 4, 4)`` at the same frames (at ``times``, seconds, for the paw
    slide)."""
    tgt = binding.target
    lin_s, pos_s = _orient(source), source[..., :3, 3]
    lin_t, pos_t = _orient(played), played[..., :3, 3]
    a = binding.align
    chains: dict[str, dict[str, float]] = {}
    errors: list[FloatArray] = []
    for c in binding.shared:
        per = []
        tp = tgt.points[c]
        t_pts = tp.positions(lin_t, pos_t)
        for k, cb in enumerate(cb for cb in binding.carried if cb.chain == c):
            s_pts = pos_s[:, list(cb.point_bones)] + np.einsum("tmij,mj->tmi", lin_s[:, list(cb.point_bones)], cb.offsets)
            chord = np.einsum("m,tmi->ti", cb.coef, s_pts) @ a.T
            per.append(_angles(t_pts[:, k + 1] - t_pts[:, k], chord))
        err = np.stack(per, axis=-1)
        errors.append(err.reshape(-1))
        chains[c] = {"bones": len(tp.bones), "source_bones": len(binding.source.points[c].bones),
                     "mean_direction_error": float(err.mean()), "max_direction_error": float(err.max())}
    expected = carried_orientations(binding, source)[tgt.pelvis]
    pelvis_err = _rot_angles(lin_t[:, tgt.pelvis], expected)
    want = pelvis_path(binding, source)
    got = pos_t[:, tgt.pelvis]
    height = max(tgt.hip_height, 1e-9)
    up = tgt.axes.up

    def across(v: FloatArray) -> FloatArray:
        return np.asarray(v - np.outer(v @ up, up), dtype=np.float64)

    travel_src = float(np.linalg.norm(across(want[-1] - want[0])))
    travel_tgt = float(np.linalg.norm(across(got[-1] - got[0])))
    fwd_t = forward_of(tgt, played)
    fwd_s = forward_of(binding.source, source) @ a.T
    facing = _angles(fwd_t, fwd_s)
    all_err = np.concatenate(errors) if errors else np.zeros(1)
    slide = {} if times is None else paw_slide(binding, source, played, np.asarray(times, dtype=np.float64))
    return {
        "paw_slide": slide,
        "body_plan": binding.describe()["body_plan"],
        "chains": chains,
        "summary": {
            "mean_direction_error": float(all_err.mean()),
            "max_direction_error": float(all_err.max()),
            "pelvis_orientation_error": float(pelvis_err.mean()),
            "travel": {"source_scaled": travel_src, "target": travel_tgt,
                       "largest_gap_hip_heights": float(np.linalg.norm(got - want, axis=-1).max() / height)},
            "facing_error": {"mean": float(facing.mean()), "max": float(facing.max())},
        },
        "binding": binding.describe(),
    }

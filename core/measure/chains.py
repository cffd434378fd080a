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


#: The arrays of a reference (:func:`chain_reference`), by name.
REFERENCE_ARRAYS = ("chords", "pelvis", "path", "forward", "contacts")


def chain_reference(binding: QuadrupedBinding, source: FloatArray, times: FloatArray | None = None) -> dict[str, Any]:
    """What a played target pose is judged against, from the ``source`` placements ``(T, Bs, 4,
    4)`` alone, in the target's skeleton space: each carried bone's source chord (``chords``
    ``(T, N, 3)``, chain by chain in :attr:`~..retarget.quadruped.QuadrupedBinding.shared` order),
    the pelvis orientation (``pelvis``) and path (``path``) it should play, the source's forward
    (``forward``) and, given the frames' ``times``, the frames each source paw is planted
    (``contacts`` ``(T, L)`` for the ``legs``) with its own slide. A process that holds the
    target but not the source (Batch Bake's writer) judges what Blender plays with it
    (:func:`judge_played`)."""
    src, tgt = binding.source, binding.target
    lin_s, pos_s = _orient(source), source[..., :3, 3]
    a = binding.align
    chords = []
    for c in binding.shared:
        for cb in (cb for cb in binding.carried if cb.chain == c):
            s_pts = pos_s[:, list(cb.point_bones)] + np.einsum("tmij,mj->tmi", lin_s[:, list(cb.point_bones)], cb.offsets)
            chords.append(np.einsum("m,tmi->ti", cb.coef, s_pts) @ a.T)
    legs: list[str] = []
    contacts: list[Any] = []
    slides: list[float] = []
    if times is not None:
        for chain, planted in paw_contacts(src, source, np.asarray(times, dtype=np.float64)).items():
            if chain in tgt.chains:
                legs.append(chain)
                contacts.append(planted)
                slides.append(_slide(src, source, chain, planted))
    t = source.shape[0]
    return {
        "chords": np.stack(chords, axis=1) if chords else np.zeros((t, 0, 3)),
        "pelvis": carried_orientations(binding, source)[tgt.pelvis],
        "path": pelvis_path(binding, source),
        "forward": forward_of(src, source) @ a.T,
        "contacts": np.stack(contacts, axis=1) if contacts else np.zeros((t, 0), dtype=bool),
        "chains": [[c, len(src.points[c].bones)] for c in binding.shared],
        "legs": legs,
        "source_slides": slides,
        "body_plan": binding.describe()["body_plan"],
    }


def _slide(body: Any, pose: FloatArray, chain: str, planted: Any) -> float:
    """How far ``body``'s paw of ``chain`` slides across its ground over the frames it and the
    frame before are ``planted``, in its pelvis heights."""
    both = planted[1:] & planted[:-1]
    paw = pose[:, body.chains[chain][-1], :3, 3]
    flat = paw - np.outer(paw @ body.axes.up, body.axes.up)
    steps = np.linalg.norm(np.diff(flat, axis=0), axis=-1) / max(body.hip_height, 1e-9)
    return float(steps[both].sum())


def judge_played(tgt: Any, reference: dict[str, Any], played: FloatArray) -> dict[str, Any]:
    """The figures (see module doc) of ``played`` placements ``(T, Bt, 4, 4)`` of the target body
    ``tgt`` (a :class:`~..retarget.body_chains.ChainBody`) against a :func:`chain_reference`."""
    lin_t, pos_t = _orient(played), played[..., :3, 3]
    chains: dict[str, dict[str, float]] = {}
    bones: dict[str, float] = {}
    errors: list[FloatArray] = []
    chords = np.asarray(reference["chords"], dtype=np.float64)
    at = 0
    for c, source_bones in reference["chains"]:
        tp = tgt.points[c]
        t_pts = tp.positions(lin_t, pos_t)
        n = len(tp.bones)
        err = _angles(np.diff(t_pts, axis=1)[:, :n], chords[:, at : at + n])
        at += n
        errors.append(err.reshape(-1))
        bones.update({tgt.skeleton.names[b]: float(e) for b, e in zip(tp.bones, err.mean(axis=0), strict=True)})
        chains[c] = {"bones": n, "source_bones": int(source_bones),
                     "mean_direction_error": float(err.mean()), "max_direction_error": float(err.max())}
    pelvis_err = _rot_angles(lin_t[:, tgt.pelvis], np.asarray(reference["pelvis"], dtype=np.float64))
    bones[tgt.skeleton.names[tgt.pelvis]] = float(pelvis_err.mean())
    want = np.asarray(reference["path"], dtype=np.float64)
    got = pos_t[:, tgt.pelvis]
    height = max(tgt.hip_height, 1e-9)
    up = tgt.axes.up

    def across(v: FloatArray) -> FloatArray:
        return np.asarray(v - np.outer(v @ up, up), dtype=np.float64)

    travel_src = float(np.linalg.norm(across(want[-1] - want[0])))
    travel_tgt = float(np.linalg.norm(across(got[-1] - got[0])))
    facing = _angles(forward_of(tgt, played), np.asarray(reference["forward"], dtype=np.float64))
    all_err = np.concatenate(errors) if errors else np.zeros(1)
    contacts = np.asarray(reference["contacts"], dtype=bool)
    slide = {}
    for k, (chain, source_slide) in enumerate(zip(reference["legs"], reference["source_slides"], strict=True)):
        planted = contacts[:, k]
        slide[chain] = {"slide": _slide(tgt, played, chain, planted), "source_slide": float(source_slide),
                        "contact_frames": int((planted[1:] & planted[:-1]).sum())}
    return {
        "paw_slide": slide,
        "body_plan": reference["body_plan"],
        "chains": chains,
        # Each driven bone's mean error: its direction's, the pelvis' orientation's (Colour Bones).
        "bone_errors": bones,
        "summary": {
            "mean_direction_error": float(all_err.mean()),
            "max_direction_error": float(all_err.max()),
            "pelvis_orientation_error": float(pelvis_err.mean()),
            "travel": {"source_scaled": travel_src, "target": travel_tgt,
                       "largest_gap_hip_heights": float(np.linalg.norm(got - want, axis=-1).max() / height)},
            "facing_error": {"mean": float(facing.mean()), "max": float(facing.max())},
        },
    }


def measure_chains(binding: QuadrupedBinding, source: FloatArray, played: FloatArray, times: FloatArray | None = None) -> dict[str, Any]:
    """The figures (see module doc) of ``played`` target placements ``(T, Bt, 4, 4)`` against the
    ``source`` placements ``(T, Bs, 4, 4)`` at the same frames (at ``times``, seconds, for the paw
    slide)."""
    return {**judge_played(binding.target, chain_reference(binding, source, times), played), "binding": binding.describe()}

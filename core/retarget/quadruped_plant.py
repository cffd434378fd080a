"""Planted paws for quadrupeds (docs/pipeline.md#quadrupeds): the humanoid plant pass
(:mod:`.foot_plant`) run on four legs (on every chain a body plan says stands on the ground).

Each leg of three bones or more is planted on its last three: for a 3-bone leg the upper leg,
lower leg and paw; for a 4-bone (digitigrade) leg the lower leg, the metatarsus and the paw, the
thigh keeping its carried direction. Where the source's paw (the head of its leg's last bone)
rests near its ground and barely moves, the target's paw is held on one spot and the two bones
above it bend to reach it, the pelvis coming down where a spot is out of reach, as for humanoids.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from ..rig.clip import Clip
from ..rig.rotations import FloatArray, make_quat_continuous
from .body_chains import ChainBody
from .foot_plant import Leg, plant_legs, planted_frames
from .quadruped import QuadrupedBinding, QuadrupedResult, pose_of


def paw_tips(body: ChainBody, placements: FloatArray, chain: str) -> FloatArray:
    """The end ``(T, 3)`` of a leg chain (its paw's tip) at ``placements``."""
    pts = body.points[chain]
    b = pts.point_bones[-1]
    return np.asarray(placements[:, b, :3, :3] @ pts.offsets[-1] + placements[:, b, :3, 3], dtype=np.float64)


def paw_contacts(body: ChainBody, placements: FloatArray, times: FloatArray) -> dict[str, NDArray[np.bool_]]:
    """Per leg chain, the frames its paw is planted (:func:`.foot_plant.planted_frames` on the
    head of the leg's last bone, over the ground of the paws' tips: a low percentile over the clip)."""
    up = body.axes.up
    legs = [c for c in body.plants if c in body.points]
    if not legs:
        return {}
    ground = float(np.percentile(np.stack([paw_tips(body, placements, c) @ up for c in legs]).min(axis=0), 5))
    return {c: planted_frames(placements[:, body.chains[c][-1], :3, 3], ground, up, body.hip_height, times) for c in legs}


def plant_paws(binding: QuadrupedBinding, clip: Clip, result: QuadrupedResult) -> tuple[QuadrupedResult, dict[str, dict[str, int]], float]:
    """``result`` (of ``clip``) with the target's paws held where the source's are planted; per
    leg the frames held and those out of reach, and the largest drop of the pelvis (target pelvis
    heights)."""
    src, tgt = binding.source, binding.target
    chains = [c for c in tgt.plants if c in src.plants and c in binding.shared and len(tgt.chains[c]) >= 3]
    if not chains:
        return result, {}, 0.0
    placements = pose_of(src.skeleton, clip)
    contacts = paw_contacts(src, placements, clip.times)
    legs = [Leg(*tgt.chains[c][-3:]) for c in chains]
    # Travel the skeleton does not carry (on the object, or dropped) moves the ground under the held paws.
    drift = None if binding.root_motion in ("HIPS", "ROOT_BONE") else result.root_motion
    rot, loc, report = plant_legs(
        tgt.skeleton, legs, [contacts[c] for c in chains], result.clip.rotations, result.clip.translations, tgt.axes.up,
        clip.times, drift=drift, pelvis=tgt.pelvis, hip_height=tgt.hip_height,
    )
    counts = {c: {"held": report.contact_frames[leg.foot], "out_of_reach": report.unreachable_frames[leg.foot]}
              for c, leg in zip(chains, legs, strict=True)}
    out = replace(result.clip, rotations=make_quat_continuous(rot, axis=0, copy=False), translations=loc)
    return replace(result, clip=out), counts, float(report.hip_drop)

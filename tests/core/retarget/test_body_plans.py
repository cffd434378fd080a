"""Bodies described as chains in a mapping file (docs/pipeline.md#other-bodies): a made-up bird
(two legs on the ground, two wings) and a made-up spider (eight legs) retarget from one
proportion onto another, every chain's bones taking the source chain's directions by arc length,
whatever the two rigs' bone counts and rolls."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.bone_mapping import BoneMapping
from marionette.core.retarget.body_chains import plan_of_description, rest_points
from marionette.core.retarget.quadruped import bind_quadrupeds, pose_of, retarget_quadruped
from tests.helpers.quadruped_rigs import ChainRig, bend_clip, bird, bird_body, spider, spider_body


def _described(rig: ChainRig, body: dict):
    """The body as it comes back from a mapping file."""
    mapping = BoneMapping.from_json(BoneMapping(body=body).to_json())
    assert mapping.body is not None
    return plan_of_description(mapping.body, rig.skeleton)


def _directions_match(src: ChainRig, tgt: ChainRig, binding, clip) -> float:
    """The largest angle (degrees) between a target bone's played segment and the source chain's
    chord over the same stretch of arc (measured here from the chains' points, not the binding's
    tables), over every chain both rigs have."""
    result = retarget_quadruped(binding, clip)
    s_pose = pose_of(src.skeleton, clip)
    t_pose = tgt.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    worst = 0.0
    for chain in binding.shared:
        sp = binding.source.points[chain].positions(s_pose[..., :3, :3], s_pose[..., :3, 3])
        tp = binding.target.points[chain].positions(t_pose[..., :3, :3], t_pose[..., :3, 3])
        s_frac, t_frac = binding.source.points[chain].fractions, binding.target.points[chain].fractions
        along = s_frac if len(s_frac) == len(t_frac) else t_frac
        for k in range(len(t_frac) - 1):
            a = np.stack([[np.interp(along[k], s_frac, p[:, d]) for d in range(3)] for p in sp])
            b = np.stack([[np.interp(along[k + 1], s_frac, p[:, d]) for d in range(3)] for p in sp])
            want, got = b - a, tp[:, k + 1] - tp[:, k]
            cos = np.einsum("ti,ti->t", want, got) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
            worst = max(worst, float(np.degrees(np.arccos(np.clip(cos, -1, 1))).max()))
    return worst


@pytest.mark.parametrize(("source", "target"), [((1.0, 1.0, 3, 3), (1.6, 0.7, 2, 4)), ((1.6, 0.7, 2, 4), (1.0, 1.0, 3, 3))],
                         ids=["short wings onto long", "and back"])
def test_a_bird_retargets_onto_a_bird_of_other_proportions(source, target):
    src, tgt = bird(*source), bird(*target)
    s_plan, t_plan = _described(src, bird_body(src, *source[2:])), _described(tgt, bird_body(tgt, *target[2:]))
    assert t_plan.plants == ("leg.L", "leg.R") and t_plan.head == "head"
    binding = bind_quadrupeds(src.skeleton, s_plan, tgt.skeleton, t_plan, src.ends, tgt.ends)
    np.testing.assert_allclose(binding.target.axes.up, [0, 0, 1], atol=1e-9)  # from two feet: their ends up to their roots
    np.testing.assert_allclose(binding.target.axes.forward, [1, 0, 0], atol=1e-9)
    assert set(binding.shared) == {"spine", "neck", "head", "tail", "wing.L", "wing.R", "leg.L", "leg.R"}
    rng = np.random.default_rng(5)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in src.skeleton.names}
    clip = bend_clip(src.skeleton, bends, frames=6, travel=0.4)
    assert _directions_match(src, tgt, binding, clip) < 1e-4
    # The wings flap the way the source's do: a wing raised by the source is raised on the target.
    flap = bend_clip(src.skeleton, {"wing.L.0": ((1.0, 0.0, 0.0), 0.6)}, frames=3)
    t_pose = tgt.skeleton.forward_kinematics(*(lambda c: (c.rotations, c.translations))(retarget_quadruped(binding, flap).clip))
    tip = binding.target.points["wing.L"].positions(t_pose[..., :3, :3], t_pose[..., :3, 3])[:, -1]
    assert tip[-1, 2] > tip[0, 2] + 0.3 * target[0]


def test_a_spider_retargets_onto_a_spider_with_longer_legs_of_more_bones():
    src, tgt = spider(1.0, 3), spider(1.8, 4)
    binding = bind_quadrupeds(src.skeleton, _described(src, spider_body(3)), tgt.skeleton, _described(tgt, spider_body(4)), src.ends, tgt.ends)
    assert len(binding.shared) == 9 and len(binding.target.plants) == 8
    np.testing.assert_allclose(binding.target.axes.up, [0, 0, 1], atol=1e-9)  # the plane of eight feet
    assert binding.horizontal_scale == binding.vertical_scale == pytest.approx(1.8, rel=1e-6)
    rng = np.random.default_rng(8)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.4, 0.4))) for n in src.skeleton.names}
    clip = bend_clip(src.skeleton, bends, frames=5, travel=0.5)
    assert _directions_match(src, tgt, binding, clip) < 1e-4
    result = retarget_quadruped(binding, clip)
    assert result.root_motion[-1] == pytest.approx([0.9, 0.0, 0.0], abs=1e-6)  # travel scaled by body height


def test_planted_spider_feet_stay_put_while_the_body_sways():
    from marionette.core.retarget.quadruped_plant import plant_paws

    src, tgt = spider(1.0, 3), spider(1.3, 4)
    binding = bind_quadrupeds(src.skeleton, _described(src, spider_body(3)), tgt.skeleton, _described(tgt, spider_body(4)), src.ends, tgt.ends)
    # The body sways while every foot stays where it stands: the legs take the sway.
    frames = 24
    clip = bend_clip(src.skeleton, {"body": ((0.0, 1.0, 0.0), 0.15)}, frames=frames)
    planted, counts, _ = plant_paws(binding, clip, retarget_quadruped(binding, clip))
    assert set(counts) == {f"leg{k}.{s}" for k in range(4) for s in ("L", "R")}
    pose = tgt.skeleton.forward_kinematics(planted.clip.rotations, planted.clip.translations)
    for chain, bones in binding.target.chains.items():
        if chain == "head" or counts[chain]["held"] < frames // 2:
            continue
        paw = pose[:, bones[-1], :3, 3]
        assert np.ptp(paw[:, :2], axis=0).max() < 1e-3 * binding.target.hip_height, chain


def test_rolled_copies_of_a_described_body_give_every_bone_the_same_motion():
    from marionette.core.rig.rotations import matrix_from_quat, quat_from_axis_angle
    from tests.helpers.quadruped_rigs import rolled_clip, rolled_skeleton

    src, tgt = bird(1.0, 1.0, 3, 3), bird(1.4, 0.8, 2, 4)
    s_body, t_body = bird_body(src, 3, 3), bird_body(tgt, 2, 4)
    rng = np.random.default_rng(2)
    clip = bend_clip(src.skeleton, {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in src.skeleton.names}, frames=4)
    base_b = bind_quadrupeds(src.skeleton, _described(src, s_body), tgt.skeleton, _described(tgt, t_body), src.ends, tgt.ends)
    base = retarget_quadruped(base_b, clip).clip
    base_pose = tgt.skeleton.forward_kinematics(base.rotations, base.translations)
    s_rolls = {n: float(rng.uniform(-np.pi, np.pi)) for n in src.skeleton.names}
    t_rolls = {n: float(rng.uniform(-np.pi, np.pi)) for n in tgt.skeleton.names}
    s_sk, t_sk = rolled_skeleton(src.skeleton, s_rolls), rolled_skeleton(tgt.skeleton, t_rolls)
    binding = bind_quadrupeds(s_sk, plan_of_description(BoneMapping(body=s_body).body, s_sk), t_sk,
                              plan_of_description(BoneMapping(body=t_body).body, t_sk), src.ends, tgt.ends)
    out = retarget_quadruped(binding, rolled_clip(clip, src.skeleton, s_rolls)).clip
    pose = t_sk.forward_kinematics(out.rotations, out.translations)
    for i, name in enumerate(tgt.skeleton.names):
        want = base_pose[:, i, :3, :3] @ matrix_from_quat(quat_from_axis_angle([0, 1, 0], t_rolls[name]))
        rel = np.swapaxes(want, -1, -2) @ pose[:, i, :3, :3]
        assert np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1))).max() < 0.1, name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b.pop("root"), "needs a 'root'"),
        (lambda b: b.update(head="beak"), "head chain 'beak'"),
        (lambda b: [c.update(plants=False) for c in b["chains"].values()], "stands on the ground"),
        (lambda b: b["chains"]["tail"].update(plants="yes"), "'plants' must be true or false"),
        (lambda b: b.update(head=None), "'forward' axis"),
        (lambda b: b.update(head=None, forward=[0, 0]), "three numbers"),
    ],
)
def test_a_malformed_body_description_is_refused_naming_the_field(change, message):
    body = bird_body(bird(), 3, 3)
    change(body)
    with pytest.raises(MappingError, match=message):
        BoneMapping(body=body)


def test_a_chain_whose_end_does_not_hang_below_its_start_is_refused_on_the_rig():
    rig = bird()
    body = bird_body(rig, 3, 3)
    body["chains"]["wing.L"] = {"start": "wing.L.0", "end": "leg.L.2", "plants": False}
    with pytest.raises(MappingError, match="chain 'wing.L': 'leg.L.2' does not hang below 'wing.L.0'"):
        plan_of_description(BoneMapping(body=body).body, rig.skeleton)
    body["chains"]["wing.L"] = {"start": "wing.L.0", "end": "talon", "plants": False}
    with pytest.raises(MappingError, match="'talon', which is not in the rig"):
        plan_of_description(BoneMapping(body=body).body, rig.skeleton)


def test_a_body_without_a_head_faces_its_forward_axis():
    rig = spider()
    body = spider_body(3)
    del body["chains"]["head"]
    body.update(head=None, forward=[0.0, 1.0, 0.0])
    plan = plan_of_description(BoneMapping(body=body).body, rig.skeleton)
    binding = bind_quadrupeds(rig.skeleton, plan, rig.skeleton, plan, rig.ends, rig.ends)
    np.testing.assert_allclose(binding.target.axes.forward, [0, 1, 0], atol=1e-9)
    assert rest_points(binding.target, "leg0.L").shape == (4, 3)

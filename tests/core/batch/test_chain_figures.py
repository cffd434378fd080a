"""A chain-by-chain bake's figures without Blender: the worker sends what the played pose is
judged against (the source's reference, not figures of its own keys), the reference survives a
part on disk, and the writer's judgement of a played pose is the single retarget's measurement
of that pose."""

from __future__ import annotations

import numpy as np

from marionette.core.batch.baking import PackCache, bake_clip, played_chain_figures, target_body
from marionette.core.batch.messages import REFERENCE_ARRAYS, whole_clip_from_message
from marionette.core.batch.output_files import read_part, write_part
from marionette.core.batch.settings import BakeSettings, mapping_key
from marionette.core.measure.chains import measure_chains
from marionette.core.retarget.geometric import RetargetOptions, RigInput
from marionette.core.retarget.quadruped import pose_of
from marionette.core.rig.rotations import matrix_from_quat, quat_from_axis_angle
from tests.helpers.quadruped_rigs import Quadruped, bend_clip


def _baked(tmp_path):
    """A 3-bone-legged quadruped's clip baked onto a longer one with 4-bone hind legs and a
    longer spine and tail: the settings, the binding, the source clip and the message."""
    src, tgt = Quadruped(spine=2, tail=3, front=3, hind=3), Quadruped(spine=4, tail=5, front=3, hind=4, length=1.4, height=1.1)
    slots = tgt.slots(4, 1, 5, 3, 4)
    settings = BakeSettings(RigInput(tgt.skeleton, slots, tgt.ends), mapping_key(slots), 24.0, options=RetargetOptions(plant_feet=False))
    cache = PackCache(settings)
    source, layout = cache.source(src.skeleton, src.ends)
    rng = np.random.default_rng(11)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in src.skeleton.names}
    clip = bend_clip(src.skeleton, bends, frames=10, travel=0.4)
    msg = bake_clip(cache, source, layout, clip)
    msg.update(path=str(tmp_path / "walk.bvh"), clip="walk")
    binding, _ = cache.chain_binding(source, layout)
    return settings, binding, clip, msg


def _keys_played(settings, msg):
    """The target posed by the message's keys at its reference frames (what Blender plays when
    nothing overrides the keys)."""
    keys = whole_clip_from_message(msg, "walk", settings.target.skeleton)
    return pose_of(settings.target.skeleton, keys.take(np.asarray(msg["reference_picks"])))


def test_a_chain_clip_message_carries_the_reference_and_no_figures_of_its_keys(tmp_path):
    settings, binding, clip, msg = _baked(tmp_path)
    assert "chains" not in msg["figures"] and "summary" not in msg["figures"]
    assert all(isinstance(msg[k], np.ndarray) for k in REFERENCE_ARRAYS)
    assert msg["reference_picks"].tolist() == list(range(10))
    assert msg["reference_chords"].shape == (10, sum(len(binding.target.points[c].bones) for c in binding.shared), 3)


def test_the_writers_judgement_is_the_single_retarget_measurement_of_the_played_pose(tmp_path):
    settings, binding, clip, msg = _baked(tmp_path)
    played = _keys_played(settings, msg)
    figures = played_chain_figures(target_body(settings), msg, played)
    alone = measure_chains(binding, pose_of(binding.source.skeleton, clip), played, clip.times)
    assert figures["chains"] == alone["chains"] and figures["summary"] == alone["summary"] and figures["paw_slide"] == alone["paw_slide"]
    assert figures["chains"]["hind_leg.L"]["bones"] == 4 and figures["chains"]["hind_leg.L"]["source_bones"] == 3
    assert figures["summary"]["max_direction_error"] < 1e-3  # the keys carry every bone exactly
    # A pose other than the keys' (a leg swung at the hip by what plays, not by a key) is what is judged.
    turned = played.copy()
    sk = settings.target.skeleton
    swing = np.eye(4)
    swing[:3, :3] = matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], 0.5))
    hip = played[:, sk.index("hind0.L"), :3, 3]
    for bone in (sk.index(f"hind{k}.L") for k in range(4)):
        turned[:, bone, :3, 3] -= hip
        turned[:, bone] = swing @ turned[:, bone]
        turned[:, bone, :3, 3] += hip
    off = played_chain_figures(target_body(settings), msg, turned)
    assert off["chains"]["hind_leg.L"]["max_direction_error"] > 20.0
    assert off["chains"]["front_leg.L"] == figures["chains"]["front_leg.L"]


def test_the_reference_survives_a_part_on_disk(tmp_path):
    settings, binding, clip, msg = _baked(tmp_path)
    back = read_part(write_part(str(tmp_path), msg))
    assert back is not None
    for k in REFERENCE_ARRAYS:
        np.testing.assert_array_equal(back[k], msg[k])
    played = _keys_played(settings, back)
    assert played_chain_figures(target_body(settings), back, played) == played_chain_figures(target_body(settings), msg, played)

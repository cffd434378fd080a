"""Batch Bake (``bake-pack``) of quadruped packs and chain-described bodies: the shared Fox's
clips onto the shared Dog and the Dog's onto the Fox, and a made-up bird's clips onto a larger
bird described in mapping files. Each clip's keys are those a single ``retarget`` of it writes, and
the report gives each clip's per-chain figures, measured on the pose Blender plays."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data, pytest.mark.slow]  # the command line in its own process

DOG = "fbx/quaternius_dog_quadruped.fbx"
FOX = "gltf/khronos_fox_quadruped.glb"
DOG_CHAINS = {"spine", "neck", "head", "tail", "front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"}


def _marionette(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=600)


def _keys(path, name_part: str) -> dict[tuple[str, int], np.ndarray]:
    """Every curve's keys of the one Action of the file at ``path`` whose name holds ``name_part``
    (among those Marionette wrote: not the target's own)."""
    import bpy

    from marionette.bridge import compat

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    found = [a for a in bpy.data.actions if name_part in a.name and not a.name.startswith("DogArmature|")]
    assert len(found) == 1, [a.name for a in bpy.data.actions]
    curves = {}
    for slot in found[0].slots:
        for fc in compat.action_fcurves(found[0], slot):
            buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", buf)
            curves[(fc.data_path, fc.array_index)] = buf
    return curves


@pytest.mark.parametrize(
    ("src_rel", "tgt_rel", "clips", "single"),
    [(FOX, DOG, {"Run", "Walk", "Survey"}, "Walk"), (DOG, FOX, {"DogArmature|DogArmature|Walking", "DogArmature|DogArmature|Idle"}, "Walking")],
    ids=["fox pack onto the dog", "dog pack onto the fox"],
)
def test_a_quadruped_pack_bakes_with_per_chain_figures_and_a_single_retargets_keys(tmp_path, src_rel, tgt_rel, clips, single):
    src, tgt = str(shared_file(src_rel)), str(shared_file(tgt_rel))
    out, report_path = tmp_path / "pack.blend", tmp_path / "pack.json"
    run = _marionette("bake-pack", src, tgt, "-o", str(out), "--jobs", "1", "--report", str(report_path), "--no-plant-feet")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "chains: direction error" in run.stdout
    report = json.loads(report_path.read_text())
    assert report["method"]["name"] == "quadruped chains"
    baked = {c["clip"]: c for f in report["files"] for c in f["clips"]}
    assert set(baked) == clips
    for name, c in baked.items():
        assert c["method"] == "quadruped chains"
        figures = c["figures"]
        assert figures["measured_frames"] == min(c["frames"], 120)
        if tgt_rel == DOG:
            assert set(figures["chains"]) == DOG_CHAINS
        # Plant Feet off: every bone along its source chain's chord (README: 0.0003° at most).
        for chain, fig in figures["chains"].items():
            assert fig["mean_direction_error"] < 0.01 and fig["max_direction_error"] < 0.01, (name, chain, fig)
        assert figures["summary"]["pelvis_orientation_error"] < 0.01
        assert figures["summary"]["facing_error"]["max"] < 4.0  # the Survey's head turns; README table
        assert figures["summary"]["travel"]["largest_gap_hip_heights"] < 1e-4
    # The same clip retargeted alone (Plant Feet on, as both commands default) writes the same keys.
    planted = _marionette("bake-pack", src, tgt, "-o", str(tmp_path / "planted.blend"), "--jobs", "1")
    assert planted.returncode == 0, planted.stdout + planted.stderr
    alone = _marionette("retarget", src, tgt, "-o", str(tmp_path / "alone.blend"), "--clip", single)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    a, b = _keys(tmp_path / "alone.blend", single), _keys(tmp_path / "planted.blend", single)
    # The same rotation curves; a location curve may be missing on one side only where it is all
    # zero (write_action leaves out keys that would not change the pose it finds: the batch writes
    # against the rest pose, the single retarget against the pose the file shows).
    assert {k for k in a if "location" not in k[0]} == {k for k in b if "location" not in k[0]}
    for k in set(a) ^ set(b):
        assert np.all(a.get(k, b.get(k))[1::2] == 0.0), k
    shared = set(a) & set(b)
    assert len(shared) > 40
    for k in shared:
        assert np.array_equal(a[k], b[k]), k


def _bird_pack(tmp_path, constrain: str | None = None):
    """Two bird clips (files) in ``tmp_path/pack``, a larger bird to bake them onto saved as
    ``large.blend`` (``constrain``: a bone of it held at its rest by a Limit Rotation constraint),
    and both bodies' mapping files; returns the pack's and the target's paths."""
    import bpy

    from marionette.bridge.action_write import create_armature, write_action
    from marionette.bridge.session import fresh_session, save_blend
    from marionette.core.mapping.bone_mapping import BoneMapping
    from tests.helpers.quadruped_rigs import bend_clip, bird, bird_body

    small, large = bird(1.0, 1.0, 3, 3), bird(1.7, 0.6, 2, 4)
    pack = tmp_path / "pack"
    pack.mkdir()
    for seed in (4, 5):
        fresh_session()
        obj = create_armature(small.skeleton, "small bird", small.ends)
        rng = np.random.default_rng(seed)
        bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in small.skeleton.names}
        write_action(obj, bend_clip(small.skeleton, bends, frames=8, travel=0.3), f"Flap{seed}")
        save_blend(pack / f"flap{seed}.blend")
    fresh_session()
    obj = create_armature(large.skeleton, "large bird", large.ends)
    if constrain is not None:
        held = obj.pose.bones[constrain].constraints.new("LIMIT_ROTATION")
        held.use_limit_x = held.use_limit_y = held.use_limit_z = True  # every limit 0: the bone plays its rest
    save_blend(tmp_path / "large.blend")
    BoneMapping(body=bird_body(small, 3, 3)).save(tmp_path / "small.json")
    BoneMapping(body=bird_body(large, 2, 4)).save(tmp_path / "large.json")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return pack, tmp_path / "large.blend"


def test_a_pack_of_chain_described_birds_bakes_onto_a_larger_bird(tmp_path):
    """Two bird clips (files) described by ``--source-mapping`` onto a larger bird described by
    ``--mapping``: other wing and leg bone counts, every bone along its source chain."""
    pack, large = _bird_pack(tmp_path)
    target = str(large)
    # Without the sources' description the run is refused, nothing written.
    refused = _marionette("bake-pack", str(pack), target, "-o", str(tmp_path / "no.blend"), "--mapping", str(tmp_path / "large.json"))
    assert refused.returncode != 0 and "--source-mapping" in refused.stderr + refused.stdout
    assert not (tmp_path / "no.blend").exists()
    report_path = tmp_path / "birds.json"
    run = _marionette(
        "bake-pack", str(pack), target, "-o", str(tmp_path / "birds.blend"), "--jobs", "1", "--report", str(report_path),
        "--mapping", str(tmp_path / "large.json"), "--source-mapping", str(tmp_path / "small.json"), "--no-plant-feet",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    clips = [c for f in json.loads(report_path.read_text())["files"] for c in f["clips"]]
    assert sorted(c["clip"] for c in clips) == ["Flap4", "Flap5"]
    for c in clips:
        chains = c["figures"]["chains"]
        assert set(chains) == {"spine", "neck", "head", "tail", "wing.L", "wing.R", "leg.L", "leg.R"}
        assert chains["wing.L"]["bones"] == 2 and chains["wing.L"]["source_bones"] == 3
        assert chains["leg.R"]["bones"] == 4 and chains["leg.R"]["source_bones"] == 3
        for chain, fig in chains.items():
            assert fig["max_direction_error"] < 0.01, (c["clip"], chain)
    # measure, given both descriptions, judges a baked clip on what Blender plays.
    action = next(c["action"] for c in clips if c["clip"] == "Flap5")
    measured = _marionette(
        "measure", str(pack / "flap5.blend"), str(tmp_path / "birds.blend"), "--action", action,
        "--mapping", str(tmp_path / "large.json"), "--source-mapping", str(tmp_path / "small.json"),
    )
    assert measured.returncode == 0, measured.stdout + measured.stderr
    got = json.loads(measured.stdout)
    assert got["body_plan"] == "chains" and got["measured_frames"] == 8
    assert got["summary"]["max_direction_error"] < 0.01


def test_a_packs_chain_figures_are_measured_on_the_pose_blender_plays(tmp_path):
    """A constraint on the target's left thigh holds it at rest whatever its keys say: the keys
    are those of an unconstrained target (every bone along its source chain), but what Blender
    plays bends the left leg away, and the report's figures say so, as ``measure`` (which reads
    the played pose on its own) does, while the other chains keep 0°."""
    pack, target = _bird_pack(tmp_path, constrain="leg.L.0")
    report_path = tmp_path / "birds.json"
    run = _marionette(
        "bake-pack", str(pack), str(target), "-o", str(tmp_path / "birds.blend"), "--jobs", "1", "--report", str(report_path),
        "--mapping", str(tmp_path / "large.json"), "--source-mapping", str(tmp_path / "small.json"), "--no-plant-feet",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    clips = {c["clip"]: c for f in json.loads(report_path.read_text())["files"] for c in f["clips"]}
    assert sorted(clips) == ["Flap4", "Flap5"]
    for name, c in clips.items():
        chains = c["figures"]["chains"]
        assert chains["leg.L"]["mean_direction_error"] > 5.0, (name, chains["leg.L"])  # the thigh plays its rest
        for chain, fig in chains.items():
            if chain != "leg.L":
                assert fig["max_direction_error"] < 0.01, (name, chain, fig)
        assert any("constraints override" in w and "leg.L.0" in w for w in c["warnings"]), c["warnings"]
        # measure, on its own, plays the saved Action and judges it: the same figures.
        measured = _marionette(
            "measure", str(pack / f"{name.lower()}.blend"), str(tmp_path / "birds.blend"), "--action", c["action"],
            "--mapping", str(tmp_path / "large.json"), "--source-mapping", str(tmp_path / "small.json"),
        )
        assert measured.returncode == 0, measured.stdout + measured.stderr
        got = json.loads(measured.stdout)
        assert got["measured_frames"] == c["figures"]["measured_frames"] == 8
        for chain, fig in got["chains"].items():
            for k in ("mean_direction_error", "max_direction_error"):
                assert fig[k] == pytest.approx(chains[chain][k], abs=1e-6), (name, chain, k)
        assert got["summary"]["facing_error"]["max"] == pytest.approx(c["figures"]["summary"]["facing_error"]["max"], abs=1e-6)

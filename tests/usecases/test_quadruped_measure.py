"""``measure`` on a quadruped retarget saved in a .blend: the per-chain figures, measured on the
pose Blender plays, are the ones the retarget itself reported (the same binding and the same
frames), whichever command wrote the Action (``retarget`` or ``bake-pack``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data, pytest.mark.slow]  # the command line in its own process

DOG = "fbx/quaternius_dog_quadruped.fbx"
FOX = "gltf/khronos_fox_quadruped.glb"


def _marionette(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=600)


def test_measure_gives_a_quadruped_retargets_own_per_chain_figures(tmp_path):
    fox, dog = str(shared_file(FOX)), str(shared_file(DOG))
    out, report = tmp_path / "walk.blend", tmp_path / "walk.json"
    run = _marionette("retarget", fox, dog, "-o", str(out), "--clip", "Walk", "--no-plant-feet", "--report", str(report))
    assert run.returncode == 0, run.stdout + run.stderr
    said = json.loads(report.read_text())
    # The result holds a "Walk", so the Fox's own comes in as "Walk.001": --clip still finds it.
    measured = _marionette("measure", fox, str(out), "--clip", "Walk")
    assert measured.returncode == 0, measured.stdout + measured.stderr
    got = json.loads(measured.stdout)
    assert got["clip"]["retargeted"] == "Walk" and got["clip"]["source"].startswith("Walk")
    assert got["measured_frames"] == said["measured_frames"] == 18
    assert set(got["chains"]) == set(said["chains"]) and len(got["chains"]) == 8
    for chain, fig in got["chains"].items():
        for k in ("mean_direction_error", "max_direction_error"):
            assert abs(fig[k] - said["chains"][chain][k]) < 1e-6, (chain, k)
        assert fig["max_direction_error"] < 0.01, chain
    s, m = said["summary"], got["summary"]
    assert abs(m["facing_error"]["max"] - s["facing_error"]["max"]) < 1e-6
    assert m["travel"]["largest_gap_hip_heights"] < 1e-4
    assert set(got["paw_slide"]) == {"front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"}


def test_measure_judges_a_baked_pack_clip_named_with_action(tmp_path):
    dog, fox = str(shared_file(DOG)), str(shared_file(FOX))
    out = tmp_path / "pack.blend"
    run = _marionette("bake-pack", dog, fox, "-o", str(out), "--jobs", "1", "--no-plant-feet")
    assert run.returncode == 0, run.stdout + run.stderr
    measured = _marionette(
        "measure", dog, str(out), "--clip", "Walking", "--action", "quaternius_dog_quadruped|Walking",
    )
    assert measured.returncode == 0, measured.stdout + measured.stderr
    got = json.loads(measured.stdout)
    assert got["measured_frames"] == 41
    assert got["summary"]["max_direction_error"] < 0.01
    assert got["summary"]["facing_error"]["max"] < 0.01  # the Dog's walk looks straight ahead

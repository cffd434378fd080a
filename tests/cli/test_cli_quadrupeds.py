"""The ``retarget`` command between two quadrupeds (docs/pipeline.md#quadrupeds): the shared
Fox's clip onto the shared Dog from the command line, as a user runs it, with Plant Feet left at
its default (on: the Dog's paws held where the Fox's are planted)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.slow, pytest.mark.bpy, pytest.mark.data]


def test_retarget_fox_onto_dog_from_the_command_line(tmp_path):
    out, report, picture = tmp_path / "fox_on_dog.blend", tmp_path / "r.json", tmp_path / "r.png"
    res = run("retarget", str(shared_file("gltf/khronos_fox_quadruped.glb")), str(shared_file("fbx/quaternius_dog_quadruped.fbx")),
              "-o", str(out), "--clip", "Survey", "--report", str(report), "--report-png", str(picture))
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.is_file()
    # The picture of a chain-by-chain report: each chain's error and each paw's slide.
    import matplotlib.image

    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and matplotlib.image.imread(picture).shape[0] >= 600
    lines = res.stdout.splitlines()
    assert lines[0] == f"wrote {out.resolve()} (action 'Survey')"
    assert any(line.strip().startswith("(paws held where the source's are planted") for line in lines), res.stdout
    assert any(line.strip().startswith("hind_leg.L   3 bones from 4") for line in lines), res.stdout
    figures = json.loads(report.read_text())
    assert figures["body_plan"] == "quadruped"
    assert figures["binding"]["source_facing"]["forward"] == [0.0, -1.0, 0.0]  # the Fox faces -Y
    assert figures["binding"]["target_facing"]["forward"] == [1.0, 0.0, 0.0]  # the Dog faces +X
    for chain, c in figures["chains"].items():  # legs bend to hold the planted paws
        assert c["mean_direction_error"] < (5.0 if "leg" in chain else 0.01), chain
    assert figures["paw_slide"]  # the Fox stands on its paws as it looks around
    for leg, p in figures["paw_slide"].items():
        assert p["contact_frames"] > 0 and p["slide"] <= p["source_slide"] + 1e-3, leg


def test_a_source_mapping_whose_body_is_malformed_is_refused_before_any_work(tmp_path):
    bad = tmp_path / "bird.json"
    bad.write_text('{"format": "marionette.bone_mapping", "body": {"root": "pelvis"}}')
    out = tmp_path / "out.blend"
    res = run("retarget", str(shared_file("gltf/khronos_fox_quadruped.glb")), str(shared_file("fbx/quaternius_dog_quadruped.fbx")),
              "-o", str(out), "--source-mapping", str(bad))
    assert res.returncode == 1
    assert res.stderr.strip() == "marionette: error: bird.json: 'body' needs 'chains': an object of chain name -> {start, end, plants}"
    assert not out.exists()

"""The ``retarget`` command between two quadrupeds (docs/pipeline.md#quadrupeds): the shared
Fox's clip onto the shared Dog from the command line, as a user runs it, with Plant Feet left at
its default (it is for two legs, and the summary says so)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.slow, pytest.mark.bpy, pytest.mark.data]


def test_retarget_fox_onto_dog_from_the_command_line(tmp_path):
    out, report = tmp_path / "fox_on_dog.blend", tmp_path / "r.json"
    res = run("retarget", str(shared_file("gltf/khronos_fox_quadruped.glb")), str(shared_file("fbx/quaternius_dog_quadruped.fbx")),
              "-o", str(out), "--clip", "Walk", "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.is_file()
    lines = res.stdout.splitlines()
    assert lines[0] == f"wrote {out.resolve()} (action 'Walk')"
    assert any("Plant Feet is for two legs" in line for line in lines)
    assert any(line.strip().startswith("hind_leg.L   3 bones from 4") for line in lines), res.stdout
    figures = json.loads(report.read_text())
    assert figures["body_plan"] == "quadruped"
    assert figures["binding"]["source_facing"]["forward"] == [0.0, -1.0, 0.0]  # the Fox faces -Y
    assert figures["binding"]["target_facing"]["forward"] == [1.0, 0.0, 0.0]  # the Dog faces +X
    for chain, c in figures["chains"].items():
        assert c["mean_direction_error"] < 2.0, chain

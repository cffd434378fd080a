"""The command line as a pipeline runs it: a separate process, exit status, one error line on
stderr, a JSON report on request, and no output file when anything fails."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


def run(*args: str, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=timeout)


def test_version_and_help():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.startswith("marionette ")
    helped = run("--help")
    assert helped.returncode == 0
    for sub in ("demo", "retarget", "measure"):
        assert sub in helped.stdout


@pytest.mark.slow
def test_retarget_real_pair_writes_blend_report_and_picture(tmp_path):
    out_blend, report, picture = tmp_path / "out.blend", tmp_path / "r.json", tmp_path / "r.png"
    res = run(
        "retarget",
        str(shared_file("bvh/cmu/02_02_daz.bvh")),
        str(shared_file("gltf/male_base_mesh_apose.glb")),
        "-o", str(out_blend), "--report", str(report), "--report-png", str(picture),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert out_blend.stat().st_size > 10_000
    assert not list(tmp_path.glob("*.partial*"))
    data = json.loads(report.read_text())
    assert data["summary"]["mean_limb_direction_error"] < 1.5
    assert data["mapping"]["target"]["slots"]["upper_arm.L"]["bone"] == "upper_arm.L"
    assert data["binding"]["target_facing"]["cues"], "facing cues belong in the report"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The measure command reads the result back and agrees.
    measured = run("measure", str(shared_file("bvh/cmu/02_02_daz.bvh")), str(out_blend))
    assert measured.returncode == 0, measured.stderr[-2000:]
    figures = json.loads(measured.stdout)  # stdout is pure JSON
    assert figures["summary"]["mean_limb_direction_error"] < 1.5
    assert figures["clip"]["retargeted"] == "02_02_daz"


@pytest.mark.slow
@pytest.mark.parametrize(
    "source, target, message",
    [
        ("bvh/cmu/12_03_motionbuilder.bvh", "gltf/kenney_character_no_armature.glb", "no armature"),
        ("bvh/cmu/12_03_motionbuilder.bvh", "fbx/quaternius_dog_quadruped.fbx", "humanoid"),
        ("gltf/khronos_fox_quadruped.glb", "gltf/male_base_mesh_apose.glb", "humanoid"),
    ],
)
def test_refusals_exit_non_zero_with_one_line_and_no_output(tmp_path, source, target, message):
    out_blend = tmp_path / "out.blend"
    res = run("retarget", str(shared_file(source)), str(shared_file(target)), "-o", str(out_blend))
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("marionette: error:")]
    assert len(errors) == 1 and message in errors[0], res.stderr[-2000:]
    assert not out_blend.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_missing_file_is_a_clear_error(tmp_path):
    res = run("retarget", str(tmp_path / "nope.bvh"), str(shared_file("gltf/male_base_mesh_apose.glb")), "-o", str(tmp_path / "o.blend"))
    assert res.returncode == 1
    assert "nope.bvh" in res.stderr and "marionette: error:" in res.stderr

"""What the command line prints: a successful retarget's stderr is empty (Blender's and the
importers' chatter stays out unless --verbose), a failure's is exactly one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import shared_file
from tests.helpers.tiny_bvh import bvh_text

pytestmark = pytest.mark.bpy

#: A BVH with three joints: read fine by every importer, refused as a humanoid.
NOT_HUMANOID = """HIERARCHY
ROOT Base
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Mid
  {
    OFFSET 0 5 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 5 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 0 0 0 0 0 0 0 0
0 1 0 0 10 0 0 5 0
"""


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_success_prints_no_blender_chatter_and_verbose_shows_it(tmp_path: Path) -> None:
    (tmp_path / "clip.bvh").write_text(bvh_text(12))
    (tmp_path / "char.bvh").write_text(bvh_text(6))
    res = run(["retarget", "clip.bvh", "char.bvh", "-o", "out.blend"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr == ""  # no BVH timings, no "Info: Saved copy as ..."
    assert res.stdout.startswith(f"wrote {(tmp_path / 'out.blend').resolve()}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["char.bvh", "clip.bvh", "out.blend"]
    loud = run(["retarget", "clip.bvh", "char.bvh", "-o", "out2.blend", "--verbose"], tmp_path)
    assert loud.returncode == 0
    assert "Saved copy as" in loud.stderr and "parsing bvh" in loud.stderr
    assert loud.stdout.replace("out2.blend", "out.blend") == res.stdout  # stdout stays the result alone


@pytest.mark.slow
def test_success_onto_a_gltf_character_prints_no_importer_lines(tmp_path: Path) -> None:
    (tmp_path / "clip.bvh").write_text(bvh_text(12))
    res = run(["retarget", "clip.bvh", str(shared_file("gltf/male_base_mesh_apose.glb")), "-o", "out.blend"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr == ""  # the glTF importer's INFO lines stay out


@pytest.mark.slow
def test_failure_after_blender_ran_is_exactly_one_line(tmp_path: Path) -> None:
    (tmp_path / "clip.bvh").write_text(bvh_text(12))
    (tmp_path / "stick.bvh").write_text(NOT_HUMANOID)
    res = run(["retarget", "clip.bvh", "stick.bvh", "-o", "out.blend"], tmp_path)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("marionette: error: "), res.stderr
    assert "stick" in res.stderr or "Base" in res.stderr
    assert res.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.bvh", "stick.bvh"]

"""A clip retargeted onto its own skeleton (bound natively, its keys unchanged) reports no error on
any figure, in the retarget's summary and in the measure command: the figures judge what Blender
plays against the source, on the floor the clip itself stands on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import shared_file
from tests.helpers.tiny_bvh import bvh_text

pytestmark = pytest.mark.bpy


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _assert_no_error(summary: dict[str, float], root: dict[str, dict[str, float]]) -> None:
    assert summary["max_direction_error"] < 1e-4  # degrees: float noise
    assert summary["mean_limb_direction_error"] < 1e-4
    assert summary["max_limb_plane_error"] < 1e-4
    assert summary["hips_height_error"] < 1e-6  # was ~0.92 (a hip height) before the native case was measured right
    assert root["travel"]["max"] < 1e-6
    assert summary["silhouette_front"] > 0.999 and summary["silhouette_side"] > 0.999


@pytest.mark.slow
@pytest.mark.parametrize("clip", ["tiny", "bvh/cmu/12_03_motionbuilder.bvh"])
def test_a_clip_onto_its_own_skeleton_reports_no_error(tmp_path: Path, clip: str) -> None:
    if clip == "tiny":
        source = tmp_path / "clip.bvh"
        source.write_text(bvh_text(24))
    else:
        source = shared_file(clip)
    res = run(["retarget", str(source), str(source), "-o", "self.blend", "--report", "r.json"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["method"]["native"] is True
    _assert_no_error(report["summary"], report["root"])
    for side in ("L", "R"):  # a foot slides exactly as the source's does
        skate = report["foot_skating"]
        if skate.get(f"foot.{side} contact frames"):
            assert skate[f"foot.{side} slide"] == pytest.approx(skate[f"foot.{side} source slide"], rel=1e-5, abs=1e-9)  # float32 keys
    assert "hips height error      max 0.00 %" in res.stdout
    measured = run(["measure", str(source), "self.blend"], tmp_path)
    assert measured.returncode == 0, measured.stderr[-3000:]
    figures = json.loads(measured.stdout)
    _assert_no_error(figures["summary"], figures["root"])


@pytest.mark.slow
def test_a_long_take_read_without_the_importer_onto_its_own_skeleton_is_native(tmp_path: Path) -> None:
    """A take long enough to be read by numpy (not Blender's importer) is put on the bones the
    importer makes of it: bound natively onto its own skeleton, with no error on any figure."""
    from marionette.bridge.clip_source import LONG_TAKE_FRAMES

    source = tmp_path / "long.bvh"
    source.write_text(bvh_text(LONG_TAKE_FRAMES))
    res = run(["retarget", str(source), str(source), "-o", "self.blend", "--report", "r.json"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["method"]["native"] is True
    assert report["clip"]["frames"] > LONG_TAKE_FRAMES / 2
    _assert_no_error(report["summary"], report["root"])
    assert "hips height error      max 0.00 %" in res.stdout

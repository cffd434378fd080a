"""``retarget --control-rig fk|ik|off`` as a pipeline runs it: a CMU walk onto Rigify's generated
human rig, in a separate process; the saved .blend opened afterwards to read which bones carry
keys, and the printed summary read for the line that says so."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from tests.helpers.data import shared_file
from tests.helpers.rigify_rig import rigify_rig_blend

pytestmark = pytest.mark.bpy

CLIP = "bvh/cmu/12_03_motionbuilder.bvh"
NOT_CONTROLS = ("DEF-", "ORG-", "MCH-")


def run(*args: str, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=timeout)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _keyed(bpy, path, armature="rig"):
    """``{bone: {property path: [(frame, value), ...]}}`` of the active action of ``armature`` in
    the .blend at ``path`` (opened in this process)."""
    from marionette.bridge import compat

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    obj = bpy.data.objects[armature]
    ad = obj.animation_data
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for fc in compat.action_fcurves(ad.action, ad.action_slot):
        bone, rest = fc.data_path.split('"')[1], fc.data_path.split('"]', 1)[1]
        out.setdefault(bone, {})[f"{rest}[{fc.array_index}]"] = [tuple(k.co) for k in fc.keyframe_points]
    return out


@pytest.mark.slow
def test_default_keys_rigify_fk_controls_and_says_so(blender, tmp_path):
    rig_file = rigify_rig_blend()
    before = _digest(rig_file)
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    res = run("retarget", str(shared_file(CLIP)), str(rig_file), "-o", str(out), "--target-armature", "rig", "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [line.strip() for line in res.stdout.splitlines()]
    rig_lines = [line for line in lines if line.startswith("control rig:")]
    assert len(rig_lines) == 1 and rig_lines[0].startswith("control rig: Rigify, FK controls; keyed "), res.stdout
    assert "upper_arm_parent.L IK_FK=1" in rig_lines[0] and " more)" in rig_lines[0]
    assert _digest(rig_file) == before, "the target file is only read"
    data = json.loads(report.read_text())
    # Measured on the deform bones Blender plays (Plant Feet on: the legs bend to hold the feet).
    assert data["summary"]["mean_limb_direction_error"] < 1.5
    assert not [w for w in data.get("warnings", []) if "override" in w]

    keyed = _keyed(blender, out)
    assert keyed and not [b for b in keyed if b.startswith(NOT_CONTROLS)], sorted(keyed)
    assert {"torso", "upper_arm_fk.L", "thigh_fk.R", "head"} <= set(keyed)
    for side in (".L", ".R"):
        for parent in ("upper_arm_parent", "thigh_parent"):
            switch = keyed[parent + side]['["IK_FK"][0]']
            assert switch and all(value == 1.0 for _, value in switch), (parent + side, switch)
    # The summary names controls the file holds ("root" is keyed only with --root-motion ROOT_BONE).
    named = rig_lines[0].split("(", 1)[1].split(" and ", 1)[0].split(", ")
    assert "root" not in named and set(named) <= set(keyed)


@pytest.mark.slow
def test_off_keys_the_mapped_bones_and_warns_that_constraints_override_them(blender, tmp_path):
    out = tmp_path / "out.blend"
    res = run("retarget", str(shared_file(CLIP)), str(rigify_rig_blend()), "-o", str(out), "--target-armature", "rig", "--control-rig", "off")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "control rig:" not in res.stdout
    warnings = [line for line in res.stdout.splitlines() if line.strip().startswith("warning:")]
    assert any("constraints override the keys" in w and "DEF-" in w for w in warnings), res.stdout[-3000:]
    keyed = _keyed(blender, out)
    assert any(b.startswith("DEF-") for b in keyed)
    assert all(b.startswith(("DEF-", "ORG-")) for b in keyed), sorted(keyed)


def test_unknown_mode_is_refused_by_the_parser(tmp_path):
    out = tmp_path / "out.blend"
    res = run("retarget", str(shared_file(CLIP)), str(shared_file("fbx/quaternius_male_casual.fbx")), "-o", str(out), "--control-rig", "bogus")
    assert res.returncode == 2
    assert "--control-rig" in res.stderr and "invalid choice: 'bogus'" in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_plain_rig_prints_no_control_rig_line(tmp_path):
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    res = run("retarget", str(shared_file(CLIP)), str(shared_file("fbx/quaternius_male_casual.fbx")), "-o", str(out), "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "control rig" not in res.stdout
    assert json.loads(report.read_text())["control_rig"] is None


@pytest.mark.slow
def test_ik_keys_the_ik_controls_with_the_switches_to_ik(blender, tmp_path):
    out = tmp_path / "out.blend"
    res = run("retarget", str(shared_file(CLIP)), str(rigify_rig_blend()), "-o", str(out), "--target-armature", "rig", "--control-rig", "ik")
    assert res.returncode == 0, res.stderr[-2000:]
    rig_lines = [line.strip() for line in res.stdout.splitlines() if line.strip().startswith("control rig:")]
    assert len(rig_lines) == 1 and rig_lines[0].startswith("control rig: Rigify, IK controls; keyed "), res.stdout
    keyed = _keyed(blender, out)
    # A mechanism bone carries only its IK chain's stretch setting, held at 0.
    moved = [b for b in keyed if b.startswith(NOT_CONTROLS) and set(keyed[b]) != {".ik_stretch[0]"}]
    assert {"hand_ik.L", "foot_ik.R"} <= set(keyed) and not moved, sorted(keyed)
    assert keyed["MCH-shin_ik.L"][".ik_stretch[0]"] == [(1.0, 0.0), (float(max(f for f, _ in keyed["hand_ik.L"]['.location[0]'])), 0.0)]
    assert "upper_arm_fk.L" not in keyed and "thigh_fk.R" not in keyed
    switch = keyed["upper_arm_parent.L"]['["IK_FK"][0]']
    assert switch and all(value == 0.0 for _, value in switch)

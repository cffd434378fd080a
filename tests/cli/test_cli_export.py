"""The retarget command writing a file for an engine (``-o OUT.fbx|.glb|.gltf``, ``--engine``), in its
own process: the engine's preset applied (the report and the file say so), wrong combinations
refused before any work with one line and exit status 2, nothing left behind when the
exporter fails, and an existing export file kept (the command refused before any work, exit
status 1) unless ``--replace``; a .blend output is replaced as always."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run
from tests.helpers.data import shared_file
from tests.helpers.export_round_trip import glb_json
from tests.helpers.fbx_file import global_settings, read_fbx, take_names

pytestmark = pytest.mark.bpy

CLIP = "bvh/cmu/02_02_daz.bvh"
CHARACTER = "gltf/male_base_mesh_apose.glb"


def _retarget(out, *more: str):
    return run("retarget", str(shared_file(CLIP)), str(shared_file(CHARACTER)), "-o", str(out), *more)


def _one_error(res) -> str:
    errors = [line for line in res.stderr.splitlines() if line.startswith("marionette: error:")]
    assert len(errors) == 1, res.stderr[-2000:]
    return errors[0]


@pytest.mark.slow
def test_fbx_for_unreal_in_centimetres_with_root_motion_on_the_root_bone(tmp_path):
    out, report = tmp_path / "walk.fbx", tmp_path / "r.json"
    res = _retarget(out, "--engine", "unreal", "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "for unreal" in res.stdout
    data = json.loads(report.read_text())
    assert data["export"]["engine"] == "unreal" and data["export"]["files"] == [str(out.resolve())]
    assert data["options"]["root_motion"] == "ROOT_BONE"  # Unreal's default
    root = read_fbx(out)
    assert global_settings(root)["UnitScaleFactor"][0] == pytest.approx(1.0, rel=1e-6)
    assert take_names(root) == ["02_02_daz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "walk.fbx"]  # no work folder left


@pytest.mark.slow
def test_glb_defaults_to_godot_and_replaces_an_existing_output_with_replace(tmp_path):
    out = tmp_path / "walk.glb"
    out.write_bytes(b"old")
    res = _retarget(out, "--replace")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "for godot" in res.stdout
    assert [a["name"] for a in glb_json(out)["animations"]] == ["02_02_daz"]
    assert [p.name for p in tmp_path.iterdir()] == ["walk.glb"]


@pytest.mark.parametrize("name, there", [("walk.fbx", "walk.fbx"), ("walk.glb", "walk.glb"), ("walk.gltf", "walk.gltf"), ("walk.gltf", "walk.bin")])
def test_an_existing_export_file_is_kept_and_the_command_refused_before_any_work(tmp_path, name, there):
    """A .gltf's .bin beside it counts as its file too."""
    old = tmp_path / there
    old.write_bytes(b"old")
    res = _retarget(tmp_path / name)
    assert res.returncode == 1
    line = _one_error(res)
    assert f"{old} exists already" in line and "--replace" in line
    assert old.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == [there]


@pytest.mark.slow
def test_an_existing_blend_output_is_replaced_without_replace(tmp_path):
    out = tmp_path / "walk.blend"
    out.write_bytes(b"old")
    res = _retarget(out)
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.read_bytes().startswith((b"BLENDER", b"\x1f\x8b", b"\x28\xb5\x2f\xfd"))  # a .blend: plain, gzip or zstd
    assert [p.name for p in tmp_path.iterdir()] == ["walk.blend"]


@pytest.mark.slow
def test_exporter_failure_leaves_nothing_and_names_the_clip(tmp_path):
    out = tmp_path / ("x" * 252 + ".fbx")  # a name the folder cannot hold: the exporter's open fails
    res = _retarget(out)
    assert res.returncode == 1
    line = _one_error(res)
    assert "exporting clip '02_02_daz' failed (OSError: [Errno 36] File name too long" in line and "nothing written" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name, more, message",
    [
        ("o.fbx", ["--engine", "godot"], "--engine godot: writes .glb or .gltf files, not .fbx"),
        ("o.glb", ["--engine", "unreal"], "--engine unreal: writes .fbx files, not .glb"),
        ("o.blend", ["--engine", "unity"], "--engine unity: only for an .fbx, .glb or .gltf output"),
        ("o.obj", [], "writes .blend or .fbx or .glb or .gltf files only, not .obj"),
    ],
)
def test_wrong_output_or_engine_refused_before_any_work(tmp_path, name, more, message):
    res = _retarget(tmp_path / name, *more)
    assert res.returncode == 2
    assert message in _one_error(res)
    assert list(tmp_path.iterdir()) == []


def test_output_in_a_folder_that_cannot_be_made_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    res = _retarget(blocker / "o.fbx")
    assert res.returncode == 1
    assert "is not a folder" in _one_error(res)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]

"""Bad command lines and bad files, as a user makes them, through the real command line in its own
process: each gets one line on stderr naming the file and the problem, the promised exit status
(2 for a command line that cannot be right, 1 otherwise), no output file, and every input left
byte for byte as it was.

The inputs are written here (a small humanoid BVH, its pack, broken variants), so no third-party
file is needed.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tiny_bvh import bvh_text

pytestmark = pytest.mark.bpy

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
#: The line of the tiny BVH's 'Frame Time:' (the reader names it).
FRAME_TIME_LINE = next(k + 1 for k, line in enumerate(bvh_text(2).splitlines()) if line.startswith("Frame Time"))


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("bad_input")
    (w / "clip.bvh").write_text(bvh_text(12))
    (w / "char.bvh").write_text(bvh_text(6))
    (w / "pack").mkdir()
    (w / "pack" / "a.bvh").write_text(bvh_text(8))
    (w / "pack" / "b.bvh").write_text(bvh_text(10))
    (w / "pack" / "c.blend").write_bytes(b"BLENDER-v500 stands for a clip file of the pack")
    (w / "link.bvh").symlink_to(w / "clip.bvh")
    os.link(w / "clip.bvh", w / "hard.bvh")
    (w / "o.blend.partial.blend").write_text("a user's file that only looks like a half-written save")
    (w / "map.json").write_text('{"version": 1, "slots": {"hips": "Hips"}}')
    (w / "bad_utf8.json").write_bytes(b'{"version": 1, "slots": {"hips": "H\xff\xfeips"}}')
    (w / "confidence.json").write_text('{"version": 1, "slots": {"hips": {"bone": "Hips", "confidence": "high"}}}')
    (w / "huge_time.bvh").write_text(bvh_text(12, frame_time="1e300"))
    (w / "not_a_blend.blend").write_text("this is text, not a Blender file\n")
    (w / "model.pmx").write_bytes(b"PMX \x00\x00\x00@")
    (w / "broken.fbx").write_bytes(b"Kaydara FBX Binary  \x00\x1a\x00" + bytes(range(256)) * 4)  # the importer prints a traceback
    (w / "folder").mkdir()
    (w / "folder.blend").mkdir()
    (w / "read_only").mkdir()
    (w / "read_only").chmod(0o555)
    for name in ("pipe.bvh", "pipe.json", "pipe.blend", "pipe.pmx"):  # opened, each would wait for a writer for ever
        os.mkfifo(w / name)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(w / "sock.fbx"))  # the socket's file stays once closed
    return w


def snapshot(w: Path) -> dict[str, str]:
    """Every entry under ``w`` with the hash of its bytes (folders and links by kind)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(w):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(w))
            if p.is_symlink():
                out[rel] = "link -> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "folder"
            elif not stat.S_ISREG(p.stat().st_mode):  # a named pipe or a socket: never opened
                out[rel] = f"special {stat.S_IFMT(p.stat().st_mode):o}"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# (command line, exit status, fragment of the one error line); paths are relative to the work folder.
CASES = [
    # 1. an output that is an input, or a format the command does not write
    ("retarget clip.bvh char.bvh -o clip.bvh", 2, "that is the source"),
    ("retarget clip.bvh char.bvh -o char.bvh", 2, "that is the target"),
    ("retarget link.bvh char.bvh -o clip.bvh", 2, "that is the source (link.bvh)"),
    ("retarget clip.bvh char.bvh -o link.bvh", 2, "that is the source"),
    ("retarget clip.bvh char.bvh -o hard.bvh", 2, "that is the source"),
    ("retarget o.blend.partial.blend char.bvh -o o.blend", 2, "that is the source"),
    ("retarget clip.bvh char.bvh -o out.obj", 2, ".blend or .fbx or .glb or .gltf files only, not .obj"),
    ("retarget clip.bvh char.bvh -o out.fbx --engine web", 2, "--engine web: writes .glb or .gltf files, not .fbx"),
    ("retarget clip.bvh char.bvh -o out", 2, ".blend or .fbx or .glb or .gltf files only"),
    ("retarget clip.bvh char.bvh -o o.blend --mapping map.json --report map.json", 2, "that is the mapping"),
    ("retarget clip.bvh char.bvh -o o.blend --report o.blend", 2, "the same file is given to -o"),
    ("retarget clip.bvh char.bvh -o o.blend --report-png clip.bvh", 2, "that is the source"),
    ("retarget clip.bvh char.bvh -o o.blend --report-png o.jpg", 2, ".png files only"),
    ("bake-pack pack char.bvh -o pack/a.bvh", 2, "clip file of the pack folder"),
    ("bake-pack pack char.bvh -o pack/c.blend", 2, "clip file of the pack folder"),
    ("bake-pack pack char.bvh -o char.bvh", 2, "that is the target"),
    ("bake-pack pack/a.bvh pack/b.bvh char.bvh -o pack/b.bvh", 2, "that is the pack file"),
    ("bake-pack pack char.bvh -o o.blend --report pack/a.bvh", 2, "clip file of the pack folder"),
    ("bake-pack pack char.bvh -o o.blend --mapping map.json --report map.json", 2, "that is the mapping"),
    ("bake-pack pack char.002.blend -o char.blend", 2, "that is the target"),
    ("import-pmx model.pmx -o model.pmx", 2, "that is the PMX model"),
    ("import-pmx model.pmx -o model.glb", 2, ".blend files only"),
    ("bake-controls not_a_blend.blend --object Armature -o not_a_blend.blend", 2, "that is the input file"),
    ("measure clip.bvh char.bvh --report-png char.bvh", 2, "that is the retargeted file"),
    ("demo -o demo.fbx", 2, ".blend files only"),
    ("demo -o o.blend --report o.blend", 2, "the same file is given to -o"),
    # 4. places that cannot be written, files that cannot be read
    ("retarget clip.bvh char.bvh -o folder", 1, "folder: is a folder"),
    ("retarget clip.bvh char.bvh -o folder.blend", 1, "folder.blend: is a folder"),
    ("retarget clip.bvh char.bvh -o o.blend --report folder", 1, "--report folder: is a folder"),
    ("retarget clip.bvh char.bvh -o /sys/kernel/marionette/o.blend", 1, "cannot be written"),
    ("retarget clip.bvh char.bvh -o o.blend --report /proc/marionette/r.json", 1, "cannot be written"),
    ("retarget clip.bvh char.bvh -o clip.bvh/o.blend", 1, "clip.bvh is not a folder"),
    ("bake-pack pack char.bvh -o o.blend --report folder", 1, "is a folder"),
    ("bake-controls not_a_blend.blend --object A -o o.blend --report /proc/marionette/r.json", 1, "cannot be written"),
    ("retarget clip.bvh char.bvh -o o.blend --mapping bad_utf8.json", 1, "bad_utf8.json: the bone mapping is not UTF-8"),
    ("retarget clip.bvh char.bvh -o o.blend --mapping confidence.json", 1, "confidence.json: the bone mapping has a wrong value"),
    ("bake-pack pack char.bvh -o o.blend --mapping bad_utf8.json", 1, "bad_utf8.json: the bone mapping is not UTF-8"),
    ("bake-pack pack char.bvh -o o.blend --mapping confidence.json", 1, "confidence.json: the bone mapping has a wrong value"),
    ("bake-controls not_a_blend.blend --object Armature -o o.blend", 1, "not_a_blend.blend: is not a Blender file"),
    ("retarget broken.fbx char.bvh -o o.blend", 1, "broken.fbx: the file could not be imported"),
    ("retarget huge_time.bvh char.bvh -o o.blend", 1, f"huge_time.bvh, line {FRAME_TIME_LINE}: the frame time must be between"),
    ("retarget clip.bvh huge_time.bvh -o o.blend", 1, f"huge_time.bvh, line {FRAME_TIME_LINE}: the frame time"),
    # inputs that are not regular files: refused as what they are, never opened (a named pipe would wait for ever)
    ("retarget pipe.bvh char.bvh -o o.blend", 1, "pipe.bvh: not a regular file (a named pipe (FIFO))"),
    ("retarget clip.bvh pipe.bvh -o o.blend", 1, "pipe.bvh: not a regular file (a named pipe (FIFO))"),
    ("retarget clip.bvh char.bvh -o o.blend --mapping pipe.json", 1, "cannot read bone mapping pipe.json: not a regular file (a named pipe (FIFO))"),
    ("retarget sock.fbx char.bvh -o o.blend", 1, "sock.fbx: not a regular file (a socket)"),
    ("retarget clip.bvh /dev/null -o o.blend", 1, "/dev/null: not a regular file (a character device)"),
    ("retarget folder char.bvh -o o.blend", 1, "folder: not a regular file (a folder)"),
    ("bake-pack pack pipe.bvh -o o.blend", 1, "pipe.bvh: not a regular file (a named pipe (FIFO))"),
    ("measure pipe.bvh char.bvh", 1, "pipe.bvh: not a regular file (a named pipe (FIFO))"),
    ("measure clip.bvh pipe.blend", 1, "pipe.blend: not a regular file (a named pipe (FIFO))"),
    ("bake-controls pipe.blend --object A -o o.blend", 1, "pipe.blend: not a regular file (a named pipe (FIFO))"),
    ("import-pmx pipe.pmx -o o.blend", 1, "pipe.pmx: not a regular file (a named pipe (FIFO))"),
]


@pytest.mark.slow
@pytest.mark.parametrize("line, status, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(work: Path, line: str, status: int, fragment: str) -> None:
    before = snapshot(work)
    res = run(line.split(), work)
    assert res.returncode == status, res.stderr[-3000:]
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("marionette: error: "), res.stderr[-3000:]
    assert fragment in lines[0]
    assert res.stdout == ""
    assert snapshot(work) == before  # nothing written, nothing changed, no partial file left


@pytest.mark.skipif(ROOT, reason="running as root: a folder without write permission is writable to root")
def test_read_only_folder_is_one_line(work: Path) -> None:
    before = snapshot(work)
    res = run(["retarget", "clip.bvh", "char.bvh", "-o", "read_only/o.blend"], work)
    assert res.returncode == 1
    assert res.stderr.startswith("marionette: error: -o read_only/o.blend: cannot be written") and res.stderr.count("\n") == 1
    assert snapshot(work) == before


@pytest.mark.slow
def test_a_pack_file_with_an_absurd_frame_time_is_reported_failed_not_an_internal_error(tmp_path: Path) -> None:
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "x.bvh").write_text(bvh_text(12, frame_time="1e300"))
    (tmp_path / "char.bvh").write_text(bvh_text(6))
    res = run(["bake-pack", "pack", "char.bvh", "-o", "out.blend", "--jobs", "1"], tmp_path)
    assert res.returncode == 1
    assert f"x.bvh, line {FRAME_TIME_LINE}: the frame time must be between" in res.stdout
    assert "internal error" not in res.stdout + res.stderr and "Traceback" not in res.stderr


def test_a_save_that_fails_leaves_no_partial_file(blender, tmp_path: Path) -> None:
    """Past the checks (a folder made meanwhile), a failed save is one refusal and leaves nothing."""
    from marionette.bridge.session import save_blend
    from marionette.core.errors import MarionetteError

    (tmp_path / "taken.blend").mkdir()
    with pytest.raises(MarionetteError, match="taken.blend: cannot be written"):
        save_blend(tmp_path / "taken.blend")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.blend"]
    assert not any((tmp_path / "taken.blend").iterdir())

"""The outcome of an export of several clips: the lines a person reads, and clips that would be
written to one file."""

from __future__ import annotations

from marionette.core.export.outcomes import EXPORTED, FAILED, NOT_STARTED, ClipExport, ExportOutcome, same_stem_clashes


def test_lines_say_what_was_written_what_failed_and_what_was_not_started() -> None:
    clips = [
        ClipExport("walk", "/out/walk.fbx", EXPORTED, ["/out/walk.fbx"]),
        ClipExport("jog", "/out/jog.fbx", FAILED, reason="exporting clip 'jog' failed (OSError); nothing written"),
        *[ClipExport(f"c{k}", f"/out/c{k}.fbx") for k in range(12)],
    ]
    outcome = ExportOutcome(clips, "/out", "FBX for Unity", stopped="cancelled by the user (Esc)")
    assert not outcome.ok and outcome.file_names() == ["walk.fbx"]
    assert outcome.lines() == [
        "exported 1 of 14 clips to /out (FBX for Unity); stopped: cancelled by the user (Esc)",
        "jog: exporting clip 'jog' failed (OSError); nothing written",
        "not started (12): c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 and 2 more",
    ]
    assert [c.status for c in clips[2:]] == [NOT_STARTED] * 12


def test_an_outcome_is_ok_only_when_every_clip_was_written_and_nothing_stopped_it() -> None:
    done = ExportOutcome([ClipExport("walk", "/o/walk.glb", EXPORTED, ["/o/walk.glb"])], "/o", "GLB for Godot")
    assert done.ok and done.lines() == ["exported 1 of 1 clip to /o (GLB for Godot)"]
    done.stopped = "interrupted by the user (Ctrl-C)"
    assert not done.ok


def test_clips_named_alike_clash_on_one_file_name_whatever_the_case() -> None:
    assert same_stem_clashes(["walk", "Walk", "run", "walk", "RUN"]) == {1: 0, 3: 0, 4: 2}
    assert same_stem_clashes(["a", "b"]) == {}

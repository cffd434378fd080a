"""The Export operator: the new Action, or every Action of the last Batch Bake, written with the
target for a game engine or the web, one file per clip; modal in the interface (progress, Esc
starts no further clip), straight through in the background. The work is
:mod:`.usecases.export_scene`'s; the open file is left as it was."""

# The bpy stubs type context members as optional; that says nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from typing import Any

import bpy

from ..batch_runner.export_run import ExportRun
from ..core.errors import MarionetteError
from ..usecases.export_scene import export_here, finish_scene_export, start_scene_export
from .modal_run import ModalRun


class MARIONETTE_OT_export_clips(ModalRun, bpy.types.Operator):
    """Write the new Action, or every Action of the last Batch Bake, with the target and its skinned
    meshes, one file per clip for a game engine or the web (the open file is left as it is; Esc
    starts no further clip)"""

    bl_idname = "marionette.export_clips"
    bl_label = "Export"
    bl_options = {"REGISTER"}  # nothing of the open file changes: no undo step

    _run: ExportRun | None = None
    esc_text = "Esc to stop after this clip"

    @classmethod
    def poll(cls, context: Any) -> bool:
        if getattr(context.scene, "marionette", None) is None:
            return False
        if context.mode not in {"OBJECT", "POSE"}:
            cls.poll_message_set("Leave Edit Mode first")
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        try:
            self._run = start_scene_export(context.scene, context.scene.marionette.export)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if not self._run.running:  # every clip refused, or the worker could not start: the outcome says why
            return self._finish(context)
        if bpy.app.background or context.window is None:
            export_here(self._run)
            return self._finish(context)
        return self._start_modal(context, self._run, self._run.total, 0.1)

    def _progress(self) -> tuple[str, int]:
        assert self._run is not None
        return f"Export: {self._run.progress_text()}", self._run.done

    def _finish(self, context: Any) -> set[str]:
        assert self._run is not None
        outcome = finish_scene_export(self._run)
        self._end_modal(context)
        self._show(context, "Export", outcome.lines(), outcome.ok)
        self._run = None
        return {"FINISHED"} if outcome.written else {"CANCELLED"}

    def cancel(self, context: Any) -> None:
        # Blender ends the operator (the file closes, the add-on unloads): no further clip.
        if self._run is not None:
            self._run.cancel("the operator was stopped")
            self._run.finish()
            self._run = None


classes = (MARIONETTE_OT_export_clips,)
register, unregister = bpy.utils.register_classes_factory(classes)

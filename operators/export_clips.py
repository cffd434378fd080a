"""The Export operator: the new Action, or every Action of the last Batch Bake, written with the
target for a game engine or the web, one file per clip; modal in the interface (progress, Esc
starts no further clip), straight through in the background. The work is
:mod:`.usecases.export_scene`'s; the open file is left as it was."""

# The bpy stubs type context members as optional; that says nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from typing import Any

import bpy

from ..batch_runner.driving import ModalDriver
from ..batch_runner.export_run import ExportRun
from ..core.errors import MarionetteError
from ..usecases.export_scene import export_here, finish_scene_export, start_scene_export


class MARIONETTE_OT_export_clips(bpy.types.Operator):
    """Write the new Action, or every Action of the last Batch Bake, with the target and its skinned
    meshes, one file per clip for a game engine or the web (the open file is left as it is; Esc
    starts no further clip)"""

    bl_idname = "marionette.export_clips"
    bl_label = "Export"
    bl_options = {"REGISTER"}  # nothing of the open file changes: no undo step

    _run: ExportRun | None = None
    _driver: ModalDriver | None = None
    _timer: Any = None

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
        wm = context.window_manager
        self._driver = ModalDriver(self._run)
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.progress_begin(0, max(1, self._run.total))
        wm.modal_handler_add(self)
        self._status(context)
        return {"RUNNING_MODAL"}

    def _status(self, context: Any) -> None:
        assert self._run is not None
        context.workspace.status_text_set(f"Export: {self._run.progress_text()} (Esc to stop after this clip)")
        context.window_manager.progress_update(self._run.done)

    def modal(self, context: Any, event: Any) -> set[str]:
        assert self._run is not None and self._driver is not None
        answer = self._driver.event(event.type, event.value)
        if answer == "FINISHED":
            return self._finish(context)
        if answer == "RUNNING_MODAL":
            self._status(context)
        return {answer}

    def _finish(self, context: Any) -> set[str]:
        assert self._run is not None
        outcome = finish_scene_export(self._run)
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
            wm.progress_end()
            context.workspace.status_text_set(None)
        lines = outcome.lines()
        self.report({"INFO"} if outcome.ok else {"WARNING"}, f"Export: {lines[0]}")
        for line in lines[1:]:
            self.report({"WARNING"}, line)
        if not bpy.app.background and context.window is not None:
            def draw(menu: Any, _context: Any) -> None:
                for line in lines[:30]:
                    menu.layout.label(text=line)

            wm.popup_menu(draw, title="Export", icon="INFO" if outcome.ok else "ERROR")
        self._run = None
        self._driver = None
        return {"FINISHED"} if outcome.written else {"CANCELLED"}

    def cancel(self, context: Any) -> None:
        # Blender ends the operator (the file closes, the add-on unloads): no further clip.
        if self._run is not None:
            self._run.cancel("the operator was stopped")
            self._run.finish()
            self._run = None


classes = (MARIONETTE_OT_export_clips,)
register, unregister = bpy.utils.register_classes_factory(classes)

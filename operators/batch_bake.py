"""The Batch Bake operator: every clip of the chosen files or folder onto the target, in parallel,
modal in the interface (Esc keeps what is baked). The work is :mod:`.usecases.bake_pack`'s; the
run, :mod:`.batch_runner.runner`'s."""

# The bpy stubs type context members as optional; that says nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import os
from typing import Any

import bpy
from bpy.props import CollectionProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..batch_runner.runner import DEFAULT_TIMEOUT, BatchBake
from ..core.errors import MarionetteError
from ..usecases.bake_pack import bake_here, finish_scene_bake, start_scene_bake
from .modal_run import ModalRun


def _target_of(context: Any) -> Any:
    s = getattr(context.scene, "marionette", None)
    obj = s.target if s is not None and s.target is not None else context.active_object
    return obj if obj is not None and obj.type == "ARMATURE" else None


class MARIONETTE_OT_batch_bake(ModalRun, bpy.types.Operator, ImportHelper):
    """Bake every clip of the chosen files or folder onto the target as new Actions, in parallel
    (Esc keeps what is already baked)"""

    bl_idname = "marionette.batch_bake"
    bl_label = "Batch Bake"
    bl_options = {"REGISTER", "UNDO"}

    filter_glob: StringProperty(default="*.bvh;*.fbx;*.glb;*.gltf;*.blend;*.vmd", options={"HIDDEN"})  # type: ignore[valid-type]
    directory: StringProperty(subtype="DIR_PATH")  # type: ignore[valid-type]
    files: CollectionProperty(type=bpy.types.OperatorFileListElement)  # type: ignore[valid-type]
    jobs: IntProperty(name="Jobs", default=0, min=0, max=64, description="Worker processes (0: one per core)")  # type: ignore[valid-type]
    report_path: StringProperty(  # type: ignore[valid-type]
        name="Report", subtype="FILE_PATH", description="Where to save the JSON report (empty: next to the .blend, or the temp folder)"
    )
    timeout: FloatProperty(  # type: ignore[valid-type]
        name="Timeout",
        default=DEFAULT_TIMEOUT,
        min=0.0,
        unit="TIME_ABSOLUTE",
        description="Seconds a worker may stay silent on one file before it is stopped and the file reported failed (0: no limit)",
    )

    _runner: BatchBake | None = None

    @classmethod
    def poll(cls, context: Any) -> bool:
        if _target_of(context) is None:
            cls.poll_message_set("Pick a target armature in the Retarget panel (or make one active)")
            return False
        if context.mode not in {"OBJECT", "POSE"}:
            cls.poll_message_set("Leave Edit Mode first")
            return False
        return True

    def _inputs(self) -> list[str]:
        names = [f.name for f in self.files if f.name]
        if names:
            return [os.path.join(self.directory, n) for n in names]
        return [self.directory or self.filepath]

    def execute(self, context: Any) -> set[str]:
        s = getattr(context.scene, "marionette", None)
        try:
            self._runner = start_scene_bake(_target_of(context), s, self._inputs(), jobs=self.jobs or None, timeout=self.timeout or None)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if self._runner.closed:  # its workers could not start: the report says why
            return self._finish(context)
        if bpy.app.background or context.window is None:
            bake_here(self._runner)
            return self._finish(context)
        return self._start_modal(context, self._runner, self._runner.total_files, 0.05)

    def _progress(self) -> tuple[str, int]:
        assert self._runner is not None
        return f"Batch Bake: {self._runner.progress_text()}", self._runner.files_done

    def _finish(self, context: Any) -> set[str]:
        assert self._runner is not None
        report, saved = finish_scene_bake(self._runner, self.report_path, context.scene)
        self._end_modal(context)
        lines = report.summary_lines()
        self._show(context, "Batch Bake", [f"{lines[0]}; report {saved}", *lines[1:]], report.ok)
        self._runner = None
        return {"FINISHED"}

    def cancel(self, context: Any) -> None:
        # Blender ends the operator (the file closes, the add-on unloads): stop the workers.
        if self._runner is not None:
            self._runner.cancel("the operator was stopped")
            self._runner.finish()
            self._runner = None


classes = (MARIONETTE_OT_batch_bake,)
register, unregister = bpy.utils.register_classes_factory(classes)

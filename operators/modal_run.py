"""What the long-running operators (Batch Bake, Export) share: a run driven by timer events while
the interface stays live (progress bar, status text, Esc), or straight through in the background,
and the lines of its outcome shown as a report and a popup."""

# The bpy stubs type context members as optional; that says nothing about this module's code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import bpy

from ..batch_runner.driving import ModalDriver


class ModalRun:
    """Mixed into an operator whose run has ``step``/``cancel``/``running`` (:class:`ModalDriver`).
    The operator gives :meth:`_progress` (the status text and the count done) and ``_finish``."""

    _driver: ModalDriver | None = None
    _timer: Any = None
    #: What the status bar says Esc does.
    esc_text = "Esc to cancel"

    def _progress(self) -> tuple[str, int]:
        raise NotImplementedError

    def _finish(self, context: Any) -> set[str]:
        raise NotImplementedError

    def _start_modal(self, context: Any, run: Any, total: int, tick: float) -> set[str]:
        wm = context.window_manager
        self._driver = ModalDriver(run)
        self._timer = wm.event_timer_add(tick, window=context.window)
        wm.progress_begin(0, max(1, total))
        wm.modal_handler_add(self)
        self._status(context)
        return {"RUNNING_MODAL"}

    def _status(self, context: Any) -> None:
        text, done = self._progress()
        context.workspace.status_text_set(f"{text} ({self.esc_text})")
        context.window_manager.progress_update(done)

    def modal(self, context: Any, event: Any) -> set[str]:
        assert self._driver is not None
        answer = self._driver.event(event.type, event.value)
        if answer == "FINISHED":
            return self._finish(context)
        if answer == "RUNNING_MODAL":
            self._status(context)
        return {answer}

    def _end_modal(self, context: Any) -> None:
        """The timer, progress bar and status text gone (after a modal run)."""
        if self._timer is not None:
            wm = context.window_manager
            wm.event_timer_remove(self._timer)
            self._timer = None
            wm.progress_end()
            context.workspace.status_text_set(None)
        self._driver = None

    def _show(self, context: Any, title: str, lines: Sequence[str], ok: bool) -> None:
        """The outcome: its first line as the operator's report, the others as warnings, and all
        (30 at most) in a popup when there is a window."""
        report = self.report  # type: ignore[attr-defined]
        report({"INFO"} if ok else {"WARNING"}, f"{title}: {lines[0]}")
        for line in lines[1:]:
            report({"WARNING"}, line.strip())
        if not bpy.app.background and context.window is not None:
            def draw(menu: Any, _context: Any) -> None:
                for line in lines[:30]:
                    menu.layout.label(text=line.strip())

            context.window_manager.popup_menu(draw, title=title, icon="INFO" if ok else "ERROR")

"""How a run is driven besides the command line's loop: the modal operator's events
(:class:`ModalDriver`: a timer tick writes what has arrived, Esc cancels; for Batch Bake and for
the sidebar's Export) and Ctrl-C while a run goes on in this process (:class:`CtrlC`)."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, Protocol


class SteppedRun(Protocol):
    """What a modal operator drives: a run that goes on step by step and can be stopped
    (:class:`.runner.BatchBake`, :class:`.export_run.ExportRun`)."""

    @property
    def running(self) -> bool: ...

    def step(self, timeout: float = 0.2) -> bool: ...

    def cancel(self, reason: str) -> None: ...


class InterruptibleRun(SteppedRun, Protocol):
    """A run Ctrl-C can ask to stop at its next safe point."""

    @property
    def interrupt_requested(self) -> bool: ...

    def request_interrupt(self) -> None: ...


class ModalDriver:
    """What the operator does with each event while a run goes on, without the operator: a timer
    tick writes what has arrived for at most ``budget`` seconds (the interface keeps the rest of
    the tick), Esc cancels keeping what is baked, anything else passes through. :meth:`event`
    returns the operator's answer (``RUNNING_MODAL``, ``PASS_THROUGH`` or ``FINISHED``)."""

    def __init__(self, runner: SteppedRun, budget: float = 0.04) -> None:
        self.runner = runner
        self.budget = budget
        self.ticks = 0

    def event(self, kind: str, value: str) -> str:
        if kind == "ESC" and value == "PRESS":
            self.runner.cancel("cancelled by the user (Esc)")
            return "FINISHED"
        if kind != "TIMER":
            return "PASS_THROUGH"
        self.ticks += 1
        deadline = time.perf_counter() + self.budget
        while self.runner.step(0.0) and time.perf_counter() < deadline:
            pass
        return "RUNNING_MODAL" if self.runner.running else "FINISHED"


class CtrlC:
    """While active, the first Ctrl-C asks the run to stop at the next safe point (never in the
    middle of writing an Action); a second one interrupts at once."""

    def __init__(self, runner: InterruptibleRun) -> None:
        self.runner = runner
        self.previous: Any = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        if self.runner.interrupt_requested:
            raise KeyboardInterrupt
        self.runner.request_interrupt()

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


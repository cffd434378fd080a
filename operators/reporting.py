"""What most operators do around their use case: run it, show the line it returns, or show the
reason it refused (a :class:`~..core.errors.MarionetteError`, raised before anything changed) and
cancel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import MarionetteError


def report_step(op: Any, step: Callable[[], str]) -> set[str]:
    """Run ``step`` (a use case's entry, returning the line to show) for the operator ``op``."""
    try:
        line = step()
    except MarionetteError as exc:
        op.report({"ERROR"}, str(exc))
        return {"CANCELLED"}
    op.report({"INFO"}, line)
    return {"FINISHED"}

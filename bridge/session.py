"""The session of a file job (retarget files, measure, demo, a pack, a PMX file): an empty Blender
session to start from, refused in an interactive Blender, and the result saved whole or not at all."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import MarionetteError


def refuse_in_interactive_session(interactive: bool | None = None) -> None:
    """File jobs (retarget files, measure, demo, a pack, a PMX file) replace the open Blender
    file. They run only in Blender started for the job (background, or Blender as a Python
    module); in an interactive Blender (``interactive``, default: not background) the open file
    is never discarded: the job is refused, saying how to run it."""
    import bpy

    if (not bpy.app.background) if interactive is None else interactive:
        raise MarionetteError(
            "this job starts from an empty Blender session and would close the open file; run it from a command line "
            "(python -m marionette ..., or blender --background --command marionette ...)"
        )


def fresh_session(interactive: bool | None = None) -> None:
    """An empty Blender session for a file job (see :func:`refuse_in_interactive_session`)."""
    import bpy

    refuse_in_interactive_session(interactive)
    bpy.ops.wm.read_factory_settings(use_empty=True)


def save_blend(path: str | Path) -> None:
    """Write the current file, refusing to leave a half-written file behind."""
    import bpy

    p = Path(path).resolve()
    tmp = p.with_name(p.name + ".partial.blend")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True, compress=True)
        tmp.replace(p)
    except (OSError, RuntimeError) as exc:  # checked before the work; the disk may still fill up
        tmp.unlink(missing_ok=True)
        why = [line for line in str(exc).splitlines() if line.strip()]
        raise MarionetteError(f"{p}: cannot be written ({why[-1].strip() if why else type(exc).__name__})") from exc


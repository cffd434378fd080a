"""Operator classes, each a few lines around one entry function of :mod:`..usecases`: the
Retarget workflow (:mod:`.retarget_ops`), Batch Bake (:mod:`.batch_bake`), Export
(:mod:`.export_clips`), the Controls workflow
(:mod:`.controls_register`) and the PMX importer (:mod:`.pmx_import`)."""

from __future__ import annotations


def register() -> None:
    from . import batch_bake, controls_register, export_clips, pmx_import, retarget_ops

    retarget_ops.register()
    batch_bake.register()
    export_clips.register()
    controls_register.register()
    pmx_import.register()


def unregister() -> None:
    from . import batch_bake, controls_register, export_clips, pmx_import, retarget_ops

    pmx_import.unregister()
    controls_register.unregister()
    export_clips.unregister()
    batch_bake.unregister()
    retarget_ops.unregister()

"""Operator classes, each a few lines around one entry function of :mod:`..usecases`: the
Retarget workflow (:mod:`.retarget_ops`), Batch Bake (:mod:`.batch_bake`), Export
(:mod:`.export_clips`), the Controls workflow
(:mod:`.controls_register`), the PMX importer (:mod:`.pmx_import`) and the MMD panel's operators
(:mod:`.mmd_ops`)."""

from __future__ import annotations


def register() -> None:
    from . import batch_bake, controls_register, export_clips, mmd_ops, pmx_import, retarget_ops

    retarget_ops.register()
    batch_bake.register()
    export_clips.register()
    controls_register.register()
    pmx_import.register()
    mmd_ops.register()


def unregister() -> None:
    from . import batch_bake, controls_register, export_clips, mmd_ops, pmx_import, retarget_ops

    mmd_ops.unregister()
    pmx_import.unregister()
    controls_register.unregister()
    export_clips.unregister()
    batch_bake.unregister()
    retarget_ops.unregister()

"""Batch Bake's runner and its process pool.

The run, in the main process: :mod:`.runner` (:class:`.runner.BatchBake`, whose dispatching side
is :mod:`.dispatch` and writing side :mod:`.writing`), :mod:`.outputs` (what an output file holds,
what ``--resume`` reads back, the JSON report) and :mod:`.driving` (the modal operator's events,
Ctrl-C). The workers: :mod:`.batch_worker` (what a worker runs per file), :mod:`.worker_pool`
(starting workers and talking to them), :mod:`.worker_process` (what a worker sets up about
itself) and :mod:`.pack_start` (the command line's start, before Blender loads).
"""

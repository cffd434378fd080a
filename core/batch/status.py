"""The status words of a batch bake: one definition, used by the report model (:mod:`.report`), the
runner that fills it, and every printout of it (the command line's summary, the sidebar).

A *clip* is baked now, already baked (found in the output ``--resume`` continues), recovered (computed
by an interrupted run, written from its part), failed, lost (its worker died) or cancelled. A *file*
is baked (every clip good), partial, failed, lost, cancelled, or pending while its jobs run.
"""

from __future__ import annotations

CLIP_BAKED = "baked"
CLIP_ALREADY = "already baked"
CLIP_RECOVERED = "recovered"  # computed by an interrupted run, written from its part
CLIP_FAILED = "failed"
CLIP_LOST = "lost"
CLIP_CANCELLED = "cancelled"
#: The clip statuses that count as baked (the Action is in the output).
CLIP_GOOD = (CLIP_BAKED, CLIP_ALREADY, CLIP_RECOVERED)

FILE_BAKED = "baked"
FILE_PARTIAL = "partial"
FILE_FAILED = "failed"
FILE_LOST = "lost"
FILE_CANCELLED = "cancelled"
FILE_PENDING = "pending"

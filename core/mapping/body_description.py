"""A body described as chains in a mapping file (docs/formats.md#the-mapping-file, docs/pipeline.md#other-bodies):
for a rig no profile fits (a bird, a spider, a tentacle), the root bone and named chains, each
from a start bone down to an end bone, some of them standing on the ground::

    "body": {"root": "pelvis", "head": "head",
             "chains": {"leg.L": {"start": "thigh.L", "end": "foot.L", "plants": true}, ...}}

``head`` names the chain forward runs to from the root; without one, ``forward`` gives the
forward axis in armature space (``[0, -1, 0]``). Two rigs retarget onto each other through the
chains they both name. This module only checks the description's form; the bones are checked
against the rig when it is read (:func:`..retarget.body_chains.plan_of_description`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import MappingError


def checked_body(data: Any) -> dict[str, Any] | None:
    """The body description ``data`` in its normal form (every field present), ``None`` for
    ``None``; a malformed one is refused naming the field at fault."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise MappingError(f"'body' must be an object (root, chains, head or forward), got {type(data).__name__}")
    root = data.get("root")
    if not isinstance(root, str) or not root:
        raise MappingError("'body' needs a 'root': the name of the bone the body hangs from")
    raw = data.get("chains")
    if not isinstance(raw, Mapping) or not raw:
        raise MappingError("'body' needs 'chains': an object of chain name -> {start, end, plants}")
    chains: dict[str, dict[str, Any]] = {}
    for name, chain in raw.items():
        if not isinstance(chain, Mapping) or not all(isinstance(chain.get(k), str) and chain.get(k) for k in ("start", "end")):
            raise MappingError(f"body chain {name!r}: expected {{'start': BONE, 'end': BONE, 'plants': true|false}}, got {chain!r}")
        plants = chain.get("plants", False)
        if not isinstance(plants, bool):
            raise MappingError(f"body chain {name!r}: 'plants' must be true or false, got {plants!r}")
        chains[str(name)] = {"start": chain["start"], "end": chain["end"], "plants": plants}
    head = data.get("head")
    if head is not None and head not in chains:
        raise MappingError(f"'body' names head chain {head!r}, which it does not describe")
    forward = data.get("forward")
    if forward is not None:
        ok = isinstance(forward, list) and len(forward) == 3 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in forward)
        if not ok or not any(forward):
            raise MappingError(f"'body' forward must be three numbers, an armature-space axis, got {forward!r}")
        forward = [float(v) for v in forward]
    if head is None and forward is None:
        raise MappingError("'body' needs a 'head' chain or a 'forward' axis to tell which way it faces")
    if not any(c["plants"] for c in chains.values()):
        raise MappingError("'body' needs at least one chain that stands on the ground (\"plants\": true)")
    return {"root": root, "chains": chains, "head": head, "forward": forward}

"""Core retarget speed: a 1000-frame clip onto a ~65-bone target.

Run on demand: ``python -m bench.bench_retarget``. Prints the binding time (once per pair) and the
per-clip retarget time, against a baseline measured in the same run: the same transfer written as
the obvious per-frame loop (one frame at a time through the same core maths).
"""

from __future__ import annotations

import time

import numpy as np

from marionette.core.retarget.geometric import RigInput, bind, retarget
from marionette.core.rig.clip import Clip
from marionette.core.rig.samples import sample_humanoid, sample_walk


def best_of(fn, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    target = sample_humanoid(arms_down_angle=0.7, proportions=0.9, rolls=np.random.default_rng(0).uniform(-3, 3, 51))
    for label, source in (("clip with fingers", sample_humanoid()), ("clip without fingers (mocap)", sample_humanoid(fingers=False))):
        print(f"== {label}")
        case(source, target)


def case(source, target) -> None:
    clip = sample_walk(source, frames=1000)
    src_in = RigInput(source.skeleton, source.slots, source.tails)
    tgt_in = RigInput(target.skeleton, target.slots, target.tails)
    t_bind = best_of(lambda: bind(src_in, tgt_in), 3)
    binding = bind(src_in, tgt_in)
    t_vec = best_of(lambda: retarget(binding, clip))

    def per_frame() -> None:
        for f in range(0, clip.frame_count, 10):  # every 10th frame, scaled up below
            one = Clip(clip.names, clip.times[f : f + 1], clip.fps, clip.rotations[f : f + 1], clip.translations[f : f + 1])
            retarget(binding, one)

    t_loop = best_of(per_frame, 2) * 10
    print(f"target bones: {len(target.skeleton)}, frames: {clip.frame_count}, framed slots: {len(binding.framed)}")
    print(f"bind (once per pair):        {t_bind * 1e3:8.1f} ms")
    print(f"retarget, vectorised:        {t_vec * 1e3:8.1f} ms   (goal <= 30 ms)")
    print(f"retarget, frame by frame:    {t_loop * 1e3:8.1f} ms   (baseline)")
    print(f"speed-up over the baseline:  {t_loop / t_vec:8.1f} x")


if __name__ == "__main__":
    main()

"""Wind on spring chains (docs/controls.md#wind-and-the-center-space): a steady push with gusts.

Conventions: the wind is an acceleration (units/s^2, per unit mass, as gravity is) along a world
direction, its strength varying with time as ``strength * max(0, 1 + gust * noise(time))``.
``noise`` is smooth value noise in [-1, 1] (two octaves, the second at 2.17 times the gust
frequency and half the amplitude) whose lattice values are hashed from the ``seed``: a function
of the scene time alone, so a frame evaluated again, a scrub back or a bake gives the same wind,
and the same seed the same gusts on every machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError

Vec = tuple[float, float, float]


def _hash(i: int, seed: int) -> float:
    """A lattice value in [-1, 1] for integer ``i`` (a 32-bit integer hash, so the values do
    not depend on the platform or on Python's own hashing)."""
    h = (i * 374761393 + seed * 668265263) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 1274126177) & 0xFFFFFFFF
    h ^= h >> 16
    return h / 2147483647.5 - 1.0


def _value_noise(x: float, seed: int) -> float:
    i = math.floor(x)
    f = x - i
    u = f * f * (3.0 - 2.0 * f)
    a, b = _hash(i, seed), _hash(i + 1, seed)
    return a + (b - a) * u


def noise(time: float, frequency: float, seed: int) -> float:
    """Smooth deterministic noise in [-1, 1] at ``time`` (seconds) of about ``frequency`` Hz."""
    x = time * frequency
    return (_value_noise(x, seed) + 0.5 * _value_noise(2.17 * x + 19.3, seed + 7919)) / 1.5


@dataclass(frozen=True)
class Wind:
    """A wind (shared definition; build it with :meth:`build`)."""

    #: World direction the wind blows toward (unit).
    direction: Vec
    #: Acceleration of the steady wind, units/s^2.
    strength: float
    #: Relative size of the gusts (0: steady).
    gust: float = 0.0
    #: About how many gusts per second.
    frequency: float = 0.5
    seed: int = 0

    @classmethod
    def build(
        cls, direction: ArrayLike, strength: float, *, gust: float = 0.0, frequency: float = 0.5, seed: int = 0
    ) -> Wind:
        d = np.asarray(direction, dtype=np.float64).reshape(-1)
        if d.shape != (3,) or not np.all(np.isfinite(d)) or float(np.linalg.norm(d)) < 1e-9:
            raise RigError(f"the wind's direction must be a finite non-zero vector of shape (3,), got {d.tolist()}")
        d = d / np.linalg.norm(d)
        for what, value in (("strength", strength), ("gust", gust), ("frequency", frequency)):
            if not (math.isfinite(value) and value >= 0.0):
                raise RigError(f"the wind's {what} must be finite and >= 0, got {value}")
        if gust > 0.0 and frequency <= 0.0:
            raise RigError("gusty wind needs a gust frequency above 0")
        return cls((float(d[0]), float(d[1]), float(d[2])), float(strength), float(gust), float(frequency), int(seed))

    def at(self, time: float) -> Vec:
        """The wind's acceleration at scene ``time`` (seconds)."""
        s = self.strength
        if self.gust > 0.0:
            s *= max(0.0, 1.0 + self.gust * noise(time, self.frequency, self.seed))
        d = self.direction
        return (d[0] * s, d[1] * s, d[2] * s)

"""The one rule for randomness after measurement: every draw is a function of (seed, stage, shard, position).

Synthesis and decoding never use global random state, Spark partition ids of an arbitrary
DataFrame, or Arrow batch indexes: a stream is named by the run's ``seed``, the ``stage`` drawing it
(:class:`Stage`), the ``shard`` (a synthesis shard: the records it holds are fixed by the number of
rows and the shard size, not by the session), and a ``batch`` (a round, a block, or a stream within
the shard). Positions inside a stream are counter-based (:func:`uniforms_at`), so the same rows get
the same draws however Spark cuts them into Arrow batches. The privacy noise never comes from here
(it is the secure sampler of :mod:`privsyn_spark.privacy.noise`).

>>> a = generator(7, Stage.PGM_SAMPLE, shard=3).random(4)
>>> b = generator(7, Stage.PGM_SAMPLE, shard=3).random(4)
>>> bool((a == b).all())
True
>>> whole = uniforms_at(7, Stage.DECODE, shard=0, stream=2, start=0, size=10)
>>> bool((uniforms_at(7, Stage.DECODE, 0, 2, start=6, size=4) == whole[6:]).all())
True
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stage(IntEnum):
    """Spawn-key tags of the random streams (values are part of the output: never renumber)."""

    GUM_INIT = 0
    GUM_ROUND = 1
    GUM_SPLIT = 2
    GUM_APPEND = 3
    GUM_TURN = 4
    GUM_APPEND_SPLIT = 5
    PGM_SAMPLE = 6
    DECODE = 7


def generator(seed: int, stage: int, shard: int = 0, batch: int = 0) -> np.random.Generator:
    """The generator of one (seed, stage, shard, batch): ``SeedSequence`` spawn keys, nothing else.

    >>> int(generator(1, Stage.GUM_INIT).integers(10**6)) == int(generator(1, 0, 0, 0).integers(10**6))
    True
    """
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(stage), int(shard), int(batch))))


def uniforms_at(seed: int, stage: int, shard: int, stream: int, start: int, size: int) -> np.ndarray:
    """Uniforms ``[0, 1)`` number ``start .. start+size-1`` of the stream (seed, stage, shard, stream).

    Counter-based (Philox4x64 keyed by the spawn key, its counter set to the position), so a batch
    of rows gets the same values whether it is read in one piece or in many.
    """
    key = np.random.SeedSequence(int(seed), spawn_key=(int(stage), int(shard), int(stream))).generate_state(
        2, np.uint64)
    # Philox4x64 yields 4 64-bit words (4 doubles) per counter step
    bits = np.random.Philox(key=key, counter=[int(start) // 4, 0, 0, 0])
    skip = int(start) % 4
    return np.random.Generator(bits).random(size + skip)[skip:]

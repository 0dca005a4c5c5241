"""Exact discrete Gaussian sampling, vectorised in numpy on integer arithmetic.

Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential Privacy", CKS20)
Algorithms 1-3, run on whole arrays of pending samples per loop iteration:

- Algorithm 1, Bernoulli(exp(-gamma)) for a rational gamma = num / den;
- Algorithm 2, the discrete Laplace with integer scale t;
- Algorithm 3, the discrete Gaussian by rejection from the discrete Laplace with t = floor(sigma) + 1.

Every random decision is a comparison of an exact uniform integer (:class:`UniformIntegers`:
random bytes masked to the bound's bit length, redrawn when above the bound) with an integer; no
floating point enters a decision, so the output distribution is exactly N_Z(0, sigma^2) for the
rational sigma^2 of :class:`RationalScale` (the requested sigma rounded *up*, by at most 1e-5 relative).
The scale is chosen so the products stay below 2^62 in int64 for all but astronomically rare draws,
which take an exact Python-int path. Scales where that is impossible return None from
:meth:`RationalScale.for_sigma` (the caller then uses another exact sampler).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

INT_LIMIT = 2 ** 31
"""|d |y| - m| stays below this so that its square fits in int64 (2^62)."""
TAIL_SCALES = 24
"""Draws with |y| <= TAIL_SCALES * t stay on the int64 path (a discrete Laplace exceeds it w.p. e^-24)."""
MAX_INFLATION = 1e-5
"""Largest relative increase of sigma accepted when rounding sigma^2 to a rational with small terms."""
CHUNK = 1 << 20
"""Candidates handled per loop iteration of Algorithm 3 (bounds memory to a few tens of MB)."""


class UniformIntegers:
    """Exact uniform integers and fair coins from a byte source (``os.urandom`` in production).

    ``below(bound, n)`` masks random words to the bit length of ``bound - 1`` and redraws the
    ones ``>= bound``: exact rejection sampling, at least half the draws accepted.
    """

    def __init__(self, random_bytes: Callable[[int], bytes]) -> None:
        self._bytes = random_bytes

    def _words(self, n: int, wide: bool) -> np.ndarray:
        if wide:
            return np.frombuffer(self._bytes(8 * n), dtype=np.uint64)
        return np.frombuffer(self._bytes(4 * n), dtype=np.uint32).astype(np.uint64)

    def below(self, bound: int, n: int) -> np.ndarray:
        """``n`` uniform integers in ``[0, bound)`` (int64); ``1 <= bound <= 2^62``."""
        bound = int(bound)
        if not 1 <= bound <= 2 ** 62:
            raise ValueError(f"bound must be in [1, 2^62], got {bound}")
        out = np.zeros(n, dtype=np.int64)
        if bound == 1 or n == 0:
            return out
        mask, wide = np.uint64((1 << (bound - 1).bit_length()) - 1), bound > 2 ** 32
        pending = np.arange(n)
        while pending.size:
            words = self._words(pending.size, wide) & mask
            ok = words < np.uint64(bound)
            out[pending[ok]] = words[ok].astype(np.int64)
            pending = pending[~ok]
        return out

    def coins(self, n: int) -> np.ndarray:
        """``n`` fair coins (bool)."""
        raw = np.frombuffer(self._bytes((n + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw)[:n].astype(bool)


def bernoulli_exp_fraction(ints: UniformIntegers, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(-num/den)) per element, for 0 <= num <= den (CKS20 Algorithm 1, gamma in [0, 1]).

    K = 1; while Bernoulli(gamma / K): K += 1; return K odd. Bernoulli(gamma / K) is drawn as
    Bernoulli(num / den) and Bernoulli(1 / K), independent, so no product can overflow. All elements
    still looping share the same K, so each round draws against scalar bounds.
    """
    num = np.asarray(num, dtype=np.int64)
    odd = np.zeros(num.size, dtype=bool)
    alive = np.arange(num.size)
    k = 1
    while alive.size:
        success = ints.below(den, alive.size) < num[alive]
        if k > 1:
            hit = np.flatnonzero(success)
            success[hit] = ints.below(k, hit.size) == 0
        odd[alive[~success]] = k & 1 == 1  # the loop stops at this K
        alive = alive[success]
        k += 1
    return odd


_FACTORIAL_N = 12
_FACTORIAL = math.factorial(_FACTORIAL_N)  # 12! < 2^29: one 32-bit word, 89 % accepted
_PASS_THRESHOLDS = np.array([_FACTORIAL // math.factorial(k) for k in range(_FACTORIAL_N, 1, -1)], dtype=np.int64)
"""12!/k! for k = 12 .. 2 (ascending): U < 12!/k! has probability exactly 1/k!."""


def bernoulli_exp_minus_one(ints: UniformIntegers, n: int) -> np.ndarray:
    """``n`` draws of Bernoulli(exp(-1)) (CKS20 Algorithm 1 with gamma = 1).

    Algorithm 1 draws Bernoulli(1/K) for K = 2, 3, ... and returns whether it stops at an odd K;
    it passes K = 2..k with probability exactly 1/k!. One uniform U in [0, 12!) decides the first 11
    of those draws at once (passed through k iff U < 12!/k!, nested events of probability 1/k!);
    the rare U = 0 (passed through 12, probability 2e-9) continues with Bernoulli(1/13), ... one at a time.
    """
    u = ints.below(_FACTORIAL, n)
    passed = _PASS_THRESHOLDS.size - np.searchsorted(_PASS_THRESHOLDS, u, side="right")
    stop = passed + 2  # the first K whose Bernoulli(1/K) failed
    for i in np.flatnonzero(passed == _PASS_THRESHOLDS.size):
        k = _FACTORIAL_N + 1
        while ints.below(k, 1)[0] == 0:
            k += 1
        stop[i] = k
    return (stop & 1) == 1


def bernoulli_exp(ints: UniformIntegers, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(-num/den)) per element, num >= 0 (CKS20 Algorithm 1).

    floor(gamma) draws of Bernoulli(exp(-1)) must all succeed, then one Bernoulli(exp(-frac(gamma))).
    """
    whole, frac = np.divmod(np.asarray(num, dtype=np.int64), int(den))
    result = np.ones(whole.size, dtype=bool)
    active = np.flatnonzero(whole > 0)
    left = whole[active]
    while active.size:
        ok = bernoulli_exp_minus_one(ints, active.size)
        result[active[~ok]] = False
        active, left = active[ok], left[ok] - 1
        more = left > 0
        active, left = active[more], left[more]
    survivors = np.flatnonzero(result)
    result[survivors] = bernoulli_exp_fraction(ints, frac[survivors], den)
    return result


def _bernoulli_exp_exact(ints: UniformIntegers, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for one element with Python ints (any size): the rare overflow path."""
    whole, frac = divmod(int(num), int(den))
    while whole > 0:
        if not bernoulli_exp_minus_one(ints, 1)[0]:
            return False
        whole -= 1
    return bool(bernoulli_exp_fraction(ints, np.array([frac], dtype=np.int64), den)[0])


def discrete_laplace(ints: UniformIntegers, t: int, n: int) -> np.ndarray:
    """The accepted draws among ``n`` candidates of the discrete Laplace with scale ``t`` (CKS20 Algorithm 2, s = 1).

    P(x) proportional to exp(-|x| / t). About 0.63 n draws come back (U is kept w.p. exp(-U/t)).
    """
    u = ints.below(t, n)
    u = u[bernoulli_exp_fraction(ints, u, t)]
    v = np.zeros(u.size, dtype=np.int64)  # V: Bernoulli(exp(-1)) successes before the first failure
    alive = np.arange(u.size)
    while alive.size:
        alive = alive[bernoulli_exp_minus_one(ints, alive.size)]
        v[alive] += 1
    x = u + t * v
    negative = ints.coins(x.size)
    keep = ~(negative & (x == 0))  # reject "-0" so that 0 is not counted twice
    return np.where(negative, -x, x)[keep]


@dataclass(frozen=True)
class RationalScale:
    """sigma^2 = t m / d exactly, with t = floor(sigma) + 1 (CKS20 Algorithm 3) and d a power of two.

    Then (|y| - sigma^2/t)^2 / (2 sigma^2) = (d |y| - m)^2 / (2 d t m): integers only. ``d`` is the
    largest power of two keeping d * TAIL_SCALES * t + m below 2^31, m = ceil(d sigma^2 / t).
    """

    t: int
    d: int
    m: int

    @property
    def sigma_squared(self) -> Fraction:
        return Fraction(self.t * self.m, self.d)

    @property
    def sigma(self) -> float:
        """The scale actually sampled (>= the requested one)."""
        return math.sqrt(self.sigma_squared)

    @property
    def den(self) -> int:
        return 2 * self.d * self.t * self.m

    @classmethod
    def for_sigma(cls, sigma: float) -> RationalScale | None:
        """The smallest-term rational scale >= ``sigma`` within MAX_INFLATION, or None if int64 cannot hold it."""
        s2 = Fraction(float(sigma)) ** 2
        t = math.floor(sigma) + 1

        def fits(d: int) -> bool:
            return d * TAIL_SCALES * t + math.ceil(d * s2 / t) < INT_LIMIT

        if not fits(1):
            return None
        d = 1
        while d < INT_LIMIT and fits(2 * d):
            d *= 2
        scale = cls(t, d, max(1, math.ceil(d * s2 / t)))
        if scale.sigma_squared > s2 * (1 + MAX_INFLATION) ** 2:
            return None
        return scale


def discrete_gaussian(ints: UniformIntegers, scale: RationalScale, size: int) -> np.ndarray:
    """``size`` i.i.d. draws of N_Z(0, scale.sigma_squared) (CKS20 Algorithm 3), as int64.

    Candidates Y from the discrete Laplace(t) are accepted w.p. exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)),
    all pending candidates of a chunk at once; the first ``size`` accepted ones are returned.
    """
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        want = size - filled
        y = discrete_laplace(ints, scale.t, min(CHUNK, 2 * want + 64))
        y = y[_accept(ints, scale, y)][:want]
        out[filled:filled + y.size] = y
        filled += y.size
    return out


def _accept(ints: UniformIntegers, scale: RationalScale, y: np.ndarray) -> np.ndarray:
    """Algorithm 3's acceptance test, Bernoulli(exp(-(d|y| - m)^2 / (2 d t m))), per candidate."""
    ay = np.abs(y)
    safe = ay <= (INT_LIMIT - 1 + scale.m) // scale.d  # then |d |y| - m| < 2^31
    accept = np.empty(y.size, dtype=bool)
    e = scale.d * ay[safe] - scale.m
    accept[safe] = bernoulli_exp(ints, e * e, scale.den)
    for i in np.flatnonzero(~safe):  # a tail beyond TAIL_SCALES * t: exact Python ints
        accept[i] = _bernoulli_exp_exact(ints, (scale.d * int(ay[i]) - scale.m) ** 2, scale.den)
    return accept

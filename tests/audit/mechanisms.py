"""The white-box audit's harness: each mechanism's release on D and on D' drawn many times from the exact
counts, at the noise scale the real release code chose (its ledger entry), with the sampler the release
ran with (no Spark per trial).

The real release functions run once per neighbour, so a broken sensitivity or threshold (injected by
patching the real function) changes what is audited. The draws then repeat the mechanism's last step,
exact + N_Z(0, sigma^2) at the cells the neighbour touches, vectorised: ``sampler.discrete_gaussian``
of the production :class:`~privsyn_spark.privacy.noise.SecureDiscreteGaussian` (exact CKS20 sampler,
os.urandom), or of the broken sampler under test.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest

from privsyn_spark.privacy import discovery, unit
from privsyn_spark.privacy.accounting import eps_from_rho
from privsyn_spark.privacy.noise import NoiseSampler, SecureDiscreteGaussian
from tests.audit.audit_stats import EmpiricalEpsilon, event_audit, gaussian_audit

AUDIT_DELTA = 0.02
"""The delta the Gaussian audits test the claim at: a release of rho-zCDP claims (eps_from_rho(rho, delta),
delta)-DP for every delta; at 0.02 a million draws resolve the claim (at the run's 1e-9 none could)."""
TRIALS = 1_000_000
"""Draws of each release on D and on D' (half pick the test's threshold, half measure it)."""


class ShrunkSampler:
    """A broken sampler: asked for sigma, it draws at ``factor`` sigma (the ledger still says sigma)."""

    def __init__(self, factor: float) -> None:
        self.inner, self.factor = SecureDiscreteGaussian(), factor

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self.inner.discrete_gaussian(self.factor * sigma, size)


@dataclass(frozen=True)
class Variant:
    """One way of running the mechanisms: the real code, or a named broken variant."""

    name: str
    sampler_factor: float = 1.0
    bound: str = "K"               # "K", "sqrt(K)" or "1": what the unit's K is replaced by
    threshold_k_term: bool = True  # the partition-selection threshold's K term

    @property
    def broken(self) -> bool:
        return self != REAL

    def sampler(self) -> NoiseSampler:
        return SecureDiscreteGaussian() if self.sampler_factor == 1.0 else ShrunkSampler(self.sampler_factor)

    @contextmanager
    def patched(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """The real code with this variant's defect injected into the real functions."""
        with monkeypatch.context() as m:
            if self.bound != "K":
                shrink = (lambda k: max(1, int(math.sqrt(k)))) if self.bound == "sqrt(K)" else (lambda k: 1)
                m.setattr(unit.PrivacyUnit, "bound", property(lambda u: shrink(u.max_rows_per_id)))
            if not self.threshold_k_term:
                m.setattr(discovery, "partition_threshold",
                          lambda sigma, delta, u: 1.0 + sigma * math.sqrt(2.0 * math.log(1.0 / delta)))
            yield


REAL = Variant("real")
BROKEN = (Variant("K replaced by sqrt(K)", bound="sqrt(K)"), Variant("K replaced by 1", bound="1"),
          Variant("sigma scaled by 0.8", sampler_factor=0.8))
BROKEN_THRESHOLD = Variant("partition threshold without its K term", threshold_k_term=False)


def entry(ledger: list[dict], name: str) -> dict:
    """The ledger entry of release ``name``."""
    found = [e for e in ledger if e["name"] == name]
    assert len(found) == 1, f"no single ledger entry {name!r} in {[e['name'] for e in ledger]}"
    return found[0]


def draw(sampler: NoiseSampler, sigma: float, exact: np.ndarray, trials: int = TRIALS) -> np.ndarray:
    """``trials`` releases (rows) of the cells ``exact`` with the sampler's noise at ``sigma``."""
    exact = np.asarray(exact, dtype=np.int64).reshape(-1)
    noise = np.asarray(sampler.discrete_gaussian(sigma, trials * exact.size)).reshape(trials, exact.size)
    return exact + noise


@dataclass(frozen=True)
class Audit:
    """One mechanism's audit: the empirical epsilon and the stated one at the audit's delta."""

    mechanism: str
    empirical: EmpiricalEpsilon
    stated: float
    delta: float

    @property
    def leaks(self) -> bool:
        """The empirical lower bound (95 %) exceeds the stated epsilon."""
        return self.empirical.lower > self.stated

    def __str__(self) -> str:
        return f"{self.mechanism}: empirical epsilon {self.empirical}, stated {self.stated:.3g} at delta {self.delta:g}"


def gaussian_release_audit(mechanism: str, ledger_entry: dict, exact_d: np.ndarray, exact_d2: np.ndarray,
                           sampler: NoiseSampler, scale: float = 1.0) -> Audit:
    """Audit a discrete Gaussian release (its ledger entry: rho, the sigma asked of the sampler) on the
    exact cells of D and D' (``scale``: the release's integer scale, InDif's k)."""
    sigma = float(ledger_entry["sigma_requested"])
    exact_d, exact_d2 = (np.rint(np.asarray(x, dtype=np.float64).reshape(-1) * scale).astype(np.int64)
                         for x in (exact_d, exact_d2))
    touched = np.flatnonzero(exact_d != exact_d2)
    d, d2 = exact_d[touched], exact_d2[touched]
    empirical = gaussian_audit(draw(sampler, sigma, d), draw(sampler, sigma, d2), (d2 - d).astype(np.float64),
                               AUDIT_DELTA)
    return Audit(mechanism, empirical, eps_from_rho(float(ledger_entry["rho"]), AUDIT_DELTA), AUDIT_DELTA)


def selection_audit(mechanism: str, ledger_entry: dict, canary_count: int, sampler: NoiseSampler) -> Audit:
    """Audit a partition selection: a value only D' holds (``canary_count`` rows) is released w.p.
    P(count + Z >= threshold) on D' and never on D; the claim is that this is at most the selection's delta
    (the stated epsilon bounds nothing here: the event has probability 0 on D)."""
    sigma, tau = float(ledger_entry["sigma_requested"]), float(ledger_entry["threshold"])
    delta = float(ledger_entry["delta"])
    hits = int((draw(sampler, sigma, np.array([canary_count]))[:, 0] >= tau).sum())
    empirical = event_audit(0, hits, TRIALS, delta)
    return Audit(mechanism, empirical, 0.0, delta)

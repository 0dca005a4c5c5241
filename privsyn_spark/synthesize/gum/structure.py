"""GUM's configuration and structure: which targets are updated, appended or joined, and the targets scaled.

Part of PrivSyn's GUM (Section 5.3); the update step is in :mod:`~privsyn_spark.synthesize.gum.update`, the loop
in :mod:`~privsyn_spark.synthesize.gum.kernel`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from privsyn_spark.domain import Domain, Key
from privsyn_spark.errors import UsageError

log = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class GumConfig:
    """Hyper-parameters of GUM (PrivSyn Section 5.3).

    ``beta`` is not a parameter: for each marginal update it is solved so that the records removed from
    over-counted cells equal the records added to under-counted ones ("given alpha, beta can be
    calculated").
    """

    iterations: int = 100
    """Passes over all target marginals (an upper bound when ``tolerance`` > 0)."""
    alpha_0: float = 0.5
    """Initial update rate alpha (the paper keeps alpha < 1)."""
    decay_rate: float = 0.84
    """Step-decay factor k."""
    decay_step: int = 20
    """Step-decay period s (alpha shrinks every s iterations)."""
    duplicate_min: float = 0.5
    """Share of gains made by Duplicate when the marginal fits badly (the rest is Replace)."""
    duplicate_max: float = 0.9
    """Share of gains made by Duplicate when the marginal fits perfectly."""
    duplicate_error_scale: float = 0.1
    """Relative L1 error (L1 / n) at or above which the duplicate share is ``duplicate_min``."""
    tolerance: float = 0.0
    """Stop a component early once every tracked target has L1 / n <= tolerance (0: on a perfect fit only)."""
    append_attributes: bool = True
    """Attach attributes that occur in exactly one marginal after the rest has converged."""
    separate_components: bool = True
    """Update independent components of the marginal graph separately, then join them."""
    track_errors: bool = True
    """Record the L1 distance to every tracked target after every iteration."""
    whole_record_marginals: int = 64
    """A Duplicate copies whole records of the component (the paper's Duplicate) while the component has
    at most this many updated marginals; beyond, only the neighbourhood of the updated marginal (its
    attributes and those of every marginal sharing one with it). A whole-record Duplicate touches every
    marginal, so an iteration costs ``O(moved x marginals^2)``; the neighbourhood one touches only the
    marginals over those attributes. Whole records fit the Adult marginals better (22 marginals)."""
    candidate_pool: int = 4
    """Records removed from a cell (and duplicate sources) are the best of a random pool this many times
    larger, ranked by how over- (under-) counted their cells are in the other marginals; 1: uniformly
    random records as in the reference implementation."""
    pool_max: int = 64
    """Largest pool multiplier, used when few records move (pools then grow to ``pool_share`` of n)."""
    pool_share: float = 0.05
    """Pools together stay below this share of the records; when ``candidate_pool`` would exceed it
    (early iterations, many moves), records are picked uniformly at random."""
    improving_only_after: int | None = 20
    """From this iteration on, a move (a removed record rewritten) is kept only if it lowers the summed L1
    over the component's updated marginals: greedy polishing once the fit is close (None: never)."""
    model_improving_only_after: int | None = 0
    """``improving_only_after`` when the records start from samples of the fitted graphical model (already
    close to every target: plain updates mostly churn there); see :meth:`for_model_start`. On the
    662,000 x 97 generated table (212 targets) the samples are at worst L1/n 0.017 and 10 plain
    iterations take them to 0.46 (8 rounds of 10 then ended at 0.035)."""
    model_best_cell_pairs: int = 2_000_000
    """``best_cell_pairs`` when the records start from samples of the model (see :meth:`for_model_start`):
    improving-only moves judged one by one against the same counts overshoot in the other marginals at
    width (97 columns: the summed L1 rises from the samples' 0.52 to 0.55 in 2 iterations); best-cell
    moves, re-judged between passes, take it to 0.15 in one (worst L1/n 0.017 -> 0.005)."""
    min_gain: float = 0.0
    """Stop a component's iterations (in this call of :func:`~privsyn_spark.synthesize.gum.run_gum`) once
    one lowers its worst tracked L1/n by less than this share of its value (0: never)."""
    model_min_gain: float = 0.005
    """``min_gain`` from a model start. On a generated 15-column table (the pipeline's Private-PGM targets,
    10^6 records) the first iteration takes the worst L1/n from 0.022 to 0.0078, the second to 0.0069,
    and the next six churn between 0.0063 and 0.0070 at ~4 us a record each: the sample is already
    within its sampling noise of the targets, so iterating on is most of GUM's time for nothing. 0.5 % an
    iteration is the pace of the round rule (``ShardingConfig.model_min_gain``, 5 % over 10)."""
    best_cell_candidates: int = 32
    """In those improving-only updates, each removed record is offered this many gain cells (all of them
    when there are fewer) and goes, by Replace, to the one where its move lowers the summed L1 most; cells
    take one record per pass, the counts updated between passes (see ``best_cell.best_cell_moves``)."""
    best_cell_pairs: int = 0
    """Largest removed records x offered cells for that; larger updates, and 0 (the default), pair removed
    records with gain slots at random (the reference behaviour), judging each move alone. Best-cell moves
    lower the summed error floor on small tables (sharded GUM's sweeps use them) but cost time on large
    updates and did not lower the worst per-target error on the epsilon = 1 Adult targets."""

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise UsageError("GumConfig: iterations must be >= 0")
        if self.alpha_0 <= 0:
            raise UsageError("GumConfig: alpha_0 must be > 0")
        if not 0 < self.decay_rate <= 1:
            raise UsageError("GumConfig: decay_rate must be in (0, 1]")
        if self.decay_step < 1:
            raise UsageError("GumConfig: decay_step must be >= 1")
        if not 0 <= self.duplicate_min <= self.duplicate_max <= 1:
            raise UsageError("GumConfig: need 0 <= duplicate_min <= duplicate_max <= 1")
        if not 1 <= self.candidate_pool <= max(self.pool_max, 1):
            raise UsageError("GumConfig: need 1 <= candidate_pool <= pool_max")
        if not 0 < self.pool_share <= 1:
            raise UsageError("GumConfig: pool_share must be in (0, 1]")
        if self.duplicate_error_scale <= 0:
            raise UsageError("GumConfig: duplicate_error_scale must be > 0")
        if self.whole_record_marginals < 0:
            raise UsageError("GumConfig: whole_record_marginals must be >= 0")
        if not (0 <= self.min_gain < 1 and 0 <= self.model_min_gain < 1):
            raise UsageError("GumConfig: min_gain and model_min_gain must be in [0, 1)")
        if min(self.best_cell_pairs, self.model_best_cell_pairs) < 0 or self.best_cell_candidates < 1:
            raise UsageError("GumConfig: need best_cell_pairs >= 0, model_best_cell_pairs >= 0 and "
                             "best_cell_candidates >= 1")

    def alpha(self, t: int) -> float:
        """Update rate at iteration ``t``."""
        return self.alpha_0 * self.decay_rate ** (t // self.decay_step)  # PrivSyn Section 5.3, step decay

    def pool(self, moves: int, n: int) -> int:
        """Candidate pool multiplier for an update moving ``moves`` of ``n`` records (1: no scoring)."""
        if self.candidate_pool <= 1 or self.candidate_pool * moves > self.pool_share * n:
            return 1
        return int(min(self.pool_max, max(self.candidate_pool, self.pool_share * n // max(moves, 1))))

    def for_model_start(self) -> GumConfig:
        """These settings for records sampled from the model: improving-only from ``model_improving_only_after``,
        best-cell moves up to ``model_best_cell_pairs``, iterations stopping at ``model_min_gain``."""
        return replace(self, improving_only_after=self.model_improving_only_after,
                       best_cell_pairs=max(self.best_cell_pairs, self.model_best_cell_pairs),
                       min_gain=self.model_min_gain)

    def improving_only(self, t: int) -> bool:
        """Whether iteration ``t`` keeps only moves that lower the summed L1."""
        return self.improving_only_after is not None and t >= self.improving_only_after

    def duplicate_share(self, relative_error: float) -> float:
        """Share of gains made by Duplicate, rising from ``duplicate_min`` to ``duplicate_max`` as the fit improves."""
        bad = min(1.0, max(0.0, relative_error / self.duplicate_error_scale))
        return self.duplicate_max - (self.duplicate_max - self.duplicate_min) * bad


# ----------------------------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class AppendGroup:
    """Attributes attached after GUM, conditionally on the ``core`` of their single marginal."""

    marginal: Key
    attrs: Key
    core: Key


@dataclass(frozen=True)
class Component:
    """A connected component of the marginal graph, synthesised on its own."""

    attrs: Key
    gum_attrs: Key
    """Attributes changed by the GUM updates (``attrs`` minus appended ones)."""
    update_targets: tuple[Key, ...]
    """Marginals visited by each iteration (the maximal ones over ``gum_attrs``)."""
    tracked_targets: tuple[Key, ...]
    """Every target over ``gum_attrs`` (its L1 is recorded per iteration)."""
    appends: tuple[AppendGroup, ...]


@dataclass(frozen=True)
class GumStructure:
    """How a set of target marginals is synthesised: components, updated marginals, appended attributes."""

    domain: Domain
    targets: tuple[Key, ...]
    components: tuple[Component, ...]

    @property
    def update_targets(self) -> tuple[Key, ...]:
        """All marginals visited by GUM iterations, over all components."""
        return tuple(k for c in self.components for k in c.update_targets)

    @property
    def tracked_targets(self) -> tuple[Key, ...]:
        """All marginals whose error is recorded per iteration, over all components."""
        return tuple(k for c in self.components for k in c.tracked_targets)

    @property
    def required_tables(self) -> tuple[Key, ...]:
        """Every table the kernel reads: tracked targets, append marginals and 1-way tables."""
        keys: list[Key] = []
        for c in self.components:
            keys.extend(c.tracked_targets)
            keys.extend(g.marginal for g in c.appends)
        keys.extend((a,) for a in self.domain.attrs if any(a in k for k in self.targets))
        return tuple(dict.fromkeys(keys))


def gum_structure(domain: Domain, marginals: Iterable[Iterable[str]], config: GumConfig | None = None) -> GumStructure:
    """Plan attribute appending and separate-and-join (PrivSyn Section 5.3) for the given marginals."""
    config = config or GumConfig()
    keys = list(dict.fromkeys(domain.canonical(m) for m in marginals))
    if any(len(k) == 0 for k in keys):
        raise ValueError("gum_structure: empty marginal")
    sets = [frozenset(k) for k in keys]
    maximal = [k for k, s in zip(keys, sets) if not any(s < o for o in sets)]
    multi = [k for k in maximal if len(k) >= 2]

    # connected components of the attribute graph (union-find over attributes)
    parent = {a: a for a in domain.attrs}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for k in multi:
        for a in k[1:]:
            ra, rb = find(k[0]), find(a)
            if ra != rb:
                parent[max(ra, rb, key=domain.attrs.index)] = min(ra, rb, key=domain.attrs.index)
    groups: dict[str, list[str]] = {}
    for a in domain.attrs:
        groups.setdefault(find(a) if config.separate_components else "", []).append(a)

    degree = {a: sum(a in k for k in multi) for a in domain.attrs}
    components = []
    for attrs in groups.values():
        aset = set(attrs)
        appends = []
        if config.append_attributes:
            for k in multi:
                if set(k) <= aset:
                    once = tuple(a for a in k if degree[a] == 1)
                    if once:
                        appends.append(AppendGroup(k, once, tuple(a for a in k if degree[a] != 1)))
        appended = {a for g in appends for a in g.attrs}
        gum_attrs = tuple(a for a in attrs if a not in appended)
        gset = set(gum_attrs)
        tracked = [k for k in keys if set(k) <= gset]
        for g in appends:
            if g.core and g.core not in tracked:
                tracked.append(g.core)
        tsets = [frozenset(k) for k in tracked]
        update = [k for k, s in zip(tracked, tsets) if not any(s < o for o in tsets)]
        components.append(Component(tuple(attrs), gum_attrs, tuple(update), tuple(tracked), tuple(appends)))
    structure = GumStructure(domain, tuple(keys), tuple(components))
    log.debug("GUM structure: %d components, %d updated marginals, %d appended attributes", len(components),
              len(structure.update_targets), sum(len(g.attrs) for c in components for g in c.appends))
    return structure


# -------------------------------------------------------------------------------------------- targets


def marginalize(table: np.ndarray, key: Key, sub: Iterable[str]) -> np.ndarray:
    """Marginalise a count table over ``key`` onto the attributes ``sub`` (canonical order kept)."""
    keep = set(sub)
    axes = tuple(i for i, a in enumerate(key) if a not in keep)
    return table.sum(axis=axes) if axes else table


def scale_targets(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int) -> dict[Key, np.ndarray]:
    """Validate target tables and scale each (negatives clipped to 0) to total ``n``, as float64."""
    out: dict[Key, np.ndarray] = {}
    for key, table in targets.items():
        key = tuple(key)
        if domain.canonical(key) != key:
            raise ValueError(f"target key {key} is not in the domain's canonical order")
        t = np.asarray(table, dtype=np.float64)
        if t.shape != domain.shape(key):
            raise ValueError(f"target {key} has shape {t.shape}, expected {domain.shape(key)}")
        if np.any(t < 0):
            log.warning("target %s has negative counts; clipped to 0", key)
            t = np.clip(t, 0.0, None)
        total = t.sum()
        out[key] = t * (n / total) if total > 0 else np.full(t.shape, n / t.size)
    return out


def prepare_targets(structure: GumStructure, targets: Mapping[tuple[str, ...], np.ndarray],
                    n: int) -> dict[Key, np.ndarray]:
    """Scale targets to ``n`` and add the tables the structure needs (1-way tables, append cores) by projection."""
    scaled = scale_targets(structure.domain, targets, n)
    for key in structure.required_tables:
        if key not in scaled:
            sources = [k for k in scaled if set(key) <= set(k)]
            source = min(sources, key=lambda k: scaled[k].size)  # the smallest table holding ``key``
            scaled[key] = marginalize(scaled[source], source, key)
    return scaled


# -------------------------------------------------------------------------------------------- helpers

"""PrivSyn's Gradually Update Method (GUM) for one shard, in numpy.

Records are an ``(n, d)`` integer code array over a :class:`~privsyn_spark.domain.Domain` (columns in the
domain's attribute order). Targets are count tables ``dict[tuple[str, ...], np.ndarray]`` keyed by
canonical attribute tuples; they are assumed consistent and non-negative, and each is scaled to the
shard's ``n``.

The kernel (PrivSyn Section 5.3):

- records start with every attribute following its 1-way target (exact counts, shuffled);
- each iteration visits every target marginal: over-counted cells lose ``min(n_s - n_t, beta n_s)``
  records, under-counted cells gain ``min(n_t - n_s, alpha n_s)`` (``alpha n_t`` for empty cells), with
  ``beta`` solved so that removals equal additions; a gain is a mix of *Duplicate* (copy a whole record of
  the under-counted cell onto a removed record) and *Replace* (overwrite only the marginal's attributes of
  a removed record), the duplicate share growing as the marginal's fit improves;
- ``alpha`` follows step decay ``alpha_0 * k^floor(t/s)``; records are shuffled between passes;
- attribute appending: attributes in exactly one (maximal) marginal are left out of the updates and
  attached afterwards, conditionally on the rest of that marginal;
- separate-and-join: connected components of the marginal graph are updated independently (each
  component's columns are shuffled on their own, which makes the final join random).

Two refinements beyond the paper, both switchable in :class:`GumConfig`: records removed from a cell
(and duplicate sources) are the best-ranked of a random candidate pool, ranked by how over- (under-)
counted their cells are in the other marginals (``candidate_pool``; 1 = uniformly random records as in
the reference implementation); and after ``improving_only_after`` iterations a move is kept only if it
lowers the summed L1 (greedy polishing). On the Adult sample both together roughly halve the error
floor that uniformly random moves settle at (unit-level churn between overlapping marginals), and the
second makes the error non-increasing, which the sharded reconciliation relies on.

Everything is vectorised (cell index, bincount, radix argsort, ``np.repeat``); Python loops run over
iterations, components and marginals only, never over records or cells. The entry point is
:func:`synthesize`; the pieces (:func:`plan_gum`, :func:`prepare_targets`, :func:`initialize_records`,
:func:`run_gum`, :func:`append_attributes`) are public so the Spark-sharded driver can run rounds of
local iterations toward changing local targets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import prod

import numpy as np

from privsyn_spark.domain import Domain

log = logging.getLogger(__name__)

Key = tuple[str, ...]


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

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise ValueError("GumConfig: iterations must be >= 0")
        if self.alpha_0 <= 0:
            raise ValueError("GumConfig: alpha_0 must be > 0")
        if not 0 < self.decay_rate <= 1:
            raise ValueError("GumConfig: decay_rate must be in (0, 1]")
        if self.decay_step < 1:
            raise ValueError("GumConfig: decay_step must be >= 1")
        if not 0 <= self.duplicate_min <= self.duplicate_max <= 1:
            raise ValueError("GumConfig: need 0 <= duplicate_min <= duplicate_max <= 1")
        if not 1 <= self.candidate_pool <= max(self.pool_max, 1):
            raise ValueError("GumConfig: need 1 <= candidate_pool <= pool_max")
        if not 0 < self.pool_share <= 1:
            raise ValueError("GumConfig: pool_share must be in (0, 1]")
        if self.duplicate_error_scale <= 0:
            raise ValueError("GumConfig: duplicate_error_scale must be > 0")

    def alpha(self, t: int) -> float:
        """Update rate at iteration ``t``."""
        return self.alpha_0 * self.decay_rate ** (t // self.decay_step)  # PrivSyn Section 5.3, step decay

    def pool(self, moves: int, n: int) -> int:
        """Candidate pool multiplier for an update moving ``moves`` of ``n`` records (1: no scoring)."""
        if self.candidate_pool <= 1 or self.candidate_pool * moves > self.pool_share * n:
            return 1
        return int(min(self.pool_max, max(self.candidate_pool, self.pool_share * n // max(moves, 1))))

    def improving_only(self, t: int) -> bool:
        """Whether iteration ``t`` keeps only moves that lower the summed L1."""
        return self.improving_only_after is not None and t >= self.improving_only_after

    def duplicate_share(self, relative_error: float) -> float:
        """Share of gains made by Duplicate, rising from ``duplicate_min`` to ``duplicate_max`` as the fit improves."""
        bad = min(1.0, max(0.0, relative_error / self.duplicate_error_scale))
        return self.duplicate_max - (self.duplicate_max - self.duplicate_min) * bad


# ----------------------------------------------------------------------------------------------- plan


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
class GumPlan:
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


def plan_gum(domain: Domain, marginals: Iterable[Iterable[str]], config: GumConfig | None = None) -> GumPlan:
    """Plan attribute appending and separate-and-join (PrivSyn Section 5.3) for the given marginals."""
    config = config or GumConfig()
    keys = list(dict.fromkeys(domain.canonical(m) for m in marginals))
    if any(len(k) == 0 for k in keys):
        raise ValueError("plan_gum: empty marginal")
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
    plan = GumPlan(domain, tuple(keys), tuple(components))
    log.debug("GUM plan: %d components, %d updated marginals, %d appended attributes", len(components),
              len(plan.update_targets), sum(len(g.attrs) for c in components for g in c.appends))
    return plan


# -------------------------------------------------------------------------------------------- targets


def project(table: np.ndarray, key: Key, sub: Iterable[str]) -> np.ndarray:
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


def prepare_targets(plan: GumPlan, targets: Mapping[tuple[str, ...], np.ndarray], n: int) -> dict[Key, np.ndarray]:
    """Scale targets to ``n`` and add the tables the plan needs (1-way tables, append cores) by projection."""
    scaled = scale_targets(plan.domain, targets, n)
    for key in plan.required_tables:
        if key not in scaled:
            sources = [k for k in scaled if set(key) <= set(k)]
            source = min(sources, key=lambda k: scaled[k].size)  # the smallest table holding ``key``
            scaled[key] = project(scaled[source], source, key)
    return scaled


# -------------------------------------------------------------------------------------------- helpers


def codes_dtype(domain: Domain) -> np.dtype:
    """Smallest unsigned integer dtype holding every code of ``domain``."""
    biggest = max(domain.sizes, default=1)
    return np.dtype(np.uint8 if biggest <= 1 << 8 else np.uint16 if biggest <= 1 << 16 else np.int32)


def cell_index(records: np.ndarray, cols: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Flat (C-order, as ``np.ravel_multi_index``) cell index of every record in a marginal over ``cols``."""
    dtype = np.int32 if prod(shape) < 2**31 else np.int64
    idx = records[:, cols[0]].astype(dtype)
    for c, size in zip(cols[1:], shape[1:]):
        idx *= size
        idx += records[:, c]
    return idx


def marginal_counts(records: np.ndarray, domain: Domain, key: Key) -> np.ndarray:
    """Count table (int64, axes in canonical order) of ``records`` over the attributes ``key``."""
    key = domain.canonical(key)
    shape = domain.shape(key)
    cols = tuple(domain.attrs.index(a) for a in key)
    return np.bincount(cell_index(records, cols, shape), minlength=prod(shape)).reshape(shape)


def _stable_argsort(idx: np.ndarray, cells: int) -> np.ndarray:
    """Stable argsort of cell indices; LSD radix passes on 16-bit digits (deterministic on every CPU)."""
    if cells <= 1 << 16:
        return np.argsort(idx.astype(np.uint16), kind="stable")
    if cells <= 1 << 32:
        order = np.argsort((idx & 0xFFFF).astype(np.uint16), kind="stable")
        high = (idx[order] >> 16).astype(np.uint16)
        return order[np.argsort(high, kind="stable")]
    return np.argsort(idx, kind="stable")


def _stochastic_round(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unbiased randomised rounding of non-negative reals to int64."""
    low = np.floor(x)
    return (low + (rng.random(x.shape) < (x - low))).astype(np.int64)


def _round_fixed_total(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Round non-negative reals to integers keeping the (rounded) total: systematic sampling of the remainders."""
    low = np.floor(x)
    frac = x - low
    extra = int(round(frac.sum()))
    out = low.astype(np.int64)
    if extra > 0:
        cum = np.cumsum(frac)
        points = (np.arange(extra) + rng.random()) * (cum[-1] / extra)
        out += np.bincount(np.minimum(np.searchsorted(cum, points, side="right"), x.size - 1), minlength=x.size)
    return out


def _round_rows(want: np.ndarray, totals: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Round each row of ``want`` (rows summing to the integer ``totals``) to integers with exact row sums."""
    cum = np.cumsum(want, axis=1)
    cum[:, -1] = totals
    y = np.floor(cum + rng.random((want.shape[0], 1))).astype(np.int64)
    return np.diff(y, axis=1, prepend=0)


def _pick_in_groups(order: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """From each group ``order[start:start+size]`` take ``count`` records from a random cyclic offset.

    Positions are random (records are shuffled between passes), so a run from a random offset is a
    random subset; counts above the group size wrap around (repeats, only for duplicate sources).
    """
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=order.dtype)
    offsets = rng.integers(0, sizes)
    group = np.repeat(np.arange(counts.size), counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[starts[group] + (offsets[group] + within) % sizes[group]]


def _removal_amounts(excess: np.ndarray, current: np.ndarray, total: float) -> tuple[np.ndarray, float]:
    """Per-cell removals ``min(excess, beta * current)`` summing to ``total``; returns them and beta.

    PrivSyn Section 5.3: over-counted cells lose min(n_s - n_t, beta n_s), beta set by the additions.
    """
    over = np.flatnonzero(excess > 0)
    if total >= excess[over].sum():
        return excess.copy(), 1.0
    ratio = excess[over] / current[over]
    order = np.argsort(ratio, kind="stable")
    q, e, s = ratio[order], excess[over][order], current[over][order]
    done = np.concatenate(([0.0], np.cumsum(e)[:-1]))  # cells below position k are fully corrected
    rest = np.cumsum(s[::-1])[::-1]                      # sum of n_s at positions >= k
    k = min(int(np.searchsorted(done + q * rest, total)), q.size - 1)
    beta = (total - done[k]) / rest[k]
    out = np.zeros_like(excess)
    out[over] = np.minimum(excess[over], beta * current[over])
    return out, float(beta)


# ------------------------------------------------------------------------------------------- records


def initialize_records(plan: GumPlan, tables: Mapping[Key, np.ndarray], n: int,
                       rng: np.random.Generator) -> np.ndarray:
    """``(n, d)`` codes (Fortran order) whose every attribute follows its 1-way table exactly, shuffled."""
    domain = plan.domain
    records = np.empty((n, len(domain)), dtype=codes_dtype(domain), order="F")
    for j, (a, size) in enumerate(zip(domain.attrs, domain.sizes)):
        one_way = tables.get((a,))
        if one_way is None:
            log.warning("attribute %r is in no target; its codes are uniform", a)
            records[:, j] = rng.integers(0, size, n)
            continue
        total = one_way.sum()
        p = one_way / total if total > 0 else np.full(size, 1.0 / size)
        counts = _round_fixed_total(p * n, rng)
        counts[np.argmax(counts)] += n - counts.sum()  # float round-off only
        records[:, j] = rng.permutation(np.repeat(np.arange(size), counts))
    return records


def _shuffle_columns(records: np.ndarray, cols: list[int], rng: np.random.Generator) -> None:
    """Shuffle the rows of the given columns in place (one permutation for all of them)."""
    perm = rng.permutation(records.shape[0])
    if len(cols) == records.shape[1]:
        records[...] = np.take(records, perm, axis=0)
    else:
        records[:, cols] = np.take(records[:, cols], perm, axis=0)


class MarginalSet:
    """Count tables of the records over a set of marginals, kept exact while records change.

    Counts are flat int64 arrays (C order over the canonical axes); targets are flat float64 tables.
    After each update only the changed rows are re-counted, so tracking every target costs
    ``O(changed rows)`` per update, not ``O(n)``.
    """

    def __init__(self, records: np.ndarray, domain: Domain, keys: Iterable[Key],
                 tables: Mapping[Key, np.ndarray]) -> None:
        self.keys = tuple(keys)
        self.cols = [tuple(domain.attrs.index(a) for a in k) for k in self.keys]
        self.shapes = [domain.shape(k) for k in self.keys]
        self.targets = [np.asarray(tables[k], dtype=np.float64).ravel() for k in self.keys]
        self.counts = [np.bincount(cell_index(records, c, s), minlength=t.size)
                       for c, s, t in zip(self.cols, self.shapes, self.targets)]

    def position(self, key: Key) -> int:
        """Index of ``key`` in this set."""
        return self.keys.index(key)

    def l1(self) -> dict[Key, float]:
        """Current L1 distance to every target."""
        return {k: float(np.abs(c - t).sum()) for k, c, t in zip(self.keys, self.counts, self.targets)}

    def excess_score(self, i: int, cells: np.ndarray) -> np.ndarray:
        """(count - target) / sqrt(target + 1) of marginal ``i`` at ``cells``: > 0 where over-counted."""
        t = self.targets[i][cells]
        return (self.counts[i][cells] - t) / np.sqrt(t + 1.0)

    def excess(self, i: int, cells: np.ndarray) -> np.ndarray:
        """count - target of marginal ``i`` at ``cells``."""
        return self.counts[i][cells] - self.targets[i][cells]

    def replace_rows(self, old: np.ndarray, new: np.ndarray) -> None:
        """Account for rows changing from ``old`` to ``new`` (both ``(k, d)``)."""
        if old.shape[0] == 0:
            return
        for i, (cols, shape, target) in enumerate(zip(self.cols, self.shapes, self.targets)):
            added, dropped = cell_index(new, cols, shape), cell_index(old, cols, shape)
            if 8 * added.size < target.size:  # few rows, big table: touch only their cells
                np.add.at(self.counts[i], added, 1)
                np.subtract.at(self.counts[i], dropped, 1)
            else:
                self.counts[i] += np.bincount(added, minlength=target.size)
                self.counts[i] -= np.bincount(dropped, minlength=target.size)


@dataclass
class UpdateStats:
    """What one marginal update did."""

    l1_before: float
    changed: int
    duplicated: int
    beta: float


def _choose(order: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray, pool: int,
            score, rng: np.random.Generator) -> np.ndarray:
    """Pick ``counts[g]`` records of each cell group; with ``pool`` > 1, the best-scored of a random pool.

    The pool of a cell holds up to ``pool * count`` of its records (random, see :func:`_pick_in_groups`);
    records are ranked by ``score(rows)`` (higher first, ties in random order).
    """
    if pool <= 1 or counts.sum() == 0:
        return _pick_in_groups(order, starts, sizes, counts, rng)
    take = np.maximum(np.minimum(sizes, pool * counts), counts)
    cand = _pick_in_groups(order, starts, sizes, take, rng)
    group = np.repeat(np.arange(counts.size), take)
    ranked = np.lexsort((-score(cand), group))  # by group, best score first, stable within ties
    rank = np.arange(cand.size) - np.repeat(np.cumsum(take) - take, take)
    return cand[ranked][rank < np.repeat(counts, take)]


def update_marginal(records: np.ndarray, marginals: MarginalSet, which: int, alpha: float, config: GumConfig,
                    rng: np.random.Generator, copy_cols: list[int] | None = None,
                    scored: Iterable[int] | None = None, improving_only: bool = False) -> UpdateStats:
    """One GUM step toward marginal ``which`` of ``marginals`` (PrivSyn Section 5.3), in place.

    ``copy_cols`` are the columns a Duplicate copies (the component's columns; None: whole records).
    ``scored`` are the marginals (indices in ``marginals``) used to rank candidate records (default:
    all but ``which``): removals prefer records in over-counted cells of those marginals, duplicate
    sources records in under-counted ones. With ``improving_only``, a move is kept only if it lowers the
    summed L1 over ``which`` and ``scored``. The counts in ``marginals`` are kept up to date.
    """
    n = records.shape[0]
    cols, shape, target = marginals.cols[which], marginals.shapes[which], marginals.targets[which]
    cells = target.size
    current_i = marginals.counts[which]
    current = current_i.astype(np.float64)
    l1 = float(np.abs(current - target).sum())

    # gains: min(n_t - n_s, alpha n_s) for under-counted cells, alpha n_t for empty ones
    under = current < target
    live = under & (current > 0)
    empty = under & (current == 0)
    gain = np.zeros(cells)
    gain[live] = np.minimum(target[live] - current[live], alpha * current[live])
    gain[empty] = np.minimum(target[empty], alpha * target[empty])
    add = _stochastic_round(gain, rng)
    total_add = int(add.sum())
    if total_add == 0:
        return UpdateStats(l1, 0, 0, 0.0)

    # losses: min(n_s - n_t, beta n_s), beta solved so that losses match gains
    loss, beta = _removal_amounts(np.where(current > target, current - target, 0.0), current, float(total_add))
    remove = np.minimum(_round_fixed_total(loss, rng), current_i)
    dup = np.zeros(cells, dtype=np.int64)  # gains made by Duplicate; the rest by Replace
    dup[live] = rng.binomial(add[live], config.duplicate_share(l1 / max(n, 1)))
    rep = add - dup

    # group records by cell, pick removed records and duplicate sources
    idx = cell_index(records, cols, shape)
    order = _stable_argsort(idx, cells)
    starts = np.cumsum(current_i) - current_i
    pool = config.pool(total_add, n)
    others = [i for i in (range(len(marginals.keys)) if scored is None else scored) if i != which]

    def score(rows: np.ndarray) -> np.ndarray:
        sub = records[rows]
        total = np.zeros(rows.size)
        for i in others:
            total += marginals.excess_score(i, cell_index(sub, marginals.cols[i], marginals.shapes[i]))
        return total

    rc, dc = np.flatnonzero(remove), np.flatnonzero(dup)
    removed = _choose(order, starts[rc], current_i[rc], remove[rc], pool, score, rng)
    sources = _choose(order, starts[dc], current_i[dc], dup[dc], pool, lambda rows: -score(rows), rng)
    rep_cells = np.repeat(np.arange(cells), rep)

    # pair removed records with gain slots at random (fewer removals than gains only by rounding)
    slots = rng.permutation(total_add)[: removed.size]
    is_dup = slots < sources.size
    old = records[removed]
    new = old.copy()
    d_rows = np.flatnonzero(is_dup)
    if copy_cols is None or len(copy_cols) == records.shape[1]:
        new[d_rows] = records[sources[slots[is_dup]]]
    else:
        new[np.ix_(d_rows, copy_cols)] = records[np.ix_(sources[slots[is_dup]], copy_cols)]
    r_rows = np.flatnonzero(~is_dup)
    values = np.unravel_index(rep_cells[slots[~is_dup] - sources.size], shape)
    for c, v in zip(cols, values):
        new[r_rows, c] = v
    if improving_only:  # keep the moves that lower the summed L1 (each judged alone)
        delta = np.zeros(removed.size)
        for i in [which] + others:
            co = cell_index(old, marginals.cols[i], marginals.shapes[i])
            cn = cell_index(new, marginals.cols[i], marginals.shapes[i])
            eo, en = marginals.excess(i, co), marginals.excess(i, cn)
            delta += np.where(co != cn, np.abs(eo - 1) - np.abs(eo) + np.abs(en + 1) - np.abs(en), 0.0)
        keep = delta < 0
        removed, old, new, is_dup = removed[keep], old[keep], new[keep], is_dup[keep]
    records[removed] = new
    marginals.replace_rows(old, new)
    return UpdateStats(l1, int(removed.size), int(is_dup.sum()), beta)


def l1_errors(records: np.ndarray, domain: Domain, tables: Mapping[Key, np.ndarray],
              keys: Iterable[Key]) -> dict[Key, float]:
    """L1 distance between the records' counts and each table in ``keys``."""
    return {k: float(np.abs(marginal_counts(records, domain, k) - tables[k]).sum()) for k in keys}


def run_gum(records: np.ndarray, plan: GumPlan, tables: Mapping[Key, np.ndarray], config: GumConfig,
            rng: np.random.Generator, start_iteration: int = 0,
            iterations: int | None = None) -> dict[Key, np.ndarray]:
    """Run GUM iterations in place on every component; returns the L1 history of each tracked target.

    Iteration numbers start at ``start_iteration`` (for alpha's step decay). The history of a target
    has one entry before the first iteration and one after each iteration run (empty arrays when
    ``config.track_errors`` is off). Tables must be scaled to ``len(records)``.
    """
    domain = plan.domain
    n = records.shape[0]
    iterations = config.iterations if iterations is None else iterations
    history: dict[Key, list[float]] = {k: [] for k in plan.tracked_targets}
    for comp in plan.components:
        if not comp.tracked_targets:
            continue
        comp_cols = [domain.attrs.index(a) for a in comp.attrs]  # Duplicate/shuffle never touch other components
        copy_cols = None if len(comp_cols) == records.shape[1] else comp_cols
        marginals = MarginalSet(records, domain, comp.update_targets, tables)
        updates = list(range(len(comp.update_targets)))
        # every tracked target lies inside an updated one: its counts are projections of maintained counts
        inside = {k: next(i for i, u in enumerate(comp.update_targets) if set(k) <= set(u))
                  for k in comp.tracked_targets}

        def track() -> float:
            errs = {}
            for k, i in inside.items():
                u = comp.update_targets[i]
                got = project(marginals.counts[i].reshape(marginals.shapes[i]), u, k)
                errs[k] = float(np.abs(got - tables[k]).sum())
            if config.track_errors:
                for k, e in errs.items():
                    history[k].append(e)
            return max(errs.values(), default=0.0) / max(n, 1)

        worst = track()
        if n == 0 or all(len(k) == 1 for k in comp.update_targets):  # 1-way only: the start is exact
            continue
        for t in range(start_iteration, start_iteration + iterations):
            if worst <= config.tolerance:
                log.debug("component %s reached tolerance at iteration %d", comp.attrs, t)
                break
            alpha = config.alpha(t)
            moved = 0
            for i in updates:
                moved += update_marginal(records, marginals, i, alpha, config, rng, copy_cols, updates,
                                        config.improving_only(t)).changed
            _shuffle_columns(records, comp_cols, rng)
            worst = track()
            lvl = logging.INFO if (t + 1) % 10 == 0 else logging.DEBUG
            log.log(lvl, "GUM iteration %d (alpha %.3g): %d records changed, worst L1/n %.4f", t, alpha, moved, worst)
    return {k: np.asarray(v) for k, v in history.items()}


def append_attributes(records: np.ndarray, plan: GumPlan, tables: Mapping[Key, np.ndarray],
                      rng: np.random.Generator) -> None:
    """Attribute appending (PrivSyn Section 5.3), in place: fill each append group conditionally on its core.

    Within each core cell the appended codes get the counts of the marginal's conditional distribution
    (rounded with exact row totals), assigned to that cell's records in random order.
    """
    domain = plan.domain
    n = records.shape[0]
    for comp in plan.components:
        for g in comp.appends:
            table = tables[g.marginal]
            axes = [g.marginal.index(a) for a in g.core] + [g.marginal.index(a) for a in g.attrs]
            core_cells = domain.cells(g.core) if g.core else 1
            app_shape = domain.shape(g.attrs)
            cond = np.transpose(table, axes).reshape(core_cells, -1)
            rows = cond.sum(axis=1, keepdims=True)
            fallback = cond.sum(axis=0) + 1e-12
            cond = np.where(rows > 0, cond / np.where(rows > 0, rows, 1.0), fallback / fallback.sum())
            if g.core:
                core_idx = cell_index(records, tuple(domain.attrs.index(a) for a in g.core), domain.shape(g.core))
            else:
                core_idx = np.zeros(n, dtype=np.int32)
            have = np.bincount(core_idx, minlength=core_cells)
            counts = _round_rows(cond * have[:, None], have, rng)
            perm = rng.permutation(n)
            order = perm[_stable_argsort(core_idx[perm], core_cells)]  # grouped by core cell, random within
            app_cells = np.tile(np.arange(cond.shape[1]), core_cells)
            values = np.unravel_index(np.repeat(app_cells, counts.ravel()), app_shape)
            for a, v in zip(g.attrs, values):
                records[order, domain.attrs.index(a)] = v


# ------------------------------------------------------------------------------------------ synthesis


@dataclass
class GumResult:
    """Output of :func:`synthesize`."""

    records: np.ndarray
    """``(n, d)`` codes, columns in the domain's attribute order."""
    plan: GumPlan
    errors: dict[Key, np.ndarray]
    """L1 history per tracked target: before the first iteration, then after each iteration."""
    final_errors: dict[Key, float] = field(default_factory=dict)
    """L1 of the finished table to every given target (scaled to n), appended ones included."""

    def max_relative_error(self) -> float:
        """Largest final L1 / n over the targets."""
        n = max(self.records.shape[0], 1)
        return max(self.final_errors.values(), default=0.0) / n


def synthesize(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int,
               config: GumConfig | None = None, rng: np.random.Generator | None = None) -> GumResult:
    """Synthesise ``n`` records over ``domain`` that match the target marginals (PrivSyn GUM, one shard)."""
    if rng is None:
        raise ValueError("synthesize: pass an explicit rng (np.random.default_rng(seed))")
    config = config or GumConfig()
    plan = plan_gum(domain, targets.keys(), config)
    tables = prepare_targets(plan, targets, n)
    records = initialize_records(plan, tables, n, rng)
    errors = run_gum(records, plan, tables, config, rng)
    append_attributes(records, plan, tables, rng)
    final = l1_errors(records, domain, tables, plan.targets)
    log.info("GUM: %d records, worst final L1/n %.4f", n, max(final.values(), default=0.0) / max(n, 1))
    return GumResult(records, plan, errors, final)

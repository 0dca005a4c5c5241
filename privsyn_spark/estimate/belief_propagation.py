"""Sum-product belief propagation on a junction tree: Private-PGM's MARGINAL-ORACLE.

Given log-potentials on the measured cliques (the model parameters theta), each junction-tree clique
gets the sum of the potentials assigned to it; two passes of messages (leaves to root, root to
leaves) then give every clique's belief, proportional to its exact marginal, and the log partition
function. Messages are log tables over separators. On the way up a clique's belief is built in
linear space, as the product of its parts' exps (potential terms and children's messages, each a
small table shifted by its maximum within each slice of the parent's separator), so no clique-sized
table is exponentiated; the way down only scales it by its parent's message (a separator-sized
table) and sums it onto its children's separators (Hugin's division by the child's own message is a
separator-sized subtraction in log space). On the way up, a separator slice whose sum underflows
sends the table, shifted per slice by the slice's own maximum, as its message (an exact logsumexp);
on the way down, a slice whose marginal underflows to zero sends log 0 = -inf (no mass in the child:
it holds less than float range). Which potentials fold into which clique (the assembly plan) depends
only on the tree and the measured cliques, so it is built once (cached on the tree). Only the
normalised clique marginals and the messages are kept; a clique's potential stays as the few small
tables it was assembled from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.broadcasting import collapsed, scale_in_place, shift_in_place, with_long_tail
from privsyn_spark.estimate.factor import Factor, sum_axes
from privsyn_spark.estimate.junction_tree import JunctionTree
from privsyn_spark.estimate.sum_plan import sum_down_plan


@dataclass(frozen=True)
class Calibration:
    """A calibrated junction tree: messages, log Z and (cached) normalised marginals."""

    tree: JunctionTree
    factors: tuple[tuple[Factor, ...], ...]  # per clique: small log tables whose sum is its potential
    messages: dict[tuple[int, int], Factor]  # (from, to) -> log message over their separator
    log_z: float
    _cache: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def clique_probabilities(self, i: int) -> np.ndarray:
        """Normalised marginal of clique ``i`` (axes in the clique's canonical order)."""
        return self._cache[self.tree.cliques[i]]

    def marginals(self, cliques: Iterable[tuple[str, ...]]) -> dict[tuple[str, ...], np.ndarray]:
        """Normalised marginals on ``cliques`` (canonical tuples), summed down from the junction-tree
        cliques through shared intermediate tables (:func:`~privsyn_spark.estimate.sum_plan.sum_down_plan`,
        cached on the tree)."""
        cliques = tuple(cliques)
        plans = self.tree.cache.setdefault("marginal_plans", {})
        if cliques not in plans:
            plans[cliques] = sum_down_plan(self.tree.domain, self.tree.cliques, cliques)
        for attrs, source, drop in plans[cliques]:
            if attrs not in self._cache:
                self._cache[attrs] = sum_axes(self._cache[source], drop)
        return {c: self._cache[c] for c in cliques}

    def probabilities(self, attrs: Iterable[str]) -> np.ndarray:
        """Normalised marginal over ``attrs`` (canonical order), which must fit inside one clique.

        Sums down from the smallest table already computed that holds ``attrs`` (cached).
        """
        domain = self.tree.domain
        attrs = domain.canonical(attrs)
        if attrs in self._cache:
            return self._cache[attrs]
        i = self.tree.containing(attrs)
        if i is None:
            raise KeyError(f"{attrs} is not inside any junction-tree clique")
        source = self.tree.cliques[i]
        wanted = set(attrs)
        best = self._cache[source].size
        for known, table in self._cache.items():
            if table.size < best and wanted < set(known):
                source, best = known, table.size
        drop = tuple(k for k, a in enumerate(source) if a not in wanted)
        self._cache[attrs] = sum_axes(self._cache[source], drop)
        return self._cache[attrs]


def _alignment(source: tuple[str, ...], target: tuple[str, ...],
               domain: Domain) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(perm, shape): ``np.transpose(v, perm).reshape(shape)`` broadcasts ``source``'s table to ``target``."""
    present = [a for a in target if a in source]
    return tuple(source.index(a) for a in present), tuple(domain[a] if a in source else 1 for a in target)


@dataclass(frozen=True)
class _Schedule:
    """What a calibration on one tree and one set of potential cliques does, minus the numbers."""

    order: list[int]
    parent: list[int]
    children: list[list[int]]
    # per clique: terms (attrs, [(potential key, perm, shape)], shape of its potentials' union broadcast
    # into attrs); a term is the sum of its aligned potentials
    terms: list[list[tuple[tuple[str, ...], list[tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]],
                           tuple[int, ...]]]]
    term_shapes: list[list[tuple[int, ...]]]  # each term broadcast into its clique
    separators: dict[tuple[int, int], tuple[str, ...]]
    drop: dict[tuple[int, int], tuple[int, ...]]   # (i, j): axes of clique i summed out onto sep(i, j)
    into: dict[tuple[int, int], tuple[int, ...]]   # (i, j): shape of sep(i, j) broadcast into clique j
    home: dict[tuple[int, int], tuple[int, tuple[int, ...]]]  # (i, j): term of clique j holding sep(i, j)
    #  and the separator's shape broadcast into it, or (-1, ()): the message is added to the full table


def _group_plan(tree: JunctionTree, keys: list[tuple[str, ...]],
                children: list[list[int]]) -> list[list[tuple[tuple[str, ...], list[tuple[str, ...]]]]]:
    """Per clique, the attribute sets of its terms and which potentials (keys) each one sums.

    Potentials inside a larger measured clique are folded into it, and small tables are summed
    together while their union stays well below the clique's size, so that building a clique's
    belief touches its full table only a few times. A term then takes in the separator of a child
    when their union stays within that limit too, so that the child's upward message joins it rather
    than the full table (its potentials are summed on their own union first, then broadcast: on
    Adult's largest clique, one pass of it fewer per calibration).
    """
    domain = tree.domain
    folded: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key in sorted(keys, key=lambda k: -domain.cells(k)):  # largest first
        attrs = domain.canonical(key)
        home = next((h for h in folded if set(attrs) <= set(h)), None)
        folded.setdefault(attrs if home is None else home, []).append(key)
    groups: list[list[tuple[tuple[str, ...], list[tuple[str, ...]]]]] = [[] for _ in tree.cliques]
    for attrs, members in folded.items():
        i = tree.containing(attrs)
        if i is None:
            raise KeyError(f"potential on {attrs} fits no junction-tree clique")
        groups[i].append((attrs, members))
    for i, clique in enumerate(tree.cliques):
        limit = domain.cells(clique) / 8
        group = groups[i]
        while len(group) > 1:
            cost, a, b = min((domain.cells(set(f[0]) | set(g[0])), a, b)
                             for a, f in enumerate(group) for b, g in enumerate(group) if a < b)
            if cost > limit:
                break
            merged = (domain.canonical(set(group[a][0]) | set(group[b][0])), group[a][1] + group[b][1])
            group = [f for k, f in enumerate(group) if k not in (a, b)] + [merged]
        for k in children[i]:  # a child's separator widens the term it adds least to, within the limit
            sep = set(tree.separator(k, i))
            if sep and group and not any(sep <= set(attrs) for attrs, _ in group):
                cost, t = min((domain.cells(sep | set(attrs)), t) for t, (attrs, _) in enumerate(group))
                if cost <= limit:
                    group[t] = (domain.canonical(sep | set(group[t][0])), group[t][1])
        groups[i] = group
    return groups


def _schedule(tree: JunctionTree, keys: tuple[tuple[str, ...], ...]) -> _Schedule:
    """The calibration schedule for potentials on ``keys`` (built once, cached on the tree)."""
    plans = tree.cache.setdefault("calibration_schedules", {})
    if keys in plans:
        return plans[keys]
    domain = tree.domain
    order, parent = tree.rooted(0)
    children = [[k for k in tree.neighbors(i) if k != parent[i]] for i in range(len(tree.cliques))]
    terms, term_shapes = [], []
    for i, group in enumerate(_group_plan(tree, list(keys), children)):
        clique = tree.cliques[i]
        terms.append([(attrs, [(k, *_alignment(k, attrs, domain)) for k in members],
                       _alignment(domain.canonical(set().union(*members)), attrs, domain)[1])
                      for attrs, members in group])
        term_shapes.append([_alignment(attrs, clique, domain)[1] for attrs, _ in group])
    separators, drop, into, home = {}, {}, {}, {}
    for i, j in [(i, j) for i, j in tree.edges] + [(j, i) for i, j in tree.edges]:
        sep = tree.separator(i, j)
        separators[(i, j)] = sep
        drop[(i, j)] = tuple(k for k, a in enumerate(tree.cliques[i]) if a not in sep)
        into[(i, j)] = _alignment(sep, tree.cliques[j], domain)[1]
        holders = [(domain.cells(attrs), t) for t, (attrs, *_) in enumerate(terms[j]) if set(sep) <= set(attrs)]
        t = min(holders)[1] if holders else -1
        home[(i, j)] = (t, _alignment(sep, terms[j][t][0], domain)[1]) if t >= 0 else (-1, ())
    plan = _Schedule(order, parent, children, terms, term_shapes, separators, drop, into, home)
    plans[keys] = plan
    return plan


def _term(domain: Domain, attrs: tuple[str, ...], members: list, core: tuple[int, ...], theta: Mapping) -> Factor:
    """A term's log table: its aligned potentials summed (the potential itself when it is the only one) on
    their union (shape ``core``), broadcast (a view) to the term's attributes when they are more."""
    if len(members) == 1 and members[0][0] == attrs:
        return Factor(domain, attrs, theta[attrs])
    values = np.zeros(core)
    for key, perm, shape in members:
        values += np.transpose(theta[key], perm).reshape(shape)
    return Factor(domain, attrs, np.broadcast_to(values, domain.shape(attrs)))


def clique_factors(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray]) -> list[list[Factor]]:
    """Assign each measured clique's log-potential to the smallest junction-tree clique holding it
    (potentials folded and small tables merged as the calibration schedule says)."""
    theta = {tuple(k): np.asarray(v, dtype=np.float64) for k, v in potentials.items()}
    plan = _schedule(tree, tuple(theta))
    return [[_term(tree.domain, attrs, members, core, theta) for attrs, members, core in terms]
            for terms in plan.terms]


def calibrate(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray],
              dtype: type = np.float64) -> Calibration:
    """Two-pass sum-product (Private-PGM MARGINAL-ORACLE via belief propagation), see the module doc.

    ``dtype`` is that of the clique-sized tables (beliefs, marginals); potentials, messages and log Z
    stay float64. float32 halves the memory traffic and doubles exp's speed for a relative error
    about 1e-7 in the marginals: for mirror descent's iterates on large models, not for the final one.
    """
    domain = tree.domain
    theta = {tuple(k): np.asarray(v, dtype=np.float64) for k, v in potentials.items()}
    plan = _schedule(tree, tuple(theta))
    factors = clique_factors(tree, theta)
    cliques = tree.cliques
    messages: dict[tuple[int, int], Factor] = {}
    tiny = float(np.finfo(dtype).tiny) * 1e8  # upward separator sums below this: shifted per slice

    def belief(i: int, incoming: Iterable[int], linear: bool = False,
               over: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Potential of clique ``i`` plus the messages from ``incoming`` neighbours, in log space (or
        ``linear``: its exp): a new array and the float64 offset it is relative to. Each part is shifted
        by its maximum over the axes ``over`` (default all; the offset then broadcasts over the others)
        first, so that a float32 table keeps full relative precision however large the messages' logs get,
        and linear tables are products of the parts' exps (no exp of the table)."""
        terms = [f.values for f in factors[i]]
        extra = []
        for k in incoming:  # a message goes into the smallest term holding its separator when one does
            t, shape = plan.home[(k, i)]
            if t >= 0:
                terms[t] = terms[t] + messages[(k, i)].values.reshape(shape)
            else:
                extra.append(messages[(k, i)].values.reshape(plan.into[(k, i)]))
        shape = domain.shape(cliques[i])
        parts = [v.reshape(s) for v, s in zip(terms, plan.term_shapes[i])] + extra
        axes = tuple(range(len(shape))) if over is None else over
        peaks = [v.max(axis=axes, keepdims=True) for v in parts]
        offset = sum(peaks, np.zeros((1,) * len(shape)))
        parts = [(np.exp(v - peak) if linear else v - peak).astype(dtype, copy=False) for v, peak in zip(parts, peaks)]
        combine = np.multiply if linear else np.add
        out: np.ndarray = np.empty(shape, dtype=dtype)
        if not parts:
            out.fill(1.0 if linear else 0.0)
            return out, offset
        full, shapes = collapsed(tuple(shape), tuple(v.shape for v in parts))
        full, parts = with_long_tail(full, [v.reshape(s) for v, s in zip(parts, shapes)])
        flat = out.reshape(full)
        if len(parts) == 1:
            np.copyto(flat, parts[0])
        else:
            combine(parts[0], parts[1], out=flat)
            for part in parts[2:]:
                combine(flat, part, out=flat)
        return out, offset

    linear: list[np.ndarray | None] = [None] * len(cliques)
    tops: list[np.ndarray] = [np.zeros(())] * len(cliques)
    shifted = tree.cache.setdefault(("shifted", np.dtype(dtype).name), set())  # cliques whose sums underflowed

    def upward(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """exp(potential + children's messages - top), top (over the parent's separator), and the log of its
        sums onto that separator plus top (the message; at the root, log Z). top is, per separator slice,
        the parts' maxima over the slice summed (no pass over the table); when that leaves a slice's sum
        below ``tiny``, the log table is shifted per slice by the slice's own maximum (every sum then >= 1:
        an exact logsumexp), at once in later calls on the same tree (mirror descent's iterates are alike)."""
        p = plan.parent[i]
        drop = plan.drop[(i, p)] if p >= 0 else tuple(range(len(cliques[i])))

        def onto(b: np.ndarray) -> np.ndarray:  # the separator's sums (the root: the total, in float64)
            return sum_axes(b, drop) if p >= 0 else np.array(b.sum(dtype=np.float64))

        def per_slice(offset: np.ndarray, sums: np.ndarray) -> np.ndarray:  # an offset as a separator table
            kept = tuple(1 if k in drop else n for k, n in enumerate(domain.shape(cliques[i])))
            return np.broadcast_to(offset, kept).reshape(sums.shape)
        if i not in shifted:
            b, offset = belief(i, plan.children[i], linear=True, over=drop)
            sums = onto(b)
            top = per_slice(offset, sums)
            if np.all(sums > tiny):
                return b, top, np.log(sums, dtype=np.float64) + top
            shifted.add(i)
        b, offset = belief(i, plan.children[i], over=drop)
        peaks = b.max(axis=drop, keepdims=True) if drop else b.copy()
        shift_in_place(b, -peaks)
        np.exp(b, out=b)
        sums = onto(b)
        top = per_slice(offset + peaks, sums)
        return b, top, np.log(sums, dtype=np.float64) + top

    log_z = 0.0
    for i in reversed(plan.order):  # upward, leaves to root: beliefs kept linear
        linear[i], tops[i], log_sums = upward(i)
        p = plan.parent[i]
        if p >= 0:
            messages[(i, p)] = Factor(domain, plan.separators[(i, p)], log_sums)
        else:
            log_z = float(log_sums)
    probabilities: dict[tuple[str, ...], np.ndarray] = {}
    for i in plan.order:  # downward: scale by the parent's message, normalise, send to the children
        upward_belief, linear[i] = linear[i], None
        if upward_belief is None:
            raise RuntimeError(f"calibration: clique {i} has no upward belief (the plan's order misses it)")
        b = upward_belief
        p = plan.parent[i]
        if p < 0:
            b *= np.exp(tops[i] - log_z)
        else:
            scale = np.exp(messages[(p, i)].values + (tops[i] - log_z))
            if np.all(np.isfinite(scale)) and np.all(scale < np.finfo(dtype).max):
                scale_in_place(b, scale.reshape(plan.into[(p, i)]))
            else:
                b, offset = belief(i, tree.neighbors(i))
                b -= log_z - offset.item()
                np.exp(b, out=b)
        probabilities[cliques[i]] = b
        for j in plan.children[i]:
            with np.errstate(divide="ignore"):  # a slice of no mass (below float range) sends -inf: none in j
                log_sums = np.log(sum_axes(b, plan.drop[(i, j)]), dtype=np.float64)
            # Hugin: the belief's separator marginal divided by j's own message
            messages[(i, j)] = Factor(domain, plan.separators[(i, j)], log_sums + log_z - messages[(j, i)].values)
    return Calibration(tree, tuple(tuple(g) for g in factors), messages, log_z, probabilities)

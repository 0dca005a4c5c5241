"""The domain the synthesizers see, built from the schema's declared rules (public: no budget, no data).

Without rules it is the schema's own columns. With rules (:mod:`privsyn_spark.schema.rules`):

- a **derived** column (``derived_from``) is not in it at all: it is never measured nor synthesized,
  and decoding generates it from its source's code (:attr:`SynthesisView.derivations`);
- columns linked by mask rules (``implies``, ``forbid``, ``combinations``, ``inequality``; a rule on
  a derived column is read as one on its source) are replaced by one **compound** attribute per
  connected group, whose codes are the group's *allowed* cells only (:class:`CompoundColumn`). An
  impossible combination has no code, so no synthesizer (GUM and its shards, Private-PGM sampling,
  any estimator) can produce one: the rule holds by construction, and its cells are structural zeros
  of every marginal over the compound. An input row that breaks a rule is outside the declared
  domain: it is counted (the run report's ``domain_handling``) and encoded as the allowed cell that
  keeps the most leading columns of the group (:attr:`CompoundColumn.lut`);
- a timestamp declared with parts (:mod:`privsyn_spark.schema.time_parts`) is its parts, one attribute each
  (:attr:`SynthesisView.parts`), recomposed into the column at decode; no rule may name it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from math import prod
from typing import ClassVar

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.schema.columns import Column, SchemaError
from privsyn_spark.schema.rules import Derivation, Rule, derivations
from privsyn_spark.schema.time_parts import PartColumn, TimestampColumn

MAX_GROUP_CELLS = 1_000_000
"""Largest product of the columns' codes a group of linked rules may span."""


@dataclass(frozen=True)
class CompoundColumn(Column):
    """One attribute for a group of columns linked by rules: code ``i`` is the allowed cell ``cells[i]``.

    ``cells``: ``(allowed, members)`` member codes; ``lut``: for every cell of the members' product
    (row-major), the packed ``code * 4 + status`` the encoder writes (status 1: the row breaks a rule).
    """

    members: tuple[str, ...] = ()
    member_sizes: tuple[int, ...] = ()
    cells: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64), compare=False)
    lut: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False)
    added: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool), compare=False)
    """Per code: whether a member is at its null or ``other`` code there."""
    unseen: str = "rule"

    kind: ClassVar[str] = "compound"

    @property
    def base_size(self) -> int:
        return int(self.cells.shape[0])

    @property
    def null_code(self) -> int | None:
        return None

    def labels(self) -> list[str]:
        return ["|".join(str(c) for c in row) for row in self.cells]


@dataclass(frozen=True)
class SynthesisView:
    """The synthesis domain's columns, the compound attributes and the derived columns (see the module)."""

    columns: tuple[Column, ...]
    compounds: tuple[CompoundColumn, ...] = ()
    derivations: tuple[Derivation, ...] = ()
    inequalities: tuple[tuple[str, str], ...] = ()
    rules: tuple[Rule, ...] = ()
    parts: tuple[PartColumn, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def domain(self) -> Domain:
        return Domain(self.names, tuple(c.size for c in self.columns))


def synthesis_view(columns: Sequence[Column], rules: Sequence[Rule], max_column_codes: int) -> SynthesisView:
    """The view of kept ``columns`` under ``rules``, timestamps declared with parts split into them (identity
    without either); raises SchemaError."""
    split = [c for c in columns if isinstance(c, TimestampColumn) and c.split]
    named = sorted({x for r in rules for x in r.columns} & {c.name for c in split})
    if named:
        raise SchemaError(f"rules name {named}, declared as timestamp parts: a rule on a timestamp's parts is not "
                          f"supported (declare it type: numerical)")
    view = _rules_view(columns, rules, max_column_codes)
    if not split:
        return view
    taken = {c.name for c in columns} | set(view.names)
    out: list[Column] = []
    parts: list[PartColumn] = []
    for c in view.columns:
        if isinstance(c, TimestampColumn) and c.split:
            parts += c.part_columns(taken)
            taken.update(p.name for p in parts)
            out += parts[-len(c.parts):]
        else:
            out.append(c)
    return replace(view, columns=tuple(out), parts=tuple(parts))


def _rules_view(columns: Sequence[Column], rules: Sequence[Rule], max_column_codes: int) -> SynthesisView:
    if not rules:
        return SynthesisView(tuple(columns))
    by_name = {c.name: c for c in columns}
    derived = derivations(rules, by_name)
    root = {c.name: c.name for c in columns}
    full = {c.name: np.arange(c.size) for c in columns}  # code of each column as a function of its root's code
    for d in derived:
        root[d.column] = root[d.source]
        full[d.column] = d.codes[full[d.source]]
    masked = [r for r in rules if r.kind != "derived_from"]
    parent = {c.name: c.name for c in columns}

    def find(a: str) -> str:
        while parent[a] != a:
            a = parent[a]
        return a

    for r in masked:
        roots = [root[c] for c in r.columns]
        for other in roots[1:]:
            parent[find(other)] = find(roots[0])
    groups: dict[str, list[str]] = {}
    for c in columns:
        if root[c.name] == c.name and any(root[x] == c.name for r in masked for x in r.columns):
            groups.setdefault(find(c.name), []).append(c.name)
    taken = set(by_name)
    compounds: dict[str, CompoundColumn] = {}
    for members in groups.values():
        compound = _compound(members, [r for r in masked if root[r.columns[0]] in members], by_name, root, full,
                             max_column_codes, taken)
        if compound is not None:
            taken.add(compound.name)
            for m in members:
                compounds[m] = compound
    out: list[Column] = []
    for c in columns:
        if root[c.name] != c.name:
            continue  # derived: generated at decode
        if c.name in compounds:
            if compounds[c.name].members[0] == c.name:
                out.append(compounds[c.name])
            continue
        out.append(c)
    return SynthesisView(tuple(out), tuple(dict.fromkeys(compounds.values())), tuple(derived),
                         tuple((r.columns[0], r.columns[1]) for r in rules if r.kind == "inequality"), tuple(rules))


def _compound(members: list[str], rules: list[Rule], columns: dict[str, Column], root: dict[str, str],
              full: dict[str, np.ndarray], max_column_codes: int, taken: set[str]) -> CompoundColumn | None:
    sizes = tuple(columns[m].size for m in members)
    cells = prod(sizes)
    what = f"rules over {members}"
    if cells > MAX_GROUP_CELLS:
        raise SchemaError(f"{what}: the linked columns span {cells:,} cells (more than {MAX_GROUP_CELLS:,}); "
                          f"declare fewer values or bins, or fewer linked rules")
    grid = np.indices(sizes).reshape(len(members), -1)
    allowed = np.ones(cells, dtype=bool)
    for r in rules:
        codes = tuple(full[c][grid[members.index(root[c])]] for c in r.columns)
        allowed &= r.allowed(columns)[codes]
    if allowed.all():
        return None
    count = int(allowed.sum())
    if count == 0:
        raise SchemaError(f"{what}: no combination of values is allowed")
    if count > max_column_codes:
        raise SchemaError(f"{what}: {count} allowed combinations is more than max_column_codes ({max_column_codes})")
    code = np.full(cells, -1, dtype=np.int64)
    code[allowed] = np.arange(count)
    nearest = code.copy()
    for keep in range(len(members) - 1, -1, -1):  # broken cells: the allowed cell keeping the most leading members
        prefix = np.asarray(np.ravel_multi_index(tuple(grid[:keep]), sizes[:keep]) if keep
                            else np.zeros(cells, dtype=np.int64))
        first = np.full(prod(sizes[:keep]), count, dtype=np.int64)
        np.minimum.at(first, prefix[allowed], code[allowed])  # the lowest allowed code of each prefix
        todo = (nearest < 0) & (first[prefix] < count)
        nearest[todo] = first[prefix[todo]]
    lut = (nearest << 2) + (~allowed).astype(np.int64)
    member_cells = grid[:, allowed].T.astype(np.int64)
    added = np.zeros(count, dtype=bool)
    for j, m in enumerate(members):
        added |= member_cells[:, j] >= columns[m].base_size
    name = "__rule_" + "__".join(members)
    while name in taken:
        name += "_"
    return CompoundColumn(name=name, dtype="int", nulls="none", members=tuple(members), member_sizes=sizes,
                          cells=member_cells, lut=lut, added=added)

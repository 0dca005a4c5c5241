"""The public domain of the encoded table: an ordered mapping attribute -> number of codes.

Every later stage (privacy, estimation, synthesis) works on integer codes ``0 .. size-1`` per
attribute; this object is the one shared description of those code ranges. It knows nothing about
Spark or about the original values (that is the schema's job).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from math import prod

Key = tuple[str, ...]
"""A marginal's (clique's) attributes, canonically ordered (:meth:`Domain.canonical`)."""


@dataclass(frozen=True)
class Domain(Mapping[str, int]):
    """Ordered attributes and their code counts (sizes)."""

    attrs: tuple[str, ...]
    sizes: tuple[int, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)  # attribute -> position: O(1) lookups

    def __post_init__(self) -> None:
        if len(self.attrs) != len(self.sizes):
            raise ValueError("Domain: attrs and sizes differ in length")
        object.__setattr__(self, "_index", {a: i for i, a in enumerate(self.attrs)})
        if len(self._index) != len(self.attrs):
            raise ValueError(f"Domain: duplicate attributes in {self.attrs}")
        for a, s in zip(self.attrs, self.sizes):
            if int(s) < 1:
                raise ValueError(f"Domain: attribute {a!r} has size {s} (must be >= 1)")

    @classmethod
    def from_dict(cls, sizes: Mapping[str, int]) -> "Domain":
        """Build from an ordered ``{attr: size}`` mapping."""
        return cls(tuple(sizes), tuple(int(v) for v in sizes.values()))

    def to_dict(self) -> dict[str, int]:
        """JSON-friendly ``{attr: size}`` in attribute order."""
        return dict(zip(self.attrs, self.sizes))

    def __getitem__(self, attr: str) -> int:
        return self.sizes[self._index[attr]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.attrs)

    def __len__(self) -> int:
        return len(self.attrs)

    def canonical(self, attrs: Iterable[str]) -> tuple[str, ...]:
        """``attrs`` sorted in this domain's attribute order (the order count arrays use)."""
        wanted = set(attrs)
        unknown = [a for a in wanted if a not in self._index]
        if unknown:
            raise KeyError(f"attributes not in domain: {sorted(unknown)}")
        return tuple(sorted(wanted, key=self._index.__getitem__))

    def shape(self, attrs: Iterable[str] | None = None) -> tuple[int, ...]:
        """Array shape of a count table over ``attrs`` (all attributes if None)."""
        return self.sizes if attrs is None else tuple(self[a] for a in attrs)

    def cells(self, attrs: Iterable[str] | None = None) -> int:
        """Number of cells of a count table over ``attrs``."""
        return prod(self.shape(attrs))

    def with_size(self, attr: str, size: int) -> "Domain":
        """Copy with one attribute's size replaced (e.g. after rare-value merging)."""
        return Domain(self.attrs, tuple(int(size) if a == attr else s for a, s in zip(self.attrs, self.sizes)))

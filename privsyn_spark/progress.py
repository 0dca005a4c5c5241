"""Progress people see: the long steps of a run report on stderr, with no logging set up.

The engine's counting passes, the estimate's mirror-descent iterations and the GUM rounds write
concise lines ``privsyn-spark: <step> <k> of <N> (<seconds> s)``: each pass and GUM round, and of the
mirror descent's iterations the first, then at most one every :attr:`ProgressConfig.every_seconds`, and
its end. In a notebook with ``tqdm`` installed (the ``notebook`` extra) a loop is a notebook progress
bar instead. ``ProgressConfig(quiet=True)`` (``Settings(progress=...)``, YAML ``progress: {quiet: true}``, the
CLI's ``--quiet``) silences them.

The lines hold only step names, counts of public quantities (passes, iterations, rounds: each
fixed by the settings or a function of noisy measurements) and elapsed seconds: never a statistic of
the private table (no row counts, no tallies). Every stage gets its :class:`Progress` as an argument
(:data:`SILENT` by default); only the driver reports.

>>> import io
>>> out = io.StringIO()
>>> loop = Progress(stream=out).loop("GUM round", 3, every_step=True)
>>> for k in range(1, 4):
...     loop.update(k)
>>> loop.close(3)
>>> [line.split(" (")[0] for line in out.getvalue().splitlines()]
['privsyn-spark: GUM round 1 of 3', 'privsyn-spark: GUM round 2 of 3', 'privsyn-spark: GUM round 3 of 3', \
'privsyn-spark: GUM rounds: done after 3 of 3']
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from privsyn_spark.errors import UsageError

PREFIX = "privsyn-spark: "


@dataclass(frozen=True)
class ProgressConfig:
    """What a run reports while it works (see :mod:`privsyn_spark.progress`)."""

    quiet: bool = False          # no progress lines nor bar (the CLI's --quiet)
    every_seconds: float = 10.0  # a loop reports at most this often (its first and last step always)
    bar: bool = True             # a tqdm notebook bar for loops, in a notebook when tqdm is installed

    def __post_init__(self) -> None:
        if not self.every_seconds >= 0:
            raise UsageError(f"progress.every_seconds must be >= 0, got {self.every_seconds}")


class Progress:
    """Writes a run's progress to ``stream`` (default: ``sys.stderr`` at the time of writing)."""

    def __init__(self, config: ProgressConfig = ProgressConfig(), stream: TextIO | None = None) -> None:
        self.config, self._stream = config, stream

    @property
    def enabled(self) -> bool:
        return not self.config.quiet

    def say(self, text: str) -> None:
        """One line ``privsyn-spark: text`` (nothing when quiet)."""
        if self.enabled:
            stream = self._stream or sys.stderr
            print(PREFIX + text, file=stream, flush=True)

    @contextmanager
    def phase(self, text: str) -> Iterator[None]:
        """A line when a phase starts and one with its seconds when it ends (not when it fails)."""
        self.say(text)
        start = time.perf_counter()
        yield
        self.say(f"{text}: done in {time.perf_counter() - start:.1f} s")

    def loop(self, label: str, total: int, at_most: bool = False, every_step: bool = False) -> Loop:
        """A loop of ``total`` steps (``at_most``: it may stop earlier) to :meth:`Loop.update` as it goes;
        ``every_step``: a line for each (few, slow steps), else at most one per ``every_seconds``."""
        bar = _notebook_bar(label, total) if self.enabled and self.config.bar else None
        return Loop(self, label, int(total), at_most, bar, every_step)


class Loop:
    """One loop's reporting: ``update(k)`` after step k, ``close(k)`` at its end."""

    def __init__(self, progress: Progress, label: str, total: int, at_most: bool, bar: Any = None,
                 every_step: bool = False) -> None:
        self.progress, self.label, self.total, self.bar, self.every_step = progress, label, total, bar, every_step
        self.of = f"of at most {total}" if at_most else f"of {total}"
        self.start = self.last = time.perf_counter()
        self.reported = False

    def update(self, k: int) -> None:
        """Step ``k`` is done: a line if it is the first, the last, or ``every_seconds`` passed (or ``every_step``)."""
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.update(k - self.bar.n)
            return
        if (self.every_step or not self.reported or k >= self.total
                or now - self.last >= self.progress.config.every_seconds):
            self.progress.say(f"{self.label} {k} {self.of} ({now - self.start:.1f} s)")
            self.reported, self.last = True, now

    def close(self, k: int, outcome: str = "done") -> None:
        """The loop ended after ``k`` steps (``outcome``: e.g. "converged")."""
        if self.bar is not None:
            self.bar.total = k
            self.bar.update(k - self.bar.n)
            self.bar.close()
            return
        self.progress.say(f"{self.label}s: {outcome} after {k} {self.of} ({time.perf_counter() - self.start:.1f} s)")


def summary(step: str, *, rows: int | None = None, table: str | None = None, version: int | None = None,
            ledger: Mapping[str, Any] | None = None, epsilon: float | None = None, report: str | None = None,
            note: str | None = None) -> str:
    """The one line a command ends with on stdout, in every mode (``--quiet`` too): the synthetic
    ``rows`` written to ``table`` at Delta ``version``, the epsilon the dataset's ``ledger`` (its
    :func:`~privsyn_spark.budget.ledger_summary.ledger_summary`) says is spent and left (else the run's
    ``epsilon``, unrecorded), the ``report``'s location, a ``note``. ``rows`` is the synthetic count (a
    function of the noisy total), never an exact statistic of the private table.

    >>> summary("run", rows=1200, table="out/t", version=3, epsilon=1.0, report="runs/r/operator/report.html")
    'privsyn-spark: run done: wrote 1,200 synthetic rows to out/t (Delta version 3); epsilon 1 spent, no ledger \
records it; report runs/r/operator/report.html'
    """
    parts = []
    if rows is not None:
        parts.append(f"wrote {rows:,} synthetic rows to {table} (Delta version {version})")
    if ledger and ledger.get("spent_epsilon") is not None:
        where = f"dataset {ledger['dataset_id']!r}" + (f", partition {ledger['partition']}" if ledger.get("partition")
                                                        else "")
        parts.append(f"epsilon {ledger['spent_epsilon']:.4g} spent, {ledger['left_epsilon']:.4g} left of "
                     f"{ledger['budget_epsilon']:g} at delta {ledger['budget_delta']:g} ({where})")
    elif epsilon is not None:
        parts.append(f"epsilon {epsilon:g} spent, no ledger records it")
    if report:
        parts.append(f"report {report}")
    if note:
        parts.append(note)
    return f"{PREFIX}{step} done: " + "; ".join(parts)


SILENT = Progress(ProgressConfig(quiet=True))
"""Reports nothing: the default of every stage called directly."""


def in_notebook() -> bool:
    """True inside a Jupyter-style kernel (IPython with a kernel: Jupyter, VS Code, Databricks, Colab)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def _notebook_bar(label: str, total: int) -> Any:
    """A tqdm notebook bar in a notebook when tqdm is installed, else None (lines instead)."""
    if not in_notebook():
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]  # optional, untyped
    except ImportError:
        return None
    return tqdm(total=total, desc=f"privsyn-spark {label}", leave=True)

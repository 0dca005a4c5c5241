"""The errors a user can act on, and the exit code each one maps to.

Every error raised for a reason the user can fix derives from :class:`PrivsynError`; the CLI
prints its one-line message (the full trace only with ``--debug``) and exits with its code, so a
scheduler can tell a budget refusal or bad input (do not retry) from a transient failure (retry):

| code | meaning                                         | retry? |
|------|-------------------------------------------------|--------|
| 0    | success                                         |        |
| 1    | any other failure (Spark, I/O, a bug)           | yes    |
| 2    | usage: bad option, schema, config or run id     | no     |
| 3    | the privacy budget refused the run              | no     |
| 4    | bad input data (a ``fail`` policy, empty table) | no     |

Messages never carry an exact statistic of the private table (row counts, tallies of handled
values): those go only to the operator report.
"""

from __future__ import annotations

import errno
import re

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_BAD_INPUT = 4

NON_RETRYABLE_EXIT_CODES = (EXIT_USAGE, EXIT_BUDGET, EXIT_BAD_INPUT)
"""Exit codes a scheduler should not retry: the same call fails the same way."""


class PrivsynError(Exception):
    """Base of the errors a user can act on; ``exit_code`` is what the CLI exits with."""

    exit_code: int = EXIT_FAILURE


class UsageError(PrivsynError, ValueError):
    """A bad option, schema, configuration or run id; found before Spark starts where possible."""

    exit_code = EXIT_USAGE


class BudgetRefused(PrivsynError, RuntimeError):
    """The privacy budget (the run's or the dataset's in the ledger) does not allow the run."""

    exit_code = EXIT_BUDGET


class BadInputData(PrivsynError, ValueError):
    """The input table cannot be used as declared (a ``fail`` policy hit, an empty table, ...)."""

    exit_code = EXIT_BAD_INPUT


_NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
             errno.EFBIG: "file too large"}
_JAVA_NO_SPACE = {"No space left on device": "no space left on device", "Disk quota exceeded": "disk quota exceeded",
                  "File too large": "file too large"}
_URI = re.compile(r"\b(?:file|hdfs|s3a?|s3n|abfss?|gs|wasbs?|viewfs|dbfs):/[^\s'\",;)]*")


def out_of_space(err: BaseException) -> str | None:
    """The one-line message of a write that ran out of space (ENOSPC, EDQUOT, EFBIG, raised in Python
    or in Spark's JVM anywhere in the cause chain), naming the location; None for any other error.
    Such a run exits 1 (retryable once space is freed); before its first noise draw it is refunded."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            where = current.filename or "the run's storage"
            return f"{_NO_SPACE[current.errno]} writing {where}; free space (or use other storage) and retry"
        current = current.__cause__ or current.__context__
    text = str(err)
    for marker, what in _JAVA_NO_SPACE.items():
        if marker in text:  # the JVM's error: the first location it names is the one being written
            found = _URI.search(text)
            where = found.group(0).rstrip(".") if found else "the run's storage"
            return f"{what} writing {where}; free space (or use other storage) and retry"
    return None

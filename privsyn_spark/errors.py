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

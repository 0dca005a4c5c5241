"""The package version (its own module, so that modules the package imports can read it without a cycle)."""

__version__ = "0.1.0"

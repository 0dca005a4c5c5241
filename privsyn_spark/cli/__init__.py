"""The command line ``privsyn-spark`` (:func:`main`), also ``python -m privsyn_spark.cli``: its parser,
options and steps, the run pipeline, resampling and the people steps."""

from privsyn_spark.cli.entry import main

__all__ = ["main"]

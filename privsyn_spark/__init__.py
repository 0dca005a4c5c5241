"""privsyn-spark: differentially private synthetic data (PrivSyn + Private-PGM) on Spark and Delta."""

__version__ = "0.1.0"

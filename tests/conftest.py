"""Shared fixtures: one SparkSession (local[2], Delta) for the whole test session, and the constructed
code tables of tests/code_tables.py."""

from __future__ import annotations

import logging

import pytest

pytest_plugins = ["tests.code_tables"]

logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines at interpreter exit hit closed streams


@pytest.fixture(scope="session")
def spark():
    from privsyn_spark.runtime.session import build_spark_session

    session = build_spark_session(master="local[2]", app_name="privsyn-spark-tests",
                                  conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()

"""Shared fixtures: one SparkSession (local[2], Delta) for the whole test session (one per pytest-xdist
worker), and the constructed code tables of tests/code_tables.py; the order and grouping of the tests."""

from __future__ import annotations

import logging

import pytest

pytest_plugins = ["tests.code_tables"]

logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines at interpreter exit hit closed streams


SHARED_SCOPES = ("module", "class", "package")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns the group markers into node ids
def pytest_collection_modifyitems(config, items) -> None:
    """The tests of a module with a module- or class-scoped fixture form one pytest-xdist group (the
    test command's `--dist loadgroup`: one worker builds that fixture once); slow tests and groups holding
    one run first, so that no long test starts when the other worker is nearly done."""
    def shares_a_fixture(item) -> bool:
        info = getattr(item, "_fixtureinfo", None)
        return info is not None and any(d.scope in SHARED_SCOPES for defs in info.name2fixturedefs.values()
                                        for d in defs)

    grouped = {item.module.__name__ for item in items if getattr(item, "module", None) and shares_a_fixture(item)}
    for item in items:
        if getattr(item, "module", None) and item.module.__name__ in grouped:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))

    def unit(item) -> str:
        module = getattr(item, "module", None)
        return module.__name__ if module and module.__name__ in grouped else item.nodeid

    slow = {unit(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: unit(item) not in slow)  # stable: the collection order otherwise


@pytest.fixture(scope="session")
def spark():
    from privsyn_spark.runtime.session import build_spark_session

    session = build_spark_session(master="local[2]", app_name="privsyn-spark-tests",
                                  conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()

"""The examples in the public API's docstrings run (on the bundled sample)."""

from __future__ import annotations

import doctest

import pytest

import privsyn_spark.api
import privsyn_spark.config
import privsyn_spark.progress
import privsyn_spark.randomness
import privsyn_spark.schema.schema

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("module", [privsyn_spark.config, privsyn_spark.randomness, privsyn_spark.schema.schema,
                                    privsyn_spark.progress])
def test_docstring_examples_without_spark(module):
    result = doctest.testmod(module, optionflags=FLAGS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.slow
def test_api_docstring_examples(spark, tmp_path):
    result = doctest.testmod(privsyn_spark.api, optionflags=FLAGS, extraglobs={"tmp": tmp_path, "spark": spark})
    assert result.attempted > 5 and result.failed == 0

"""Fixtures of the pipeline tests: one SparkSession for the whole test session (one JVM)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """A local[2] SparkSession shared by every Spark test; stopped at the end."""
    pytest.importorskip("pyspark")
    from zabray.pipeline.spark_session import get_session

    session = get_session("local[2]", app_name="zabray-pipeline-tests")
    yield session
    session.stop()

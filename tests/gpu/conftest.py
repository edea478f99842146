"""tests/gpu: everything here needs an NVIDIA GPU with a working driver. Each test is marked
``gpu`` and skipped with the reason (fastprof.cuda.status()) when CUDA cannot run."""

from __future__ import annotations

import os

import pytest

from fastprof import cuda

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = (
        None if cuda.is_available() else pytest.mark.skip(reason=f"no usable GPU: {cuda.status()}")
    )
    for item in items:
        if str(item.fspath).startswith(HERE):
            item.add_marker(pytest.mark.gpu)
            if skip is not None:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _gpu_idle_after_test():
    """Surfaces errors of asynchronous work in the test that queued it."""
    yield
    if cuda.is_available():
        cuda.synchronize()

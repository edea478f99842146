"""tests/gpu: the GPU tests.  Each test is marked ``gpu``.  With a usable GPU every test runs on
it.  Without one (and with a CUDA build of fastprof) they run on the fake device of
tests/fake_device.py, where the device code runs on the host: everything but the tests marked
``real_gpu`` (timing real kernels, CUPTI, the driver's memory pools, other libraries' device
arrays), which are skipped with the reason (fastprof.cuda.status())."""

from __future__ import annotations

import os

import pytest

from fake_device import FakeDevice, install
from fastprof import _fastprof
from fastprof.cuda import runtime as cuda

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = cuda.is_available()
FAKE = not REAL and _fastprof._cuda_built()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.fspath).startswith(HERE):
            item.add_marker(pytest.mark.gpu)
            if REAL:
                continue
            if not FAKE:
                item.add_marker(pytest.mark.skip(reason=f"no usable GPU: {cuda.status()}"))
            elif item.get_closest_marker("real_gpu") is not None:
                reason = f"needs a real GPU, not the fake device: {cuda.status()}"
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def _fake_device(tmp_path_factory: pytest.TempPathFactory) -> FakeDevice:
    """One fake device for the session (its compiled expression kernels are kept)."""
    return FakeDevice(tmp_path_factory.mktemp("fake_device"))


@pytest.fixture(autouse=True)
def _gpu_or_fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Without a GPU, puts the fake device in place for the test; after the test, surfaces
    errors of asynchronous work in the test that queued it."""
    if FAKE and str(request.node.fspath).startswith(HERE):
        install(monkeypatch, request.getfixturevalue("_fake_device"), keep_kernels=True)
    yield
    if cuda.is_available():
        cuda.synchronize()

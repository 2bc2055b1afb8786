"""Fixtures shared by the package's tests."""
import os

import pytest

DIR = os.environ.get("WORT_TEST_DIR", "/dev/shm")


@pytest.fixture
def path(request):
    """A pool path of the test's own under WORT_TEST_DIR (default /dev/shm), removed before and after."""
    p = os.path.join(DIR, f"wort-pytest-{os.getpid()}-{request.node.name}.pool")
    if os.path.exists(p):
        os.unlink(p)
    yield p
    if os.path.exists(p):
        os.unlink(p)

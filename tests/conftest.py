import copy

import pytest
from helpers import TWO_DEVICES


@pytest.fixture
def two_devices():
    return copy.deepcopy(TWO_DEVICES)

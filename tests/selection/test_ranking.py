"""stable_order is np.argsort(kind="stable")[:top], index for index, on keys with ties, NaN, signed zeros, inf."""
import numpy as np
import pytest

from testbed.selection.ranking import stable_order


def keys(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "ints":
        return rng.integers(0, 4, n)
    x = rng.choice([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], n) if kind == "special" else rng.random(n)
    if kind == "ties":
        x = np.round(x * 5) / 5
    return x


@pytest.mark.parametrize("kind", ["distinct", "ties", "special", "ints"])
def test_the_stable_argsort_for_every_top(kind):
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 37, 500):
        x = keys(rng, n, kind)
        expected = np.argsort(x, kind="stable")
        np.testing.assert_array_equal(stable_order(x), expected)
        for top in {0, 1, n // 3, n // 2, n - 1, n, n + 3}:
            np.testing.assert_array_equal(stable_order(x, top), expected[:max(top, 0)])


def test_a_hand_example():
    #          0    1    2    3    4    5
    x = np.array([2.0, 1.0, 2.0, np.nan, 1.0, 0.0])
    assert stable_order(x).tolist() == [5, 1, 4, 0, 2, 3]
    assert stable_order(x, 3).tolist() == [5, 1, 4]
    assert stable_order(-x, 2).tolist() == [0, 2]

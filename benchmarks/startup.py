"""Start-up: loading each bundled dataset parsed from its package against read from the dataset cache
(testbed/data/cache.py), interleaved in one process, in a temporary cache folder.

    python benchmarks/startup.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from _harness import machine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TESTBED_CACHE_DIR"] = cache
        from testbed.data.digits import load_digits
        from testbed.data.mnist5k import load_mnist5k
        from testbed.data.shakespeare import load_shakespeare

        print(f"{'dataset':<12} {'parsed s':>9} {'cached s':>9} {'ratio':>7}")
        for name, loader in (("mnist5k", load_mnist5k), ("digits", load_digits), ("shakespeare", load_shakespeare)):
            loader()   # builds the cache file; its time is neither side's
            parsed = cached = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                loader.__wrapped__()
                parsed = min(parsed, time.perf_counter() - start)
                start = time.perf_counter()
                loader()
                cached = min(cached, time.perf_counter() - start)
            print(f"{name:<12} {parsed:>9.3f} {cached:>9.3f} {parsed / cached:>6.0f}x")


if __name__ == "__main__":
    main()

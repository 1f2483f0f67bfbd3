#!/usr/bin/env bash
# Fetch, here, the pure-Python wheels (and pydantic_core for CPython 3.12 on x86-64) that benchmarks/gpu_run.sh
# installs on the lent GPU machine, which reaches no registry. Into benchmarks/wheels/ (git-ignored), about 4 MB.
# The versions are the ones the testbed is tested with here; the GPU image already has torch, numpy, pandas,
# matplotlib, scipy, scikit-learn, pyyaml, tqdm, tabulate, portalocker and pillow.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p wheels
pip download --no-deps --only-binary=:all: --disable-pip-version-check --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d wheels \
    pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing_extensions==4.16.0 simpy==4.1.2 yacs==0.1.8 termcolor==3.3.0 mlxtend==0.25.0
# fvcore and iopath are published as source only: build their (pure-Python) wheels here
pip wheel --no-deps --disable-pip-version-check -w wheels fvcore==0.1.5.post20221221 iopath==0.1.10
ls -l wheels

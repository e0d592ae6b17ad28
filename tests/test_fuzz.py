"""A short, fixed-seed run of the mutation fuzzer (tests/fuzz.py) in the normal test suite:
every mutation class on real files, a few cases each, drawn by hypothesis with derandomize
(the same cases on every run; a failure is shrunk and printed with its seed and class).

The long run is a command (docs/reliability.md has its numbers):

    .venv/bin/python -m tests.fuzz --cases 2000 --seed 1
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz

SEEDS = fuzz.available_seeds()
EXAMPLES_PER_CLASS = 2
CLASSES = [c for c in sorted(fuzz.CLASSES) if any(SEEDS.get(k) for k in fuzz.CLASSES[c].kinds)]


@pytest.mark.parametrize("name", CLASSES)
@settings(
    max_examples=EXAMPLES_PER_CLASS,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_real_files_end_cleanly(name, seed):
    """One case of a class per seed: the seed picks the kind of input, the real file, the
    compression around it, the output format and the damage (see fuzz.case_for)."""
    case = fuzz.case_for(name, seed)
    assert case is not None
    with tempfile.TemporaryDirectory(prefix="nsight-doctor-fuzz-") as work:
        outcome = fuzz.run_case(case, Path(work))
    assert outcome.ok, f"{case.label}: {outcome.what}: exit {outcome.rc}: {outcome.problems}: {outcome.stderr}"


def test_every_class_has_a_seed_file_here():
    """Without the corpus some kinds have no seed; the samples still cover every class."""
    assert set(CLASSES) == set(fuzz.CLASSES)

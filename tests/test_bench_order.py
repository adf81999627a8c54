"""The benchmark run times a ratio's two sides back to back (``benchmarks/conftest.py``).

A ratio (jinja2 / apertus-fast, regex / apertus-fast) is only as good as the moment its
two sides share on a shared machine, so the benchmarks of one dialect must run
consecutively, baseline first. Checked on the real collection of ``benchmarks/``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tests.oracle import ORACLE_MISSING

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is a test extra: pip install -e '.[test]'")
if ORACLE_MISSING:
    pytest.skip(f"the benchmarks need the corpus: {ORACLE_MISSING}", allow_module_level=True)


@lru_cache(maxsize=None)
def _collected() -> tuple[str, ...]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tuple(line for line in proc.stdout.splitlines() if "::" in line)


def _split(node: str) -> tuple[str, str, str | None]:
    """(file, function, dialect or None) of a node id such as
    ``benchmarks/f.py::test_x[str-apertus-1]``."""
    path, _, test = node.partition("::")
    m = re.match(r"(\w+)(?:\[(.*)\])?$", test)
    assert m, node
    params = m.group(2) or ""
    dialect = next((p for p in ("apertus-format-reference", "apertus-1.5", "apertus-1")
                    if params == p or params.endswith("-" + p)), None)
    return path, m.group(1), dialect


def test_each_dialect_is_timed_in_one_stretch():
    nodes = [_split(n) for n in _collected()]
    assert len(nodes) >= 30
    for path in dict.fromkeys(p for p, _, _ in nodes):
        seq = [(f, d) for p, f, d in nodes if p == path]
        dialects = [d for _, d in seq]
        # a dialect's tests are contiguous, and tests without a dialect come last
        runs = [d for i, d in enumerate(dialects) if i == 0 or d != dialects[i - 1]]
        assert len(runs) == len(set(runs)), (path, runs)
        assert None not in runs[:-1], (path, runs)
        # within a dialect the functions keep the file's order (baseline before apertus-fast)
        functions = list(dict.fromkeys(f for f, _ in seq))
        for d in set(dialects) - {None}:
            order = [functions.index(f) for f, dd in seq if dd == d]
            assert order == sorted(order), (path, d)


def test_baseline_and_apertus_fast_are_neighbours():
    nodes = [_split(n) for n in _collected()]
    for baseline, ours in (("test_render_jinja2", "test_render_apertus_fast"),
                           ("test_parse_regex", "test_parse_apertus_fast")):
        for d in ("apertus-format-reference", "apertus-1", "apertus-1.5"):
            i = next(k for k, (_, f, dd) in enumerate(nodes) if f == baseline and dd == d)
            j = next(k for k, (_, f, dd) in enumerate(nodes) if f == ours and dd == d)
            # at most the copy floor and minijinja in between
            assert 0 < j - i <= 3, (baseline, ours, d, i, j)

"""Benchmark configuration: puts the repository root on ``sys.path`` (for
``tests.oracle`` and ``benchmarks.corpus``) and records the machine and the
apertus-fast backend in pytest-benchmark's ``machine_info``.

Benchmarks are not part of the test run (``testpaths = ["tests"]``); run them with
``PYTHONPATH=src python -m pytest benchmarks`` or ``python benchmarks/report.py``.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
for p in (str(_REPO), str(_REPO / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_details() -> str:
    """CPU family / model and cache sizes (Linux; "" elsewhere). "AMD EPYC, 2 cores"
    says little, and the render benchmark is bound by memory latency far more than
    jinja2 is, so its ratios move with the caches (and with the host's other load)."""
    parts = []
    try:
        fields = {}
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        if "cpu family" in fields:
            parts.append(f"family {fields['cpu family']} model {fields.get('model', '?')}")
    except OSError:
        pass
    caches = []
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")) if base.is_dir() else []:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            caches.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    if caches:
        parts.append(", ".join(caches))
    return "; ".join(parts)


def apertus_fast_backend() -> str:
    try:
        import apertus_fast
    except ImportError as exc:
        return f"not importable ({exc})"
    backend = getattr(apertus_fast, "BACKEND", None)
    if backend is None:
        return "unknown (no apertus_fast.BACKEND)"
    detail = getattr(apertus_fast, "backends", None)
    if callable(detail):
        try:
            return f"{backend} {detail()}"
        except Exception:  # noqa: BLE001 - informational only
            pass
    return str(backend)


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["cpu_model"] = cpu_model()
    machine_info["cpu_count"] = os.cpu_count()
    machine_info["cpu_details"] = cpu_details()
    machine_info["apertus_fast_backend"] = apertus_fast_backend()


def pytest_report_header(config):
    return [f"cpu: {cpu_model()} x{os.cpu_count()}", f"apertus_fast backend: {apertus_fast_backend()}"]


def pytest_collection_modifyitems(session, config, items):
    """Time each dialect's benchmarks back to back, dialect after dialect.

    pytest's own order runs a test function for every dialect before the next function,
    so jinja2 rendering one dialect and apertus-fast rendering it were timed about a
    minute apart. On a shared machine the state drifts on that scale (in one run the
    apertus-1 ratio read 51x, and 74x when the two were timed alternately a minute
    later), and a ratio is only as good as the moment its two sides share. Within a
    file, the tests keep their order per dialect (baseline, floor, apertus-fast);
    tests without a dialect stay after them. The command-line benchmarks group by their
    ``command`` parameter the same way."""
    first_of_file: dict = {}
    dialects: dict = {}

    def key(pair):
        i, item = pair
        path = str(getattr(item, "path", item.fspath))
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        dialect = params.get("dialect", params.get("command"))
        rank = dialects.setdefault(dialect, len(dialects)) if dialect is not None else float("inf")
        return (first_of_file.setdefault(path, i), rank, i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]

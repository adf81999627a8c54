"""The command line on a bulk JSONL file: ``apertus-fast render`` and ``parse``.

The data (group ``cli <command>``): the apertus-1.5 corpus (``corpus.py``) written
``CLI_REPEAT`` times over as JSONL, one conversation a line, for ``render``; its
rendered texts, one JSON string a line, for ``parse``. ``render-world`` and
``parse-world`` do the same with the corpus's "world" language mix (prose in Cyrillic,
CJK, Arabic, Devanagari, Greek: 2-3 bytes of UTF-8 a letter), where reading and writing
JSON is a character-by-character job for the json module and for a naive compiled
reader alike. Outputs go to ``/dev/null`` (written in place: no temp file and no
fsync, so the disk is not timed).

* baseline: **the loop a user writes** with the json module: ``json.loads`` a line,
  ``apertus_fast.render`` (or ``parse(...).to_dict()``), ``json.dumps(...,
  ensure_ascii=False)``, encode and write.
* ``apertus-fast <command> -j 1``: the command in one process (``cli.main``), which
  adds the per-line checks, error reporting and counting, and writes its JSON lines
  with the compiled encoder (``_jsonl``).
* ``apertus-fast <command> -j N``: with N worker processes (N = the CPUs this process
  may use, at least 2), to show how the command scales on this machine.

``extra_info``: ``lines``, ``bytes`` (input bytes), ``jobs``; ``report.py`` turns them
into rates.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

import pytest

from tests.oracle import ORACLE_MISSING

if ORACLE_MISSING:  # the corpus is validated with the official templates
    pytest.skip(f"no corpus: {ORACLE_MISSING}", allow_module_level=True)

from corpus import DATE, corpus, rendered

DIALECT = "apertus-1.5"
#: Times the 2,000-conversation corpus is repeated in the input file.
CLI_REPEAT = 5


def _workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return max(n, 2)


#: The benchmarked commands: (command, the corpus's language mix).
COMMANDS = {"render": ("render", "swiss"), "parse": ("parse", "swiss"),
            "render-world": ("render", "world"), "parse-world": ("parse", "world")}


@lru_cache(maxsize=None)
def _files(tmp: str) -> dict:
    files = {}
    for mix in ("swiss", "world"):
        suffix = "" if mix == "swiss" else "-" + mix
        conv = os.path.join(tmp, f"conversations{suffix}.jsonl")
        with open(conv, "w", encoding="utf-8") as f:
            for _ in range(CLI_REPEAT):
                for it in corpus(DIALECT, mix=mix):
                    f.write(json.dumps({"messages": it["messages"], "tools": it["tools"],
                                        "enable_thinking": it["enable_thinking"],
                                        "add_generation_prompt": it["add_generation_prompt"]},
                                       ensure_ascii=False) + "\n")
        texts = os.path.join(tmp, f"rendered{suffix}.jsonl")
        with open(texts, "w", encoding="utf-8") as f:
            for _ in range(CLI_REPEAT):
                for t in rendered(DIALECT, mix=mix):
                    f.write(json.dumps(t, ensure_ascii=False) + "\n")
        files["render" + suffix], files["parse" + suffix] = conv, texts
    return files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _files(str(tmp_path_factory.mktemp("cli")))


def _setup(benchmark, command, engine, path, jobs):
    with open(path, "rb") as f:
        data = f.read()
    benchmark.group = f"cli {command}"
    benchmark.extra_info.update(kind="cli", engine=engine, dialect=command, jobs=jobs,
                                lines=data.count(b"\n"), bytes=len(data))


def _loop(command, path, out_path=os.devnull):
    from apertus_fast import parse, render

    command = COMMANDS[command][0]
    loads, dumps = json.loads, json.dumps
    with open(path, "rb") as f, open(out_path, "wb") as out:
        for line in f:
            value = loads(line)
            if command == "render":
                result = render(value["messages"], dialect=DIALECT, tools=value.get("tools"),
                                enable_thinking=value.get("enable_thinking", False),
                                add_generation_prompt=value.get("add_generation_prompt", False),
                                date=DATE)
            else:
                result = parse(value, dialect=DIALECT).to_dict()
            out.write((dumps(result, ensure_ascii=False) + "\n").encode("utf-8"))


def _argv(command, path, jobs, out=os.devnull):
    command = COMMANDS[command][0]
    argv = [command, path, "-o", out, "--dialect", DIALECT, "-q", "-j", str(jobs)]
    return argv + (["--date", DATE] if command == "render" else [])


@lru_cache(maxsize=None)
def _expected(command, path) -> bytes:
    out = path + ".loop.out"
    _loop(command, path, out)
    with open(out, "rb") as f:
        return f.read()


def _gate(command, path, jobs):
    """The command writes exactly what the loop writes."""
    from apertus_fast import cli

    out = f"{path}.j{jobs}.out"
    assert cli.main(_argv(command, path, jobs, out)) == 0
    with open(out, "rb") as f:
        assert f.read() == _expected(command, path)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_loop(benchmark, files, command):
    _setup(benchmark, command, "json loop", files[command], 1)
    benchmark(_loop, command, files[command])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_one_process(benchmark, files, command):
    from apertus_fast import cli

    _setup(benchmark, command, "apertus-fast -j 1", files[command], 1)
    _gate(command, files[command], 1)
    benchmark(cli.main, _argv(command, files[command], 1))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_workers(benchmark, files, command):
    from apertus_fast import cli

    jobs = _workers()
    _setup(benchmark, command, "apertus-fast -j N", files[command], jobs)
    _gate(command, files[command], jobs)
    benchmark(cli.main, _argv(command, files[command], jobs))

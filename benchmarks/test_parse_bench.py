"""Lexer and parser speed.

Lexer (group ``lex <dialect>``), over the concatenation of the rendered corpus:

* floor: ``str.count("<|")`` / ``bytes.count(b"<|")`` over the same data: one pass that
  only finds where special tokens may start; no lexer can beat it by much. Goal: the
  lexer (``apertus_fast._lex.scan``, the flat ``(kind, start, end)`` buffer) within
  1.5x of the floor, on ``str`` and on UTF-8 ``bytes``.
* ``apertus_fast.lex`` (``Event`` objects) is measured too, for information.

Parser (group ``parse <dialect>``), conversation by conversation over the corpus:

* baseline: the reference package's ``parse_conversation`` approach (three regexes:
  strip BOS, ``re.search`` the system section, ``re.finditer`` user turns,
  ``re.finditer`` assistant turns up to ``<|assistant_end|>`` or the end; ``.strip()``
  each), re-implemented below; it builds plain dicts where the reference builds
  ``Message`` objects (which only flatters the baseline).
* ``apertus_fast.parse(text, dialect=...).messages``. Goal: at least 5x the baseline
  (while recovering the full structure the regexes lose).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from tests.oracle import ORACLE_MISSING

if ORACLE_MISSING:  # the corpus is validated with the official templates
    pytest.skip(f"no corpus: {ORACLE_MISSING}", allow_module_level=True)

from corpus import DIALECTS, rendered

BOS = "<s>"
SYSTEM_START, SYSTEM_END = "<|system_start|>", "<|system_end|>"
USER_START, USER_END = "<|user_start|>", "<|user_end|>"
ASSISTANT_START, ASSISTANT_END = "<|assistant_start|>", "<|assistant_end|>"


def regex_parse(formatted_text: str) -> list[dict]:
    """The reference package's three-regex parse (same patterns, flags and order)."""
    text = formatted_text
    if text.startswith(BOS):
        text = text[len(BOS):]
    messages = []
    system = re.search(f"{re.escape(SYSTEM_START)}(.*?){re.escape(SYSTEM_END)}", text, re.DOTALL)
    if system:
        content = system.group(1).strip()
        if content:
            messages.append({"role": "system", "content": content})
    for m in re.finditer(f"{re.escape(USER_START)}(.*?){re.escape(USER_END)}", text, re.DOTALL):
        messages.append({"role": "user", "content": m.group(1).strip()})
    for m in re.finditer(f"{re.escape(ASSISTANT_START)}(.*?)(?={re.escape(ASSISTANT_END)}|$)", text, re.DOTALL):
        messages.append({"role": "assistant", "content": m.group(1).strip()})
    return messages


class Data:
    def __init__(self, dialect: str):
        self.dialect = dialect
        self.texts = rendered(dialect)
        self.text = "".join(self.texts)
        self.data = self.text.encode("utf-8")
        self.nbytes = len(self.data)
        self.n = len(self.texts)

    def special_tokens(self) -> int:
        """How many special tokens the lexer must find: every token of the dialect (none
        overlap), but ``<s>`` only as the very first thing (BOS; the later ones that the
        concatenation leaves inside the text are text)."""
        from apertus_fast._dialects import get_dialect

        toks = [t for t in get_dialect(self.dialect).tokens if t != BOS]
        return sum(self.text.count(t) for t in toks) + self.text.startswith(BOS)


@lru_cache(maxsize=None)
def data(dialect: str) -> Data:
    return Data(dialect)


def _setup(benchmark, d: Data, kind: str, engine: str, **extra):
    benchmark.group = f"{kind} {d.dialect}"
    benchmark.extra_info.update(kind=kind, engine=engine, dialect=d.dialect, conversations=d.n,
                                bytes=d.nbytes, **extra)


def _import(module: str, name: str):
    try:
        mod = __import__(f"apertus_fast.{module}", fromlist=[name])
    except ImportError as exc:
        pytest.skip(f"apertus_fast.{module} is not importable: {exc}")
    fn = getattr(mod, name, None)
    if fn is None:
        pytest.skip(f"apertus_fast.{module}.{name} does not exist")
    return fn


# --------------------------------------------------------------------------- lexer

@pytest.mark.parametrize("dialect", DIALECTS)
def test_lex_floor_str(benchmark, dialect):
    d = data(dialect)
    _setup(benchmark, d, "lex", "floor str.count", input="str")
    text = d.text
    benchmark(lambda: text.count("<|"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lex_floor_bytes(benchmark, dialect):
    d = data(dialect)
    _setup(benchmark, d, "lex", "floor bytes.count", input="bytes")
    raw = d.data
    benchmark(lambda: raw.count(b"<|"))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_lex_scan(benchmark, dialect, kind):
    scan = _import("_lex", "scan")
    d = data(dialect)
    payload = d.text if kind == "str" else d.data
    buf = scan(payload, dialect)
    tokens = d.special_tokens()
    found = sum(1 for k in buf[0::3] if k != 0)  # kind 0 is TEXT
    assert found == tokens, f"scan found {found} special tokens, the text has {tokens}"
    assert buf[-1] == len(payload), "scan did not reach the end of the input"
    _setup(benchmark, d, "lex", f"apertus-fast scan {kind}", input=kind, events=len(buf) // 3)
    benchmark(scan, payload, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_lex_events(benchmark, dialect, kind):
    lex = _import("_lex", "lex")
    d = data(dialect)
    payload = d.text if kind == "str" else d.data
    events = lex(payload, dialect=dialect)
    _setup(benchmark, d, "lex", f"apertus-fast lex {kind}", input=kind, events=len(events))
    benchmark(lex, payload, dialect=dialect)


# --------------------------------------------------------------------------- parser

@pytest.mark.parametrize("dialect", DIALECTS)
def test_parse_regex(benchmark, dialect):
    d = data(dialect)
    _setup(benchmark, d, "parse", "reference regex")
    texts = d.texts
    benchmark(lambda: [regex_parse(t) for t in texts])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_parse_apertus_fast(benchmark, dialect):
    parse = _import("_parse", "parse")
    d = data(dialect)
    texts = d.texts
    failures = []
    for i, t in enumerate(texts):
        try:
            parse(t, dialect=dialect).messages
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append((i, f"{type(exc).__name__}: {exc}"))
    assert not failures, (f"apertus_fast.parse (strict) fails on {len(failures)}/{d.n} rendered "
                          f"conversations of {dialect}; first: #{failures[0][0]} {failures[0][1][:500]}")
    _setup(benchmark, d, "parse", "apertus-fast parse")
    benchmark(lambda: [parse(t, dialect=dialect).messages for t in texts])

"""Rendering speed: apertus-fast against the official templates.

For every dialect, one benchmark round renders the whole corpus (``corpus.py``):

* ``jinja2`` (baseline): the official template compiled once in its real environment
  (``tests.oracle.compiled``), rendered with the variables the real callers pass.
* ``minijinja``: the same template in minijinja (Rust) with the same environment options;
  timed only if it renders every conversation identically, otherwise skipped with the
  reason (count and first difference).
* ``apertus-fast``: ``apertus_fast.render``; gated on byte equality with jinja2 over the
  whole corpus before timing.
* ``floor copy`` (not a renderer): copying each rendered string once; jinja2 / floor is
  the ceiling of any renderer's speed-up on this corpus.

And, for the reference dialect, the drop-in formatter (group ``formatter``) on a subset:

* ``reference approach`` (baseline): what the reference package does per conversation:
  ``ApertusFormatter(...)`` reads and compiles the template in its constructor, then
  renders (emulated as ``jinja2.Template(open(file).read()).render(...)``).
* ``apertus-fast ApertusFormatter``: ``ApertusFormatter(...).format_conversation(conv)``
  per conversation (constructor included).

``extra_info`` of each benchmark: ``kind``, ``engine``, ``dialect``, ``conversations``,
``bytes`` (UTF-8 bytes rendered per round); ``report.py`` turns them into rates.
"""

from __future__ import annotations

import datetime as _dt
import time
from functools import lru_cache

import pytest

from tests.oracle import ORACLE_MISSING

if ORACLE_MISSING:  # the corpus is validated with the official templates
    pytest.skip(f"no corpus: {ORACLE_MISSING}", allow_module_level=True)

from corpus import DATE, DIALECTS, corpus, rendered
from tests.oracle import TEMPLATES, DIALECT_FILES, compiled, hf_tojson, template_source

#: Conversations of the reference corpus used by the formatter benchmark (every k-th item).
FORMATTER_N = 100
#: Rounds of the formatter benchmark (the reference approach compiles the template per
#: conversation: ~25 ms each, so a round takes seconds).
FORMATTER_ROUNDS = 3


def _raise_exception(message):
    raise RuntimeError(message)


def _fixed_strftime(fmt, _d=_dt.datetime.fromisoformat(DATE + "T12:00:00")):
    return _d.strftime(fmt)


def _template_variables(item: dict, dialect: str, strftime_now=_fixed_strftime) -> dict:
    """The variables the dialect's real caller passes (as ``tests.oracle.oracle_render``)."""
    v = dict(
        bos_token="<s>",
        messages=item["messages"],
        tools=item["tools"],
        enable_thinking=item["enable_thinking"],
        add_generation_prompt=item["add_generation_prompt"],
        raise_exception=_raise_exception,
        strftime_now=strftime_now,
    )
    if dialect == "apertus-format-reference":
        v["tojson"] = hf_tojson  # passed as a variable by the reference package (unused)
        if v["tools"] is None:
            v["tools"] = []
    else:
        v["continue_assistant_message"] = False
    return v


class Case:
    def __init__(self, dialect: str):
        self.dialect = dialect
        self.items = corpus(dialect)
        self.texts = rendered(dialect)
        self.n = len(self.items)
        self.nbytes = sum(len(t.encode("utf-8")) for t in self.texts)
        self.variables = [_template_variables(it, dialect) for it in self.items]
        self.render_args = [(it["messages"], it["tools"], it["enable_thinking"], it["add_generation_prompt"])
                            for it in self.items]


@lru_cache(maxsize=None)
def case(dialect: str) -> Case:
    return Case(dialect)


def _first_difference(a: str, b: str) -> str:
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at char {k}: expected {a[max(0, k - 40):k + 40]!r}, got {b[max(0, k - 40):k + 40]!r}"


def render_all(render, args, dialect: str) -> list:
    """``render`` (or ``render_with_spans``) of every conversation of ``Case.render_args``,
    called as the README and the command line call it: keyword arguments written out.
    (``render(m, **kw)`` with a prepared dict per conversation costs 0.2-0.3 µs more per
    call, all of it CPython copying and unpacking the dict, about 5 % of a render.)"""
    return [render(m, dialect=dialect, tools=t, enable_thinking=e, add_generation_prompt=g, date=DATE)
            for m, t, e, g in args]


def _mismatches(expected, got):
    assert len(expected) == len(got)
    return [i for i, (a, b) in enumerate(zip(expected, got)) if a != b]


def _setup(benchmark, c: Case, engine: str, kind: str = "render", n=None, nbytes=None):
    benchmark.group = f"{kind} {c.dialect}"
    benchmark.extra_info.update(kind=kind, engine=engine, dialect=c.dialect,
                                conversations=c.n if n is None else n,
                                bytes=c.nbytes if nbytes is None else nbytes)


# --------------------------------------------------------------------------- render

@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_jinja2(benchmark, dialect):
    c = case(dialect)
    _setup(benchmark, c, "jinja2")
    tpl = compiled(dialect)
    variables = c.variables

    def run():
        return [tpl.render(**v) for v in variables]

    out = benchmark(run)
    bad = _mismatches(c.texts, out)
    assert not bad, f"jinja2 baseline differs from the oracle on {len(bad)} conversations"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_floor_copy(benchmark, dialect):
    """Not a renderer: copies every rendered string once (``t[1:]``, a memcpy of the
    PEP 393 buffer). No renderer can produce the output faster than this, so
    jinja2 / floor is the highest speed-up attainable on this corpus."""
    c = case(dialect)
    _setup(benchmark, c, "floor copy")
    texts = c.texts
    benchmark(lambda: [t[1:] for t in texts])


def _minijinja_env(dialect: str):
    import minijinja

    ref = dialect == "apertus-format-reference"
    # The reference package renders with jinja2's defaults (no trim/lstrip; built-in
    # tojson); Hugging Face adds trim_blocks/lstrip_blocks and its own tojson filter.
    env = minijinja.Environment(trim_blocks=not ref, lstrip_blocks=not ref)
    if not ref:
        env.add_filter("tojson", hf_tojson)
    env.add_template("chat", template_source(dialect))
    return env


def _minijinja_difference_hint(a: str, b: str) -> str:
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if a[k:k + 2] == ".0" and not b[k:k + 1].isdigit():
        return "minijinja hands integral floats such as 30.0 to Python filters as ints"
    if a[max(0, k - 300):k].rfind("default: {") >= 0:
        return "minijinja's built-in tojson keeps key order; jinja2's sorts keys"
    return "cause not classified"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_minijinja(benchmark, dialect):
    try:
        import minijinja  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"minijinja not installed ({exc}); pip install minijinja")
    c = case(dialect)
    try:
        env = _minijinja_env(dialect)
    except Exception as exc:  # noqa: BLE001 - template not supported
        pytest.skip(f"minijinja cannot compile the {dialect} template: {exc}")
    variables = c.variables

    def run():
        return [env.render_template("chat", **v) for v in variables]

    t0 = time.perf_counter()
    try:
        out = run()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"minijinja fails to render the {dialect} corpus: {type(exc).__name__}: {exc}")
    once = time.perf_counter() - t0
    bad = _mismatches(c.texts, out)
    if bad:
        i = bad[0]
        pytest.skip(
            f"minijinja is not identical on {dialect}: {len(bad)}/{c.n} conversations differ "
            f"({_minijinja_difference_hint(c.texts[i], out[i])}; first: #{i} "
            f"{_first_difference(c.texts[i], out[i])}); not timed. "
            f"One unverified pass: {once:.3f} s ({c.n / once:,.0f} conversations/s)"
        )
    _setup(benchmark, c, "minijinja")
    benchmark(run)


def _import_render():
    try:
        from apertus_fast._render import render
    except ImportError as exc:
        pytest.skip(f"apertus_fast._render is not importable: {exc}")
    return render


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_apertus_fast(benchmark, dialect):
    render = _import_render()
    c = case(dialect)
    args = c.render_args
    # Correctness gate: byte equality with jinja2 on the whole corpus, before timing.
    out = render_all(render, args, dialect)
    bad = _mismatches(c.texts, out)
    assert not bad, (f"apertus-fast differs from jinja2 on {len(bad)}/{c.n} conversations of {dialect}; "
                     f"first #{bad[0]} {_first_difference(c.texts[bad[0]], out[bad[0]])}")
    _setup(benchmark, c, "apertus-fast")

    def run():
        return render_all(render, args, dialect)

    benchmark(run)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_with_spans(benchmark, dialect):
    """``render_with_spans`` (group ``spans``): the text and its loss-mask spans (on
    ``render``'s hot path, which records where the spans start and stop). Compared with
    jinja2 and ``render`` of the same run by ``report.py``."""
    try:
        from apertus_fast import render_with_spans
    except ImportError as exc:
        pytest.skip(f"apertus_fast.render_with_spans is not importable: {exc}")
    c = case(dialect)
    args = c.render_args
    out = [r.text for r in render_all(render_with_spans, args, dialect)]
    bad = _mismatches(c.texts, out)
    assert not bad, f"render_with_spans differs from jinja2 on {len(bad)}/{c.n} conversations of {dialect}"
    _setup(benchmark, c, "apertus-fast render_with_spans", kind="spans")

    def run():
        return render_all(render_with_spans, args, dialect)

    benchmark(run)


# --------------------------------------------------------------------------- tools seen once

#: Rounds of the apertus-fast benchmark with every tool new (each round starts from an
#: empty tool cache, so it cannot calibrate its own round count).
FRESH_TOOLS_ROUNDS = 40


def _clear_tool_caches():
    """Empty the hot path's tool cache and the general path's memo (where built)."""
    from apertus_fast import _render

    try:
        from apertus_fast._render_fast import clear_tool_cache
    except ImportError:
        pass
    else:
        clear_tool_cache()
    _render._TOOL_CACHE.clear()
    _render._tool_cache_bytes = 0


class FreshTools:
    """The corpus's conversations that have tools, every tool renamed ``<name>_<k>``
    (``k`` the conversation's index) so that no tool occurs twice: a tool-calling
    dataset, whose conversations list their own APIs. jinja2 renders every tool of every
    conversation anyway; apertus-fast starts each round with its tool cache empty, so
    every tool is a miss (its signature written, then cached)."""

    def __init__(self, dialect: str):
        import copy

        self.dialect = dialect
        self.items = []
        for k, item in enumerate(corpus(dialect)):
            if not item["tools"]:
                continue
            item = copy.deepcopy(item)
            for tool in item["tools"]:
                spec = tool["function"] if "function" in tool else tool
                spec["name"] = f"{spec['name']}_{k}"
            self.items.append(item)
        self.n = len(self.items)
        self.tools = sum(len(it["tools"]) for it in self.items)
        self.variables = [_template_variables(it, dialect) for it in self.items]
        tpl = compiled(dialect)
        self.texts = [tpl.render(**v) for v in self.variables]   # jinja2 is the oracle
        self.nbytes = sum(len(t.encode("utf-8")) for t in self.texts)
        self.render_args = [(it["messages"], it["tools"], it["enable_thinking"], it["add_generation_prompt"])
                            for it in self.items]


@lru_cache(maxsize=None)
def fresh_tools(dialect: str) -> FreshTools:
    return FreshTools(dialect)


def _setup_fresh(benchmark, c: FreshTools, engine: str):
    benchmark.group = f"fresh-tools {c.dialect}"
    benchmark.extra_info.update(kind="fresh-tools", engine=engine, dialect=c.dialect,
                                conversations=c.n, bytes=c.nbytes, tools=c.tools)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_fresh_tools_jinja2(benchmark, dialect):
    c = fresh_tools(dialect)
    _setup_fresh(benchmark, c, "jinja2")
    tpl = compiled(dialect)
    variables = c.variables
    benchmark(lambda: [tpl.render(**v) for v in variables])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_fresh_tools_apertus_fast(benchmark, dialect):
    """Every tool a cache miss: the tool caches are emptied before each round."""
    render = _import_render()
    c = fresh_tools(dialect)
    args = c.render_args
    _clear_tool_caches()
    out = render_all(render, args, dialect)
    bad = _mismatches(c.texts, out)
    assert not bad, (f"apertus-fast differs from jinja2 on {len(bad)}/{c.n} conversations with fresh tools of "
                     f"{dialect}; first #{bad[0]} {_first_difference(c.texts[bad[0]], out[bad[0]])}")
    _setup_fresh(benchmark, c, "apertus-fast")
    benchmark.pedantic(lambda: render_all(render, args, dialect), setup=_clear_tool_caches,
                       rounds=FRESH_TOOLS_ROUNDS, warmup_rounds=1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_render_fresh_tools_cached(benchmark, dialect):
    """The same conversations with their tools in the cache (every tool a hit): what
    the misses above cost."""
    render = _import_render()
    c = fresh_tools(dialect)
    args = c.render_args
    _clear_tool_caches()
    for _ in range(2):   # (a name met once is not cached: the second time caches it)
        render_all(render, args, dialect)
    _setup_fresh(benchmark, c, "apertus-fast cached")
    benchmark(lambda: render_all(render, args, dialect))


# --------------------------------------------------------------------------- formatter

REFERENCE = "apertus-format-reference"


def _formatter_subset():
    c = case(REFERENCE)
    step = max(1, c.n // FORMATTER_N)
    items = c.items[::step][:FORMATTER_N]
    return c, items


def _reference_approach(items):
    path = TEMPLATES / DIALECT_FILES[REFERENCE]

    def strftime_now(fmt):
        return _dt.datetime.now().strftime(fmt)

    variables = [_template_variables(it, REFERENCE, strftime_now) for it in items]

    def run():
        import jinja2

        out = []
        for v in variables:
            # ApertusFormatter.__init__ of the reference package: read + compile.
            with open(path, encoding="utf-8") as f:
                template = jinja2.Template(f.read())
            out.append(template.render(**v))
        return out

    return run


def test_formatter_reference_approach(benchmark):
    c, items = _formatter_subset()
    run = _reference_approach(items)
    _setup(benchmark, c, "reference approach", kind="formatter", n=len(items),
           nbytes=sum(len(t.encode()) for t in run()))
    benchmark.pedantic(run, rounds=FORMATTER_ROUNDS, iterations=1)


def test_formatter_apertus_fast(benchmark):
    try:
        from apertus_fast._formatter import ApertusFormatter
        from apertus_fast._models import Conversation
    except ImportError as exc:
        pytest.skip(f"apertus_fast.ApertusFormatter is not importable: {exc}")
    c, items = _formatter_subset()
    jobs = [(it["enable_thinking"], it["tools"], Conversation.from_dict({"messages": it["messages"]}),
             it["add_generation_prompt"]) for it in items]

    def run():
        return [ApertusFormatter(enable_thinking=t, tools=tools).format_conversation(conv, add_generation_prompt=g)
                for t, tools, conv, g in jobs]

    expected = _reference_approach(items)()
    out = run()
    bad = _mismatches(expected, out)
    assert not bad, (f"ApertusFormatter differs from the reference approach on {len(bad)}/{len(items)}; "
                     f"first #{bad[0]} {_first_difference(expected[bad[0]], out[bad[0]])}")
    _setup(benchmark, c, "apertus-fast ApertusFormatter", kind="formatter", n=len(items),
           nbytes=sum(len(t.encode()) for t in out))
    benchmark(run)


# --------------------------------------------------------------------------- mask

#: Characters a token covers in the token-mask benchmark (about a token's share of
#: English prose; the corpus's texts are cut into tokens of this many characters).
MASK_TOKEN_CHARS = 4


@lru_cache(maxsize=None)
def _mask_cases():
    """(spans, offsets) of every conversation of the apertus-1.5 corpus: its spans as
    ``render_with_spans`` gives them, and offsets of MASK_TOKEN_CHARS-character tokens
    in a list of tuples, as a fast tokenizer's ``offset_mapping``."""
    from apertus_fast import render_with_spans

    dialect = "apertus-1.5"
    cases = []
    for m, t, e, g in case(dialect).render_args:
        r = render_with_spans(m, dialect=dialect, tools=t, enable_thinking=e, add_generation_prompt=g,
                              date=DATE)
        n = len(r.text)
        cases.append((r.spans, [(i, min(i + MASK_TOKEN_CHARS, n)) for i in range(0, n, MASK_TOKEN_CHARS)]))
    return cases


def _interpreted_mask():
    """``_mask.token_mask`` run from its source by the interpreter, as a pure-Python
    install runs it."""
    from tests.fresh import source_module

    return source_module("_mask").token_mask


def _bench_mask(benchmark, engine, token_mask):
    cases = _mask_cases()
    expected = [_interpreted_mask()(s, o) for s, o in cases]
    assert [token_mask(s, o) for s, o in cases] == expected
    benchmark.group = "mask apertus-1.5"
    benchmark.extra_info.update(kind="mask", engine=engine, dialect="apertus-1.5", conversations=len(cases),
                                tokens=sum(len(o) for _, o in cases))
    benchmark(lambda: [token_mask(s, o) for s, o in cases])


def test_mask_interpreted(benchmark):
    """Baseline: ``Rendered.token_mask``'s loop interpreted (its source, as a
    pure-Python install runs it)."""
    _bench_mask(benchmark, "interpreted", _interpreted_mask())


def test_mask_apertus_fast(benchmark):
    """``Rendered.token_mask``'s loop as the package runs it (compiled by Cython where
    a compiler was available)."""
    from apertus_fast._mask import token_mask
    _bench_mask(benchmark, "apertus-fast", token_mask)

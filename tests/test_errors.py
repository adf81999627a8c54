"""Errors cross process boundaries intact.

Training pipelines render and parse in worker processes (``multiprocessing``,
``concurrent.futures``), which pickle a worker's exception and unpickle it in the
parent. An exception class whose ``__init__`` cannot be called with ``self.args``
fails there, in the parent, and ``multiprocessing.Pool`` then waits forever for a
result that never arrives; so every error class must pickle, and come back with all
its attributes.
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_fast import ApertusError, ApertusFormatter, Conversation, Message, ParseError
from apertus_fast import RenderError, parse, render
from apertus_fast._io import JsonlError, read_jsonl
from tests.fresh import run_python

BAD_TEXT = "<s><|user_start|>x"
BAD_MESSAGES = [{"role": "user", "content": "q"}, {"role": "developer", "content": "x"}]


def _parse_error() -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(BAD_TEXT, strict=True)
    return info.value


def _render_error() -> RenderError:
    with pytest.raises(RenderError) as info:
        render(BAD_MESSAGES)
    return info.value


def _jsonl_error(tmp_path) -> JsonlError:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(JsonlError) as info:
        list(read_jsonl(str(path)))
    return info.value


def _formatter_error() -> RenderError:
    conv = Conversation([Message.system("s"), Message.tool("x")])
    with pytest.raises(RenderError) as info:
        ApertusFormatter().format_conversation(conv)
    return info.value


def _same(a: BaseException, b: BaseException) -> None:
    assert type(a) is type(b)
    assert a.args == b.args
    assert str(a) == str(b)
    assert vars(a) == vars(b)


def _errors(tmp_path):
    return [_parse_error(), _render_error(), _jsonl_error(tmp_path), _formatter_error()]


def test_error_attributes_are_what_the_tests_below_compare(tmp_path):
    parse_err, render_err, jsonl_err, _ = _errors(tmp_path)
    assert (parse_err.line, parse_err.column, parse_err.offset) == (1, 4, 3)
    assert parse_err.expected == "<|system_start|>"
    assert (render_err.message_index, render_err.reason.split(":")[0]) == (1, "Invalid message role")
    assert jsonl_err.lineno == 2 and jsonl_err.name.endswith("bad.jsonl")
    assert isinstance(jsonl_err, ApertusError) and isinstance(jsonl_err, ValueError)


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_errors_pickle_with_their_attributes(tmp_path, protocol):
    for err in _errors(tmp_path):
        _same(err, pickle.loads(pickle.dumps(err, protocol)))


def test_errors_copy(tmp_path):
    for err in _errors(tmp_path):
        _same(err, copy.copy(err))
        _same(err, copy.deepcopy(err))


def test_errors_unpickle_in_a_fresh_process(tmp_path):
    # The formatter's error class is built on first use; a process that has not
    # raised one yet must still find it by name.
    blob = pickle.dumps(_errors(tmp_path))
    code = (
        "import pickle, sys\n"
        "errs = pickle.loads(sys.stdin.buffer.read())\n"
        "for e in errs:\n"
        "    print(type(e).__name__, sorted(vars(e)), e.args[0].splitlines()[0])\n"
    )
    lines = run_python(code, input=blob).stdout.decode().splitlines()
    assert [line.split(" ")[0] for line in lines] == [
        "ParseError", "RenderError", "JsonlError",
        "TemplateRenderError" if _jinja2_importable() else "RenderError",
    ]
    assert lines[0].startswith(
        "ParseError ['column', 'excerpt', 'expected', 'found', 'line', 'offset', 'reason'] "
        "missing system block at line 1, column 4")


def _jinja2_importable() -> bool:
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return False
    return True


def _parse_in_worker(text):
    return parse(text, strict=True).messages


def _render_in_worker(messages):
    return render(messages, date="2026-01-01")


def test_worker_errors_reach_the_parent_of_a_pool():
    # The regression this guards against hung: get() times out instead. "spawn": forking
    # a multi-threaded process (a pytest-xdist worker) may deadlock the child.
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        good = pool.apply_async(_parse_in_worker, (render([{"role": "user", "content": "q"}],
                                                          date="2026-01-01"),))
        assert good.get(timeout=60) == [{"role": "user", "content": "q"}]
        with pytest.raises(ParseError) as info:
            pool.apply_async(_parse_in_worker, (BAD_TEXT,)).get(timeout=60)
        assert (info.value.line, info.value.column, info.value.offset) == (1, 4, 3)
        with pytest.raises(RenderError) as info:
            pool.apply_async(_render_in_worker, (BAD_MESSAGES,)).get(timeout=60)
        assert info.value.message_index == 1


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab\n\r😀", max_size=40), data=st.data())
def test_lines_finds_what_counting_the_text_finds(text, data):
    """``Lines`` (the lenient builder's line index: one pass, then a binary search per
    warning, where counting the text before each warning again was quadratic) gives
    the line and column ``ParseError.at`` counts."""
    from apertus_fast._errors import Lines

    lines = Lines(text)
    for offset in data.draw(st.lists(st.integers(0, len(text)), max_size=8)):
        counted = ParseError.at(text, offset, "r")
        indexed = ParseError.at(text, offset, "r", lines=lines)
        assert (indexed.line, indexed.column) == (counted.line, counted.column)
        assert str(indexed) == str(counted)


def test_the_error_types_the_readme_names():
    """README, "Parsing": which arguments raise RenderError, TypeError, ValueError."""
    from apertus_fast import StreamParser, lex

    user = [{"role": "user", "content": "q"}]
    for kwargs in (dict(messages=None), dict(messages=user, date=20240101),
                   dict(messages=user, tools_text=5), dict(messages=user, tools=5)):
        with pytest.raises(RenderError):
            render(**kwargs)
    for call in (lambda: parse(None), lambda: lex(None), lambda: StreamParser().feed(5)):
        with pytest.raises(TypeError):
            call()
    for call in (lambda: render(user, dialect="apertus-2"), lambda: parse("", dialect="x"),
                 lambda: lex("", dialect="x"), lambda: StreamParser("x")):
        with pytest.raises(ValueError, match="unknown dialect"):
            call()


def test_dialect_none_before_any_render_is_an_error_not_a_crash():
    """The hot path remembers the last dialect name it looked up, None before the
    first: dialect=None as a process's first render read that empty slot (SIGSEGV)."""
    run = run_python(
        "import apertus_fast as af\n"
        "for call in (lambda: af.render([{'role': 'user', 'content': 'q'}], dialect=None),\n"
        "             lambda: af.render_with_spans([], dialect=None)):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as exc:\n"
        "        print(exc)\n")
    assert run.stdout.count("unknown dialect") == 2


_REPRED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
    | st.text(alphabet="a'\"\\\n", min_size=50, max_size=200)
    | st.binary(min_size=50, max_size=200),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4)
    | st.frozensets(st.integers(), max_size=4) | st.sets(st.text(max_size=3), max_size=4),
    max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(value=_REPRED, width=st.sampled_from([5, 20, 30, 60, 80]))
def test_shown_is_repr_cut_to_its_width(value, width):
    """What an error message shows of a value is its repr, built only as far as it is
    shown: whole when it fits the width, else its first characters and "..." (a cut
    value must not read as a whole one)."""
    from apertus_fast._errors import shown

    r = repr(value)
    assert shown(value, width) == (r if len(r) <= width else r[:width - 3] + "...")


def test_shown_copes_with_what_repr_cannot_show():
    from apertus_fast._errors import shown

    deep = 1
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep, 60) == "[" * 57 + "..."

    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    assert shown(Broken(), 60) == "<Broken object>"
    assert shown([Broken()], 60) == "[<Broken object>]"
    # a container that holds itself, twice (reprlib, used before, took 2**60 steps)
    loop = []
    loop += [loop, loop]
    assert shown(loop, 60) == repr(loop) == "[[...], [...]]"
    d = {}
    d[1] = d
    assert shown(d, 60) == repr(d)
    # the quotes are those of the whole string's repr, not of the part shown
    x = "a" * 300 + "'" + "a" * 300
    assert shown(x, 60) == repr(x)[:57] + "..." and shown(x, 60)[0] == '"'
    assert shown(10 ** 5000, 60) == "<int of 16610 bits>"
    assert shown({"b": 1, "a": 2}, 60) == "{'b': 1, 'a': 2}"   # (reprlib sorts; repr does not)
    assert shown("x" * 10**6, 10) == "'" + "x" * 6 + "..."

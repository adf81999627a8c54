"""What Hugging Face's ``apply_chat_template`` does with its inputs before the template
sees them, where apertus-fast does the same: Python functions as tools (described by
``transformers.utils.get_json_schema``) and a tokenizer without a BOS token
(``bos_token=None`` renders none). docs/rendering.md, "Hugging Face's
apply_chat_template", lists these and the differences left.

The glue is tested with a stand-in ``transformers.utils`` module; where transformers
is installed, one test also renders with its own ``get_json_schema`` and
``apply_chat_template`` (a tokenizer built offline) and compares the text."""

from __future__ import annotations

import sys
import types
from typing import Optional

import pytest

from apertus_fast import RenderError, render, render_tools, render_with_spans
from tests.oracle import ORACLE_MISSING, template_source

DATE = "2026-01-01"
DIALECTS = ["apertus-format-reference", "apertus-1", "apertus-1.5"]
USER = [{"role": "user", "content": "Weather in Bern?"}]


def get_weather(city: str, days: Optional[int] = None) -> str:
    """Get the weather.

    Args:
        city: The city, e.g. Bern
        days: How many days ahead
    """
    return city


class Station:
    def reading(self, sensor: str) -> float:
        """Read a sensor.

        Args:
            sensor: Its name
        """
        return 0.0


def _schema(fn):
    """What the stand-in get_json_schema returns: OpenAI's shape, as transformers'."""
    if fn.__name__ == "broken":
        raise ValueError("Cannot generate JSON schema for broken because the docstring has no description")
    return {"type": "function", "function": {
        "name": fn.__name__, "description": fn.__doc__.split("\n")[0],
        "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": "x"}},
                       "required": ["x"]}}}


@pytest.fixture
def fake_transformers(monkeypatch):
    calls = []

    def get_json_schema(fn):
        calls.append(fn)
        return _schema(fn)

    pkg = types.ModuleType("transformers")
    utils = types.ModuleType("transformers.utils")
    utils.get_json_schema = get_json_schema
    pkg.utils = utils
    monkeypatch.setitem(sys.modules, "transformers", pkg)
    monkeypatch.setitem(sys.modules, "transformers.utils", utils)
    return calls


@pytest.mark.parametrize("dialect", DIALECTS)
def test_functions_as_tools_render_as_their_json_schema(fake_transformers, dialect):
    """A function or a bound method among the tools renders as the schema
    transformers' get_json_schema makes of it (OpenAI-shaped: unwrapped in every
    dialect), beside dict tools, in render, render_with_spans and render_tools."""
    method = Station().reading
    spec = {"name": "n", "description": "d", "parameters": {}}
    tools = [get_weather, spec, method]
    expected = render(USER, tools=[_schema(get_weather), spec, _schema(method)], dialect=dialect,
                      date=DATE)
    assert render(USER, tools=tools, dialect=dialect, date=DATE) == expected
    assert render_with_spans(USER, tools=tools, dialect=dialect, date=DATE).text == expected
    assert render(USER, tools_text=render_tools(tools, dialect), dialect=dialect, date=DATE) == expected
    assert fake_transformers[:2] == [get_weather, method]


def test_a_function_the_schema_maker_refuses_is_a_render_error(fake_transformers):
    def broken(x: str) -> str:
        return x

    with pytest.raises(RenderError) as info:
        render(USER, tools=[{"name": "n", "description": "d", "parameters": {}}, broken], date=DATE)
    assert str(info.value).startswith(
        "tools[1]: function test_a_function_the_schema_maker_refuses_is_a_render_error.<locals>.broken: "
        "transformers.utils.get_json_schema cannot describe it: ValueError: Cannot generate JSON schema")
    assert info.value.message_index is None and isinstance(info.value.__cause__, ValueError)


def test_without_transformers_a_function_tool_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)   # (import fails)
    with pytest.raises(RenderError, match=r"^tools\[0\]: got function get_weather: a Python function is "
                                          r"described to the model by its JSON schema, which "
                                          r"transformers.utils.get_json_schema makes .* install it, or "
                                          r"pass the schema \(a dict\)$"):
        render(USER, tools=[get_weather], date=DATE)


def test_other_callables_are_not_tools(fake_transformers):
    """Only functions and methods are described, as in apply_chat_template: a class, or
    an object with __call__, is no tool (the template fails on it, so does render)."""
    class Tool:
        def __call__(self, x: str) -> str:
            return x

    for bad in (Tool, Tool()):
        with pytest.raises(RenderError, match=r"^tools\[0\]: expected a tool"):
            render(USER, tools=[bad], date=DATE)
    assert fake_transformers == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bos_token_none_renders_no_bos(dialect):
    """Hugging Face leaves bos_token undefined for a tokenizer without a BOS token (its
    bos_token is None), which renders "": render(bos_token=None) does the same (it
    rendered "None", the text of the value)."""
    none = render(USER, dialect=dialect, date=DATE, bos_token=None)
    assert none == render(USER, dialect=dialect, date=DATE, bos_token="")
    assert none == render(USER, dialect=dialect, date=DATE)[len("<s>"):]
    assert render_with_spans(USER, dialect=dialect, date=DATE, bos_token=None).text == none


def _hf_tokenizer(dialect):
    """A fast tokenizer built offline (no hub) with the format's special tokens and the
    dialect's template."""
    import re

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    source = template_source(dialect)
    specials = ["<s>", "</s>"] + sorted(set(re.findall(r"<\|[a-z_]+\|>", source)))
    tk = Tokenizer(models.BPE(unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(["Weather in Bern?", "type get_weather"], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>")
    tok.chat_template = source
    return tok


def test_functions_as_tools_render_as_apply_chat_template_renders_them():
    """With transformers installed: apertus-1.5 (whose template unwraps the OpenAI shape
    that get_json_schema returns) renders functions as apply_chat_template does."""
    pytest.importorskip("transformers", reason="transformers is not installed (pip install "
                                               "transformers tokenizers): the stand-in tests cover the glue")
    if ORACLE_MISSING:
        pytest.skip(ORACLE_MISSING)
    import datetime

    tools = [get_weather, Station().reading]
    tok = _hf_tokenizer("apertus-1.5")
    for generation in (False, True):
        expected = tok.apply_chat_template(USER, tools=tools, tokenize=False,
                                           add_generation_prompt=generation)
        got = render(USER, tools=tools, dialect="apertus-1.5", add_generation_prompt=generation,
                     date=datetime.date.today())
        assert got == expected

"""The Python examples in the README and the docs run as written.

Every fenced ``python`` block of a document runs, in order, in one fresh interpreter
(the blocks of a document build on each other, and the drop-in examples change
``sys.modules``). A few names that the prose leaves to the reader (a model's completion,
a stream of chunks) are defined first by ``PRELUDE``. Blocks that show signatures
rather than code are listed in ``SIGNATURES`` and skipped by their first line.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from tests.fresh import run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent

PRELUDE = {
    "README.md": (
        "import apertus_fast\n"
        "prompt = apertus_fast.render([{'role': 'user', 'content': 'Hi'}], dialect='apertus-1.5',"
        " add_generation_prompt=True, enable_thinking=True)\n"
        "completion = '<|inner_prefix|>Think.<|inner_suffix|>Hello.<|assistant_end|>'\n"
        "text_or_utf8_bytes = '<|user_start|>Hi<|user_end|>'.encode()\n"
        "stream = ['<|user_st', 'art|>Grüezi<|user_', 'end|>']\n"
    ),
    "docs/streaming.md": (
        "model_output = ['<|inner_prefix|>Hm', 'm.<|inner_suffix|>It is ', '21.<|tools_pre',"
        " 'fix|>[{\"log\": {\"t\": 2', '1}}]<|tools_suffix|>']\n"
        "show_reasoning = show_answer = print\n"
        "def show_call(index, name, text): print(index, name, text)\n"
    ),
    "docs/lexer.md": (
        "from apertus_fast._lex import Lexer\n"
        "model_output = ['<|assistant_start|><|inner_pre', 'fix|>hm<|inner_suffix|>Hi', '!<|assist', 'ant_end|>']\n"
    ),
}

#: first lines of blocks that are signatures, not runnable code
SIGNATURES = (
    "class Event(NamedTuple):",
    "from apertus_fast._lex import lex, scan, Lexer, Event, LEXER_BACKEND",
    'lx = Lexer(dialect="apertus-format-reference", *, backend=None)',
)

DOCS = ["README.md", "docs/dropin.md", "docs/lexer.md", "docs/cli.md", "docs/rendering.md",
        "docs/streaming.md"]


def python_blocks(path: pathlib.Path) -> list[str]:
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [b for b in blocks if not b.startswith(SIGNATURES)]


def test_every_document_with_python_examples_is_checked():
    with_examples = {str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
                     if python_blocks(p)}
    assert with_examples == set(DOCS)


@pytest.mark.parametrize("doc", DOCS)
def test_examples_run(doc, tmp_path):
    blocks = python_blocks(ROOT / doc)
    assert blocks
    if doc == "docs/cli.md":  # reads corpus.jsonl.gz from the working directory
        import gzip

        with gzip.open(tmp_path / "corpus.jsonl.gz", "wb") as f:
            f.write((ROOT / "samples" / "conversations.jsonl").read_bytes())
    program = PRELUDE.get(doc, "") + "\n".join(blocks)
    script = tmp_path / "examples.py"
    script.write_text(program, encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{doc}: the examples fail:\n{run.stderr[-3000:]}"
    if doc == "docs/cli.md":
        assert (tmp_path / "rendered.jsonl").stat().st_size > 0


def test_install_as_apertus_format_serves_from_imports(tmp_path):
    """The reference package's own import style, from another module."""
    (tmp_path / "user_code.py").write_text(
        "from apertus_format import ApertusFormatter, Conversation, Message\n"
        "import apertus_format\n"
        "def go():\n"
        "    conv = Conversation([Message.user('Hi')])\n"
        "    return apertus_format.__name__, ApertusFormatter().format_conversation(conv)\n",
        encoding="utf-8")
    program = ("import apertus_fast, sys\n"
               "assert apertus_fast.install_as_apertus_format() is apertus_fast\n"
               "import user_code\n"
               "name, text = user_code.go()\n"
               "print(name); print(text.endswith('<|user_start|>Hi<|user_end|>'))\n")
    run = run_python(program, cwd=tmp_path)
    assert run.stdout.split() == ["apertus_format", "True"]


def test_star_import_from_apertus_format_binds_the_reference_names_only(tmp_path):
    """`from apertus_format import *` binds the reference's __all__: apertus-fast's own
    names (parse, render, lex, ...) do not replace the importing module's."""
    (tmp_path / "user_code.py").write_text(
        "def parse(text):\n"
        "    return 'my parse'\n"
        "from apertus_format import *\n"
        "NAMES = sorted(k for k in globals() if not k.startswith('_') and k != 'parse')\n",
        encoding="utf-8")
    program = ("import apertus_fast\n"
               "apertus_fast.install_as_apertus_format()\n"
               "import apertus_format, user_code\n"
               "print(user_code.parse('x'))\n"
               "print(' '.join(user_code.NAMES))\n"
               "print(user_code.Message is apertus_fast.Message, apertus_format.render is apertus_fast.render)\n")
    run = run_python(program, cwd=tmp_path)
    assert run.stdout.splitlines() == [
        "my parse",
        "ApertusFormatter AssistantBlock AssistantContent BlockType ContentFormat Conversation "
        "Message Role SectionType SystemContent TextPart ToolCall ToolOutput UserContent",
        "True True"]


def test_patching_the_formatter_modules_datetime_fixes_the_date():
    """How tests of code written for the reference fix today's date: the formatter reads
    it through `datetime.now()` looked up in apertus_format.formatter."""
    program = ("import apertus_fast, datetime\n"
               "apertus_fast.install_as_apertus_format()\n"
               "from unittest import mock\n"
               "from apertus_format import ApertusFormatter, Conversation, Message, AssistantContent\n"
               "conv = Conversation([Message.user('Hi')])\n"
               "with mock.patch('apertus_format.formatter.datetime') as dt:\n"
               "    dt.now.return_value = datetime.datetime(2024, 5, 6, 7, 8)\n"
               "    print('Current date: 2024-05-06<' in ApertusFormatter().format_conversation(conv))\n"
               "    print(dt.now.call_count)\n"
               "    ApertusFormatter().format_conversation(Conversation([Message.system('S')]))\n"
               "    print(dt.now.call_count)  # a system message: the template asks for no date\n"
               "    print('2024-05-06' in ApertusFormatter(date='2030-01-01').format_conversation(conv))\n")
    assert run_python(program).stdout.split() == ["True", "1", "1", "False"]


def test_install_as_apertus_format_serves_the_reference_modules(tmp_path):
    """The reference package's modules: apertus_format.enums, .models, .formatter."""
    (tmp_path / "user_code.py").write_text(
        "from apertus_format.models import Conversation, Message, AssistantBlock\n"
        "from apertus_format.models import Role as ModelsRole, BlockType as ModelsBlockType\n"
        "from apertus_format.enums import Role, BlockType\n"
        "from apertus_format.formatter import ApertusFormatter, TemplateError, json, re, os, datetime\n"
        "from apertus_format.formatter import Message as FormatterMessage, ContentFormat\n"
        "assert ModelsRole is Role and ModelsBlockType is BlockType and FormatterMessage is Message\n"
        "import jinja2\n"
        "assert TemplateError is jinja2.TemplateError\n"
        "import apertus_format.models\n"
        "import apertus_format.enums as enums\n"
        "def go():\n"
        "    conv = Conversation([Message(role=enums.Role.USER, content='Hi')])\n"
        "    assert apertus_format.models.Message is Message\n"
        "    return ApertusFormatter().format_conversation(conv)\n",
        encoding="utf-8")
    program = ("import apertus_fast\n"
               "apertus_fast.install_as_apertus_format()\n"
               "import user_code\n"
               "print(user_code.go().endswith('<|user_start|>Hi<|user_end|>'))\n"
               "print(user_code.Message is apertus_fast.Message, user_code.Role is apertus_fast.Role,\n"
               "      user_code.ApertusFormatter is apertus_fast.ApertusFormatter)\n")
    run = run_python(program, cwd=tmp_path)
    assert run.stdout.split() == ["True", "True", "True", "True"]


def test_without_install_the_alias_is_only_a_local_name():
    """Why install_as_apertus_format exists (and what the docs say about it)."""
    program = ("import apertus_fast as apertus_format\n"
               "import sys; print('apertus_format' in sys.modules)\n")
    run = run_python(program)
    assert run.stdout.strip() == "False"


def test_every_public_name_is_documented():
    """Each name of ``apertus_fast.__all__`` is written in the README or docs/."""
    import apertus_fast

    text = (ROOT / "README.md").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    missing = [name for name in apertus_fast.__all__
               if not re.search(r"(?<!\w)" + re.escape(name) + r"\b", text)]
    assert not missing, f"public names that no doc mentions: {missing}"


def test_the_cli_synopsis_lists_every_option_of_each_command():
    """docs/cli.md's synopsis names each command's own options; the options every
    command that reads an INPUT shares are named once, in the paragraph below it."""
    import argparse

    from apertus_fast.cli import build_parser

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    synopsis = re.search(r"^```\n(apertus-fast render.*?)^```", text, flags=re.M | re.S).group(1)
    lines: dict[str, str] = {}
    command = None
    for line in synopsis.splitlines():
        m = re.match(r"apertus-fast (\w+)", line)
        if m:
            command = m.group(1)
        if command:
            lines[command] = lines.get(command, "") + line
    shared = {"-h", "--help", "-j", "--jobs", "--max-errors", "-q", "--quiet", "--no-progress"}
    shared_paragraph = text[text.index("`python -m apertus_fast ...` is the same program."):]
    for option in shared - {"-h", "--help"}:
        assert f"`{option}" in shared_paragraph or f"/{option}" in shared_paragraph, option
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(lines)
    for command, parser in sub.choices.items():
        options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - shared
        documented = set(re.findall(r"[\[|] ?(--[\w-]+)", lines[command]))
        documented |= {"--output"} if "-o OUTPUT" in lines[command] else set()
        assert options == documented, (command, options ^ documented)


def test_the_reference_docs_keep_no_history_notes():
    """The README and the reference docs say what the library does now; what it did
    before goes to CHANGELOG.md. A note such as "until the twenty-third day it said X"
    means nothing to a user (the development's days are nobody's calendar).
    docs/benchmarks.md and docs/benchmark-history.md are the log of measured runs and
    keep their dates."""
    pattern = re.compile(r"\b(\w+-)?(first|second|third|\w+th) days?\b|\bused to (be|say|exit|fail|drop|get|leave|name|count)\b",
                         re.I)
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.name in ("benchmarks.md", "benchmark-history.md"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "history notes belong in CHANGELOG.md:\n" + "\n".join(found)

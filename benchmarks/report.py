"""Run the benchmarks and print a Markdown report of ratios measured in the same run.

Usage (from the repository root)::

    python benchmarks/report.py                   # run everything (2-3 min on 2 cores), print the report
    python benchmarks/report.py --save run.json   # ... and keep pytest-benchmark's JSON
    python benchmarks/report.py --json run.json   # report on a saved --benchmark-json file
    python benchmarks/report.py -k render         # only some benchmarks (pytest -k)

The report has one table per question: rendering (jinja2 / minijinja / apertus-fast,
conversations/s and MB/s of rendered text, speed-ups), rendering with every tool new
(tool-cache misses), the drop-in formatter, the lexer
against the ``count("<|")`` floor, and the parser against the reference package's regex
approach, streaming model output against re-reading it after every chunk, and the
command line against a json-module loop; then the
skipped benchmarks with their reasons and the machine. Rates use one
statistic of the rounds of each benchmark (``--stat``, default ``min``: the best round,
the least disturbed by other processes on a shared machine).

When ``apertus_fast`` is not importable from the current interpreter, ``src/`` is put on
``PYTHONPATH`` for the run (as ``PYTHONPATH=src python -m pytest benchmarks`` does).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Goals the project must prove (see docs/benchmarks.md).
RENDER_GOAL, RENDER_FLOOR = 100.0, 50.0
LEX_GOAL = 1.5
PARSE_GOAL = 5.0

PYTEST_OPTIONS = [
    "--benchmark-min-rounds=5",
    "--benchmark-max-time=2.0",
    "--benchmark-warmup=on",
    "--benchmark-warmup-iterations=1",
    "--benchmark-disable-gc",
    "--benchmark-sort=name",
]


# --------------------------------------------------------------------------- running

def run_benchmarks(json_path: Path, extra: list[str]) -> tuple[int, list[str]]:
    env = dict(os.environ)
    try:
        import apertus_fast  # noqa: F401
    except ImportError:
        src = str(REPO / "src")
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-q", "-rs", "-p", "no:cacheprovider",
           f"--benchmark-json={json_path}", *PYTEST_OPTIONS, *extra]
    print("running:", " ".join(["python", "-m", "pytest", "benchmarks", *cmd[5:]]), file=sys.stderr)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stderr.write(line)
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines


def skipped_reasons(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = re.match(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", line)
        if m:
            out.append(m.group(1))
    return out


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(("FAILED", "ERROR"))]


# --------------------------------------------------------------------------- formatting

def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("✅" if ok else "❌")


class Results:
    def __init__(self, data: dict, stat: str):
        self.data = data
        self.stat = stat
        self.by = {}
        for b in data.get("benchmarks", []):
            info = b.get("extra_info", {})
            key = (info.get("kind"), info.get("dialect"), info.get("engine"))
            self.by[key] = b

    def seconds(self, kind, dialect, engine):
        b = self.by.get((kind, dialect, engine))
        return None if b is None else b["stats"][self.stat]

    def info(self, kind, dialect, engine):
        b = self.by.get((kind, dialect, engine))
        return None if b is None else b["extra_info"]

    def rate(self, kind, dialect, engine, field):
        s, info = self.seconds(kind, dialect, engine), self.info(kind, dialect, engine)
        if s is None or not s:
            return None
        return info[field] / s

    def dialects(self, kind):
        seen = []
        for (k, d, _e) in self.by:
            if k == kind and d not in seen:
                seen.append(d)
        order = ["apertus-format-reference", "apertus-1", "apertus-1.5"]
        return sorted(seen, key=lambda d: order.index(d) if d in order else 99)


def render_table(r: Results) -> list[str]:
    if not r.dialects("render"):
        return []
    out = ["### Rendering", "",
           "One round renders the whole corpus. conv/s = conversations per second; MB/s = "
           "megabytes (10^6 bytes, UTF-8) of rendered text per second. Speed-ups are time ratios "
           f"against jinja2 from the same run; goal ≥ {RENDER_GOAL:.0f}x, never below {RENDER_FLOOR:.0f}x.", "",
           "The copy floor is not a renderer: it copies each rendered string once (a memcpy), so "
           "jinja2 / floor (\"ceiling\") is the highest speed-up any renderer could show on this corpus.", "",
           "| dialect | conversations | MB | jinja2 conv/s | jinja2 MB/s | minijinja conv/s | "
           "apertus-fast conv/s | apertus-fast MB/s | apertus-fast vs jinja2 | goal | minijinja vs jinja2 | "
           "copy floor conv/s | ceiling (jinja2 / floor) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|"]
    for d in r.dialects("render"):
        info = r.info("render", d, "jinja2") or r.info("render", d, "apertus-fast") or {}
        j = r.seconds("render", d, "jinja2")
        m = r.seconds("render", d, "minijinja")
        a = r.seconds("render", d, "apertus-fast")
        f = r.seconds("render", d, "floor copy")
        sa = j / a if (j and a) else None
        sm = j / m if (j and m) else None
        ok = None if sa is None else (sa >= RENDER_GOAL)
        verdict = _verdict(ok)
        if sa is not None and RENDER_FLOOR <= sa < RENDER_GOAL:
            verdict = "⚠️ (≥ 50x, < 100x)"
        out.append(
            f"| {d} | {info.get('conversations', '—')} | {info.get('bytes', 0) / 1e6:.1f} | "
            f"{_fmt_rate(r.rate('render', d, 'jinja2', 'conversations'))} | "
            f"{_fmt_rate(r.rate('render', d, 'jinja2', 'bytes') and r.rate('render', d, 'jinja2', 'bytes') / 1e6)} | "
            f"{_fmt_rate(r.rate('render', d, 'minijinja', 'conversations'))} | "
            f"{_fmt_rate(r.rate('render', d, 'apertus-fast', 'conversations'))} | "
            f"{_fmt_rate(r.rate('render', d, 'apertus-fast', 'bytes') and r.rate('render', d, 'apertus-fast', 'bytes') / 1e6)} | "
            f"{_fmt_ratio(sa)} | {verdict} | {_fmt_ratio(sm)} | "
            f"{_fmt_rate(r.rate('render', d, 'floor copy', 'conversations'))} | {_fmt_ratio(j / f if (j and f) else None)} |")
    return out


def fresh_tools_table(r: Results) -> list[str]:
    dialects = r.dialects("fresh-tools")
    if not dialects:
        return []
    out = ["### Rendering, every tool new", "",
           "The corpus's conversations that have tools, every tool renamed so that none occurs twice (a "
           "tool-calling dataset, whose conversations list their own APIs). apertus-fast starts each round "
           "with an empty tool cache, so every tool is a miss; \"cached\" renders the same conversations "
           "with their tools in the cache. Speed-ups against jinja2 of the same run.", "",
           "| dialect | conversations | tool uses | jinja2 conv/s | apertus-fast conv/s, every tool new | "
           "vs jinja2 | apertus-fast conv/s, cached | vs jinja2 | a miss costs (µs per tool use) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d in dialects:
        info = r.info("fresh-tools", d, "jinja2") or r.info("fresh-tools", d, "apertus-fast") or {}
        j = r.seconds("fresh-tools", d, "jinja2")
        a = r.seconds("fresh-tools", d, "apertus-fast")
        c = r.seconds("fresh-tools", d, "apertus-fast cached")
        tools = info.get("tools")
        miss = (a - c) / tools * 1e6 if (a and c and tools) else None
        out.append(f"| {d} | {info.get('conversations', '—')} | {tools if tools is not None else '—'} | "
                   f"{_fmt_rate(r.rate('fresh-tools', d, 'jinja2', 'conversations'))} | "
                   f"{_fmt_rate(r.rate('fresh-tools', d, 'apertus-fast', 'conversations'))} | "
                   f"{_fmt_ratio(j / a if (j and a) else None)} | "
                   f"{_fmt_rate(r.rate('fresh-tools', d, 'apertus-fast cached', 'conversations'))} | "
                   f"{_fmt_ratio(j / c if (j and c) else None)} | "
                   f"{f'{miss:.2f}' if miss is not None else '—'} |")
    return out


def spans_table(r: Results) -> list[str]:
    dialects = r.dialects("spans")
    if not dialects:
        return []
    out = ["### Loss-mask spans", "",
           "`render_with_spans` (the text and the spans the model produced; the hot path, recording where they start and stop) over "
           "the same corpus, against jinja2 and `render` of the same run.", "",
           "| dialect | render_with_spans conv/s | vs jinja2 | time / render's |",
           "|---|---:|---:|---:|"]
    for d in dialects:
        j = r.seconds("render", d, "jinja2")
        a = r.seconds("render", d, "apertus-fast")
        s = r.seconds("spans", d, "apertus-fast render_with_spans")
        out.append(f"| {d} | {_fmt_rate(r.rate('spans', d, 'apertus-fast render_with_spans', 'conversations'))} | "
                   f"{_fmt_ratio(j / s if (j and s) else None)} | {_fmt_ratio(s / a if (s and a) else None)} |")
    return out


def _versus_table(r: Results, kind: str, d: str, engines, heading: str, intro, column: str, value) -> list[str]:
    """A baseline and apertus-fast, one row each: ``engines`` are (label, engine name),
    the baseline first; ``intro(info)`` is the paragraph above the table; ``value(seconds,
    info)`` fills ``column``; the last column is the speed-up over the baseline."""
    secs = [r.seconds(kind, d, engine) for _, engine in engines]
    if all(s is None for s in secs):
        return []
    info = next(r.info(kind, d, engine) for (_, engine), s in zip(engines, secs) if s is not None)
    out = [heading, "", intro(info), "", f"| engine | {column} | speed-up |", "|---|---:|---:|"]
    base = secs[0]
    for (label, _), s in zip(engines, secs):
        out.append(f"| {label} | {value(s, info) if s else '—'} | {_fmt_ratio(base / s) if (base and s) else '—'} |")
    return out


def formatter_table(r: Results) -> list[str]:
    return _versus_table(
        r, "formatter", "apertus-format-reference",
        (("reference approach (compile per conversation)", "reference approach"),
         ("apertus-fast `ApertusFormatter`", "apertus-fast ApertusFormatter")),
        "### Drop-in formatter",
        lambda info: (f"`ApertusFormatter(enable_thinking, tools).format_conversation(conversation)` per "
                      f"conversation ({info['conversations']} conversations of the reference corpus), against the "
                      "reference package's approach (the constructor reads and compiles the template: "
                      "`jinja2.Template(open(file).read())`, then renders)."),
        "conv/s", lambda s, info: _fmt_rate(info["conversations"] / s))


def mask_table(r: Results) -> list[str]:
    d = "apertus-1.5"
    return _versus_table(
        r, "mask", d, (("interpreted", "interpreted"), ("apertus-fast", "apertus-fast")),
        "### Token masks",
        lambda info: (f"`Rendered.token_mask(offsets)` for every conversation of the {d} corpus "
                      f"({info['conversations']:,} conversations, {info['tokens']:,} tokens of 4 characters as "
                      "`(start, end)` tuples), against the same loop interpreted (its source, as a pure-Python "
                      "install runs it)."),
        "ns/token", lambda s, info: f"{s / info['tokens'] * 1e9:.1f}")


def lex_table(r: Results) -> list[str]:
    out = ["### Lexer", "",
           "Over the concatenated rendered corpus. Floor: `count(\"<|\")` on the same `str` / UTF-8 `bytes`. "
           f"scan/floor = time ratio (goal ≤ {LEX_GOAL}x). `lex` builds `Event` objects (for information).", "",
           "| dialect | input | MB | floor MB/s | scan MB/s | scan / floor | goal | lex (events) MB/s | lex / floor |",
           "|---|---|---:|---:|---:|---:|:-:|---:|---:|"]
    rows = 0
    for d in r.dialects("lex"):
        for kind, floor_name in (("str", "floor str.count"), ("bytes", "floor bytes.count")):
            f = r.seconds("lex", d, floor_name)
            s = r.seconds("lex", d, f"apertus-fast scan {kind}")
            e = r.seconds("lex", d, f"apertus-fast lex {kind}")
            info = r.info("lex", d, floor_name) or {}
            mb = info.get("bytes", 0) / 1e6
            ratio = s / f if (s and f) else None
            out.append(
                f"| {d} | {kind} | {mb:.1f} | {_fmt_rate(mb / f if f else None)} | {_fmt_rate(mb / s if s else None)} | "
                f"{_fmt_ratio(ratio)} | {_verdict(None if ratio is None else ratio <= LEX_GOAL)} | "
                f"{_fmt_rate(mb / e if e else None)} | {_fmt_ratio(e / f if (e and f) else None)} |")
            rows += 1
    return out if rows else []


def parse_table(r: Results) -> list[str]:
    out = ["### Parser", "",
           "Conversation by conversation over the rendered corpus. Baseline: the reference package's "
           "`parse_conversation` (three regexes, `.strip()`); apertus-fast: `parse(text, dialect=...).messages`. "
           f"Goal ≥ {PARSE_GOAL:.0f}x.", "",
           "| dialect | regex conv/s | regex MB/s | apertus-fast conv/s | apertus-fast MB/s | speed-up | goal |",
           "|---|---:|---:|---:|---:|---:|:-:|"]
    rows = 0
    for d in r.dialects("parse"):
        b = r.seconds("parse", d, "reference regex")
        a = r.seconds("parse", d, "apertus-fast parse")
        sp = b / a if (a and b) else None

        def mbs(engine):
            v = r.rate("parse", d, engine, "bytes")
            return None if v is None else v / 1e6

        out.append(
            f"| {d} | {_fmt_rate(r.rate('parse', d, 'reference regex', 'conversations'))} | {_fmt_rate(mbs('reference regex'))} | "
            f"{_fmt_rate(r.rate('parse', d, 'apertus-fast parse', 'conversations'))} | {_fmt_rate(mbs('apertus-fast parse'))} | "
            f"{_fmt_ratio(sp)} | {_verdict(None if sp is None else sp >= PARSE_GOAL)} |")
        rows += 1
    return out if rows else []


def stream_table(r: Results) -> list[str]:
    dialects = r.dialects("stream")
    if not dialects:
        return []
    out = ["### Streaming model output", "",
           "Assistant turns of the corpus fed in chunks of 1-8 characters (about a token each). "
           "Baseline: re-reading the text so far with `parse_completion` after every chunk (what a "
           "server without a streaming parser does; the diffing it would still need is not timed). "
           "`Lexer.feed` (the public resumable lexer alone) and `parse_completion` once per turn "
           "for information.", "",
           "| dialect | turns | chunks | MB | re-parse µs/chunk | StreamParser µs/chunk | "
           "StreamParser MB/s | speed-up | Lexer.feed µs/chunk | parse_completion once MB/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d in dialects:
        info = r.info("stream", d, "apertus-fast StreamParser") or r.info("stream", d, "re-parse per chunk") or {}
        chunks = info.get("chunks") or 0
        mb = info.get("bytes", 0) / 1e6

        def per_chunk(engine):
            s = r.seconds("stream", d, engine)
            return None if (s is None or not chunks) else s / chunks * 1e6

        base = r.seconds("stream", d, "re-parse per chunk")
        fast = r.seconds("stream", d, "apertus-fast StreamParser")
        once = r.seconds("stream", d, "parse_completion once")
        pc = [per_chunk(e) for e in ("re-parse per chunk", "apertus-fast StreamParser", "Lexer.feed")]
        fmt = [("—" if v is None else f"{v:.2f}") for v in pc]
        out.append(f"| {d} | {info.get('turns', '—')} | {chunks:,} | {mb:.2f} | {fmt[0]} | {fmt[1]} | "
                   f"{_fmt_rate(mb / fast if fast else None)} | {_fmt_ratio(base / fast if (base and fast) else None)} | "
                   f"{fmt[2]} | {_fmt_rate(mb / once if once else None)} |")
    return out


def cli_table(r: Results) -> list[str]:
    commands = [c for c in ("render", "parse", "render-world", "parse-world")
                if r.by.get(("cli", c, "json loop")) or r.by.get(("cli", c, "apertus-fast -j 1"))]
    if not commands:
        return []
    out = ["### Command line (bulk JSONL)", "",
           "`apertus-fast render` / `parse` on the apertus-1.5 corpus written 5 times over as JSONL "
           "(output to /dev/null); `render-world` / `parse-world`: the same with the corpus's world "
           "language mix (prose in Cyrillic, CJK, Arabic, Devanagari, Greek). Baseline: the loop a user writes with the json module "
           "(`json.loads`, `render` or `parse(...).to_dict()`, `json.dumps(..., ensure_ascii=False)`, "
           "write); the command's output is checked to be byte-identical to the loop's before timing. "
           "`-j N`: N worker processes.", "",
           "| command | lines | MB in | json loop lines/s | `-j 1` lines/s | `-j 1` MB/s | `-j 1` vs loop | "
           "N | `-j N` lines/s | `-j N` MB/s | `-j N` vs loop |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in commands:
        info = (r.info("cli", c, "apertus-fast -j 1") or r.info("cli", c, "json loop") or {})
        lines, mb = info.get("lines", 0), info.get("bytes", 0) / 1e6
        loop = r.seconds("cli", c, "json loop")
        one = r.seconds("cli", c, "apertus-fast -j 1")
        many = r.seconds("cli", c, "apertus-fast -j N")
        jobs = (r.info("cli", c, "apertus-fast -j N") or {}).get("jobs", "—")

        def rate(s, unit):
            return None if not s else unit / s

        out.append(f"| {c} | {lines:,} | {mb:.1f} | {_fmt_rate(rate(loop, lines))} | "
                   f"{_fmt_rate(rate(one, lines))} | {_fmt_rate(rate(one, mb))} | "
                   f"{_fmt_ratio(loop / one if (loop and one) else None)} | {jobs} | "
                   f"{_fmt_rate(rate(many, lines))} | {_fmt_rate(rate(many, mb))} | "
                   f"{_fmt_ratio(loop / many if (loop and many) else None)} |")
    return out


def machine_lines(data: dict, stat: str) -> list[str]:
    mi = data.get("machine_info", {})
    cpu = mi.get("cpu_model") or (mi.get("cpu") or {}).get("brand_raw") or mi.get("processor") or mi.get("machine")
    cores = mi.get("cpu_count") or (mi.get("cpu") or {}).get("count")
    versions = []
    for mod in ("jinja2", "minijinja", "pytest_benchmark"):
        try:
            from importlib.metadata import version

            versions.append(f"{mod.replace('_', '-')} {version(mod.replace('_', '-'))}")
        except Exception:  # noqa: BLE001
            pass
    details = f"; {mi['cpu_details']}" if mi.get("cpu_details") else ""
    return ["### Machine", "",
            f"- CPU: {cpu}, {cores} cores{details} ({mi.get('system', platform.system())} {mi.get('release', '')})",
            f"- Python: {mi.get('python_implementation', '')} {mi.get('python_version', platform.python_version())}",
            f"- apertus_fast backend: {mi.get('apertus_fast_backend', 'unknown')}",
            f"- {', '.join(versions)}",
            f"- commit: {_commit(data)}",
            f"- run: {data.get('datetime', '')[:19]}; statistic: `{stat}` of the rounds of each benchmark"]


def _commit(data: dict) -> str:
    ci = data.get("commit_info") or {}
    if not ci.get("id"):
        return "unknown"
    return f"{ci['id'][:7]}{' (uncommitted changes)' if ci.get('dirty') else ''} ({ci.get('time', '')[:19]})"


def report(data: dict, stat: str, skips: list[str], failed: list[str]) -> str:
    r = Results(data, stat)
    parts = []
    for table in (render_table(r), fresh_tools_table(r), spans_table(r), formatter_table(r), mask_table(r), lex_table(r), parse_table(r),
                  stream_table(r), cli_table(r)):
        if table:
            parts.append("\n".join(table))
    if skips:
        parts.append("\n".join(["### Skipped", ""] + [f"- {s}" for s in skips]))
    if failed:
        parts.append("\n".join(["### Failed (not timed)", ""] + [f"- `{f}`" for f in failed]))
    parts.append("\n".join(machine_lines(data, stat)))
    return "\n\n".join(parts) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="report on this saved --benchmark-json file instead of running")
    ap.add_argument("--save", type=Path, help="keep the JSON of this run here")
    ap.add_argument("--stat", default="min", choices=["min", "median", "mean"],
                    help="statistic of the rounds used for rates and ratios (default: min)")
    ap.add_argument("-k", dest="select", help="only benchmarks matching this pytest -k expression")
    ap.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    args, passthrough = ap.parse_known_args(argv)

    skips, failed = [], []
    if args.json:
        data = json.loads(args.json.read_text(encoding="utf-8"))
        extra = data.get("apertus_report", {})
        skips, failed = extra.get("skipped", []), extra.get("failed", [])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = args.save or Path(tmp) / "bench.json"
            extra_args = list(passthrough) + (["-k", args.select] if args.select else [])
            started = _dt.datetime.now()
            code, lines = run_benchmarks(path, extra_args)
            if not path.exists():
                print(f"pytest exited with {code} and wrote no benchmark JSON", file=sys.stderr)
                return code or 1
            data = json.loads(path.read_text(encoding="utf-8"))
            skips, failed = skipped_reasons(lines), failures(lines)
            data["apertus_report"] = {"skipped": skips, "failed": failed,
                                      "wall_seconds": round((_dt.datetime.now() - started).total_seconds(), 1)}
            if args.save:
                path.write_text(json.dumps(data, indent=1), encoding="utf-8")
            print(f"benchmarks took {data['apertus_report']['wall_seconds']} s (exit code {code})", file=sys.stderr)
    text = report(data, args.stat, skips, failed)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

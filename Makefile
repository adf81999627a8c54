# Two commands do all set-up on a fresh machine (Python >= 3.10 with venv and a C compiler):
#   make demo   - install into .venv and run the main job on the shipped samples
#   make test   - install into .venv and run the test suite
# Both create .venv and `pip install -e ".[test]"` (which compiles the Cython core) first.
# Without a C compiler, APERTUS_FAST_PURE=1 make test installs the pure-Python twins.

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# The stamp names a hash of what the build compiles (setup.py's modules and their .pxd
# files) and of APERTUS_FAST_PURE, so that editing any of them, or switching between the
# compiled and the pure install, reinstalls.
STAMP   = $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib,os,pathlib;s=pathlib.Path('src/apertus_fast');print(hashlib.sha1(os.environ.get('APERTUS_FAST_PURE','').strip().encode()+b''.join(p.read_bytes() for p in [pathlib.Path('pyproject.toml'),pathlib.Path('setup.py'),s/'_render.py',s/'_parse.py',s/'_stream.py',s/'_mask.py',*sorted(s.glob('*.pyx')),*sorted(s.glob('*.pxd'))])).hexdigest()[:12])")
OUT    ?= out
# Whether a pure-Python install is asked for: APERTUS_FAST_PURE set to anything but 0 (as
# setup.py reads it)
PURE    = $(filter-out 0,$(strip $(APERTUS_FAST_PURE)))
PYTEST_ARGS ?=

.PHONY: install demo test bench clean

$(STAMP):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# a pure install must not load extensions an earlier compiled install left in src/
	$(if $(PURE),rm -f src/apertus_fast/*.so src/apertus_fast/*.pyd)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	@# a compile that failed (no C compiler) falls back to the pure-Python twins: say so,
	@# and leave the stamp unwritten so that the next make tries to compile again
	@if [ -n "$(PURE)" ] || $(BIN)/python -c "import sys, apertus_fast as a; sys.exit(a.BACKEND != 'cython')"; then \
	    touch $(STAMP); \
	else \
	    echo "apertus-fast: warning: the Cython core did not compile (is a C compiler installed?), so the pure-Python twins run: same results, much slower. Install a compiler and run make again, or set APERTUS_FAST_PURE=1 to ask for them." >&2; \
	fi

install: $(STAMP)
	@$(BIN)/python -c "import apertus_fast as a; print('apertus-fast', a.__version__, 'backend:', a.BACKEND, a.backends())"

demo: install
	mkdir -p $(OUT)
	$(BIN)/apertus-fast render samples/conversations.jsonl -o $(OUT)/rendered.jsonl --dialect apertus-1.5 --date 2026-01-01
	$(BIN)/apertus-fast parse $(OUT)/rendered.jsonl -o $(OUT)/parsed.jsonl --dialect apertus-1.5
	$(BIN)/apertus-fast validate $(OUT)/rendered.jsonl --dialect apertus-1.5
	$(BIN)/apertus-fast render $(OUT)/parsed.jsonl -o $(OUT)/rerendered.jsonl --dialect apertus-1.5
	cmp $(OUT)/rendered.jsonl $(OUT)/rerendered.jsonl && echo "round trip: re-rendered text is byte-identical"
	$(BIN)/apertus-fast completions samples/completions-1.5.jsonl --dialect apertus-1.5 --keep id -o $(OUT)/completions.jsonl

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) $(OUT) build src/*.egg-info src/apertus_fast/*.so src/apertus_fast/*.c

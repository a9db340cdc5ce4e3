# The two commands of README.md: `make lab` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sampan-installed
# `make test` runs WORKERS test processes (pytest-xdist) with THREADS threads each; on a bigger machine:
# `make test WORKERS=8`. One worker more than the 2 cores: with two, the cores sat idle a fifth of the time while
# tests waited on servers, browsers and timeouts (CPU time 81 % of 2 x wall); a third worker fills those waits.
WORKERS ?= 3
THREADS ?= 1
# Inductor compiles in a pool of helper processes, one per core, started in every process that compiles (each test
# worker and lesson kernel): on 2 busy cores the pool gained no time and cost about 5 CPU-seconds each (measured
# with process accounting, 2026-12-04); one compile thread compiles in the process itself.
COMPILE_THREADS ?= 1
# The notebooks that `make test` and `make site` run (about 80 kernels) are forked from a server that imported torch
# and ipykernel once, instead of each kernel importing them again (2-3 CPU-seconds each; sampan.utils.forkkernels).
# FORK_KERNELS=0 starts every kernel as a new interpreter.
FORK_KERNELS ?= 1
# Python writes compiled bytecode (__pycache__, ignored by git) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE=1, as on CI machines), so that a process reads what an earlier one compiled: ~0.07
# CPU-seconds for each of the suite's few hundred processes that import sampan, ~5 for each pytest worker collecting
# the tests of an earlier run (in a fresh clone the three workers compile them side by side: no gain there).
THREAD_ENV = OMP_NUM_THREADS=$(THREADS) TORCHINDUCTOR_COMPILE_THREADS=$(COMPILE_THREADS) SAMPAN_FORK_KERNELS=$(FORK_KERNELS) \
	PYTHONDONTWRITEBYTECODE=

.PHONY: setup lab test bench clean hub-proxy site

setup: $(STAMP)

# jsonschema's optional IRI format checker (rfc3987-syntax, pulled in by Jupyter's event schemas) builds a grammar
# on import: 2 of the 3 CPU-seconds of every Jupyter server, Voila, papermill or `sampan path` start (measured
# 2026-12-04). Without it jsonschema skips the "iri" format and nothing else changes.
DROP_SLOW_IMPORTS = $(PY) -m pip uninstall --quiet --yes rfc3987-syntax

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	$(DROP_SLOW_IMPORTS)
	$(PY) -m sampan kernel install --sys-prefix
	$(MAKE) hub-proxy
	touch $(STAMP)

# `sampan hub` needs JupyterHub's proxy, an npm package (Node from Debian: apt-get install nodejs npm).
CHP_VERSION ?= 5.3.0
hub-proxy:
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/share/sampan-node configurable-http-proxy@$(CHP_VERSION); \
	else echo "npm is missing: \`sampan hub\` and tests/hub need it (apt-get install nodejs npm; make hub-proxy)"; fi

lab: setup
	$(VENV)/bin/sampan lab

test: setup
	$(THREAD_ENV) $(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

bench: setup
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,bench]"
	$(DROP_SLOW_IMPORTS)
	$(VENV)/bin/sampan bench

# The executed course as static HTML: runs the path in quick mode, then writes runs/<timestamp>/site/index.html.
# `make site SITE_ARGS="--from runs/<timestamp>"` builds it from a run you already have; `--lang zh` in Chinese.
site: setup
	$(THREAD_ENV) $(VENV)/bin/sampan path site $(SITE_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info

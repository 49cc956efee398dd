# Two commands do all set-up on a fresh machine:
#   make run   — creates .venv, installs Arbiter, starts a whole local deployment (`arbiter up`)
#   make test  — creates .venv and vLLM's own .venv-vllm, runs lint, types and the whole suite
PY ?= python3.11
VENV ?= .venv
VLLM_VENV ?= .venv-vllm
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test venv vllm-env browser-deps k8s-deps tiny-model lint typecheck pytest bench clean

$(BIN)/arbiter: pyproject.toml
	@command -v $(PY) >/dev/null || { echo "Python 3.11 is required ($(PY) not found)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(BIN)/arbiter

venv: $(BIN)/arbiter

vllm-env:
	PYTHON=$(PY) bash workers/vllm/create_env.sh $(VLLM_VENV)

tiny-model: venv vllm-env
	$(BIN)/arbiter worker tiny-model --out .models/tiny-llama --python $(VLLM_VENV)/bin/python

run: venv
	$(BIN)/arbiter up $(ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy control_plane storage workers console

pytest: venv
	$(BIN)/python -m pytest $(ARGS)

# headless Chromium for tests/browser: Debian's package, installed when missing and we are root
browser-deps:
	@if command -v chromium >/dev/null; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ]; then echo "chromium missing: apt-get install -y chromium"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium missing and not root: tests/browser skip (fail when CI is set)"; fi

# kubectl for tests/kubernetes (kubectl kustomize, kustomize v4+): Debian's package when missing
# and we are root (Debian 12's is 1.20, too old: the tests then say so)
k8s-deps:
	@if command -v kubectl >/dev/null; then echo "kubectl: $$(command -v kubectl)"; \
	elif [ "$$(id -u)" = 0 ]; then echo "kubectl missing: apt-get install -y kubernetes-client"; \
	  apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null; \
	else echo "kubectl missing and not root: tests/kubernetes skip (fail when CI is set)"; fi

test: venv vllm-env browser-deps k8s-deps
	$(MAKE) lint typecheck
	ARBITER_VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python $(BIN)/python -m pytest $(ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) .models .mypy_cache .ruff_cache .pytest_cache

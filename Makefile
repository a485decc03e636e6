# Every target sets up what it needs from nothing: a private uv, then the locked virtualenv.
SHELL := /bin/bash
PY ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PYTHON := $(shell command -v $(PY))
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

.PHONY: install run test test-faults lint fmt bench clean prometheus-tools chromium dashboards clients

$(UV):
	$(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet "uv>=0.4"

$(VENV)/.installed: $(UV) uv.lock pyproject.toml $(wildcard */pyproject.toml */*/pyproject.toml)
	$(UV) sync --frozen --all-packages
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/ezat up --config $(or $(EZAT_CONFIG),config/ezat.toml)

test: install prometheus-tools chromium clients
	$(VENV)/bin/pytest --ignore=tests/faults $(PYTEST_ARGS)

# The real clients the e2e suite runs unchanged, from the npm registry, pinned: the Codex CLI
# (tests/e2e/test_codex_cli.py) and Claude Code (tests/e2e/test_claude_code.py; its `claude` is the
# native binary of the optional dependency @anthropic-ai/claude-code-linux-x64, Node not needed to
# run it). Without npm this fails, saying how to get it.
NPM_MISSING := echo "npm is missing: install Node.js and npm (Debian: apt-get install nodejs npm) to run the Codex CLI and Claude Code tests"; exit 1
CODEX_VERSION := 0.171.0
CODEX := $(TOOLS)/codex/node_modules/.bin/codex
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_CODE := $(TOOLS)/claude-code/node_modules/.bin/claude
clients: $(CODEX) $(CLAUDE_CODE)
$(CODEX):
	@command -v npm >/dev/null || { $(NPM_MISSING); }
	npm install --prefix $(TOOLS)/codex --no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION)
	@$(CODEX) --version | grep -q '$(CODEX_VERSION)'
$(CLAUDE_CODE):
	@command -v npm >/dev/null || { $(NPM_MISSING); }
	npm install --prefix $(TOOLS)/claude-code --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	@$(CLAUDE_CODE) --version | grep -q '$(CLAUDE_CODE_VERSION)'

# promtool (the alert rule tests, tests/deploy) from Debian's `prometheus` package, installed with
# apt-get when missing and apt-get is usable (as root, or through sudo without a password).
# Otherwise nothing is installed and those tests fail saying `apt-get install prometheus`.
PROMETHEUS_APT := env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
prometheus-tools:
	@command -v promtool >/dev/null || ! command -v apt-get >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	  else exit 0; fi; echo "installing promtool: apt-get install prometheus"; \
	  $$sudo $(PROMETHEUS_APT) >/dev/null 2>&1 || \
	  { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo $(PROMETHEUS_APT) >/dev/null 2>&1; } || \
	  echo "could not install it: the tests that need promtool will fail"; }

# Chromium for the console's browser test (tests/e2e/test_console.py, driven by Playwright with
# this executable: no browser is ever downloaded), from Debian's `chromium` package, installed as
# promtool is. Otherwise that test fails saying `apt-get install chromium`.
CHROMIUM_APT := env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
chromium:
	@test -x /usr/bin/chromium || ! command -v apt-get >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	  else exit 0; fi; echo "installing chromium: apt-get install chromium"; \
	  $$sudo $(CHROMIUM_APT) >/dev/null 2>&1 || \
	  { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo $(CHROMIUM_APT) >/dev/null 2>&1; } || \
	  echo "could not install it: the console's browser test will fail"; }

# The fault suite (docs/reliability.md): processes killed and restarted under load, its own stack.
# One pytest session; it fails if any HTTP client was collected unclosed (docs/reliability.md,
# "Unclosed clients in the test process").
test-faults: install
	$(VENV)/bin/pytest tests/faults $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy libs/*/src services/*/src cli/src simulator/src bench deploy/grafana deploy/prometheus/generate_rule.py

# The Grafana dashboards (deploy/grafana/*.json and the ConfigMaps of deploy/k8s/dashboards.yaml),
# built from deploy/grafana/dashboards.py; a test fails while the committed ones differ.
dashboards: install
	$(VENV)/bin/python deploy/grafana/dashboards.py

fmt: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Side-by-side benchmark (gateway vs the simulator alone) and the translation micro-suite; writes
# bench/results.json. BENCH_ARGS: --quick, --soak 600, --profile DIR, --levels 1,32 (bench/run.py -h).
BENCH_ARGS ?=
bench: install
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(TOOLS) .ezat .pytest_cache

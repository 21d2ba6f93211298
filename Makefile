# Two commands: `make run` (the whole service, embedded, with demo data) and
# `make test` (the whole suite). Both create .venv/ when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
export PUBLIC_URL ?= http://$(HOST):$(PORT)
# The example bot provider (docs/examples/bot_provider.py) that `make run` starts;
# seed_demo attaches it to the "Demo with bot" channel at this URL.
BOT_PORT ?= 8010
export EXAMPLE_BOT_URL ?= http://$(HOST):$(BOT_PORT)
# The example CRM (docs/examples/crm_receiver.py); seed_demo points the
# developer webhooks at it.
CRM_PORT ?= 8020
export EXAMPLE_CRM_URL ?= http://$(HOST):$(CRM_PORT)
# The example site embedding the demo widget (docs/examples/widget_host.py), on
# an origin other than the service's; seed_demo prints it as the widget's host_page.
WIDGET_HOST_PORT ?= 8030
export EXAMPLE_WIDGET_HOST_URL ?= http://$(HOST):$(WIDGET_HOST_PORT)/
DEMO_DIR := $(or $(VAR_DIR),var)

.PHONY: run test screenshots lint format bench soak clean chromium

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) manage.py migrate --noinput
	@mkdir -p $(DEMO_DIR)
	$(PY) manage.py seed_demo --output $(DEMO_DIR)/demo.json
	@rm -f $(DEMO_DIR)/demo-bot.args $(DEMO_DIR)/demo-widget.args
	@umask 077; $(PY) -c "import json, sys; bots = [c for c in json.load(sys.stdin)['channels'] \
	  if c['kind'] == 'bot' and 'token' in c]; \
	  print(*(bots and [bots[0]['webhook_url_prefix'], bots[0]['token']]))" \
	  < $(DEMO_DIR)/demo.json > $(DEMO_DIR)/demo-bot.args
	@umask 077; $(PY) -c "import json, sys; widgets = [c for c in json.load(sys.stdin)['channels'] \
	  if c['kind'] == 'widget' and 'widget_id' in c]; \
	  print(*(widgets and [widgets[0]['widget_id']]))" \
	  < $(DEMO_DIR)/demo.json > $(DEMO_DIR)/demo-widget.args
	@echo
	@echo "Switchboard: http://$(HOST):$(PORT)/  (admin /admin/, agent API /api/agent/v1/, docs /api/docs/)"
	@echo "Example bot: $(EXAMPLE_BOT_URL)/<token>, on the channel \"Demo with bot\" (docs/bot-api.md)"
	@echo "Example CRM: $(EXAMPLE_CRM_URL)/ receives the developer webhooks (docs/webhooks.md)"
	@echo "Example site: $(EXAMPLE_WIDGET_HOST_URL) embeds the widget \"Demo website\" (docs/widget.md)"
	@echo "Logins are printed above. Ctrl-C stops web, worker, beat, the example bot, CRM and site."
	@bash -c 'pids=""; \
	  stop() { trap - INT TERM EXIT; kill -TERM $$pids 2>/dev/null; wait; }; \
	  trap stop INT TERM EXIT; \
	  read -r prefix token < $(DEMO_DIR)/demo-bot.args; \
	  if [ -n "$$token" ]; then \
	    $(PY) docs/examples/bot_provider.py --host $(HOST) --port $(BOT_PORT) \
	      --webhook-url-prefix "$$prefix" --token="$$token" & pids="$$pids $$!"; \
	  else echo "the example bot is not started: see the bot entry of seed_demo above"; fi; \
	  $(PY) docs/examples/crm_receiver.py --host $(HOST) --port $(CRM_PORT) & pids="$$pids $$!"; \
	  read -r widget_id < $(DEMO_DIR)/demo-widget.args; \
	  if [ -n "$$widget_id" ]; then \
	    $(PY) docs/examples/widget_host.py --host $(HOST) --port $(WIDGET_HOST_PORT) \
	      --service-url "$(PUBLIC_URL)" --widget-id="$$widget_id" & pids="$$pids $$!"; \
	  else echo "the example site is not started: see the widget entry of seed_demo above"; fi; \
	  $(PY) -m celery -A config worker -Q default,delivery -P threads -c 16 -l INFO & pids="$$pids $$!"; \
	  $(PY) -m celery -A config beat -l WARNING & pids="$$pids $$!"; \
	  $(PY) -m gunicorn -c config/gunicorn.py config.asgi:application \
	    --bind $(HOST):$(PORT) --workers 2 & pids="$$pids $$!"; \
	  wait -n'

# The suite runs in TEST_PROCESSES processes (pytest-xdist): its tests mostly
# wait on servers, workers and browsers, so more processes than cores help.
# Each has its own test database, VAR_DIR and two Redis databases counted up
# from REDIS_URL's (docs/testing.md). The 20 slowest tests are listed at the end.
TEST_PROCESSES ?= 3
test: $(STAMP) chromium
	VAR_DIR=$(CURDIR)/var/test $(PY) -m pytest -n $(TEST_PROCESSES) --dist worksteal --durations=20

# The README's screenshots, refreshed by the browser tests (make test leaves them alone).
screenshots: $(STAMP) chromium
	UPDATE_SCREENSHOTS=1 VAR_DIR=$(CURDIR)/var/test $(PY) -m pytest -m browser tests/e2e

# The browser tests drive Debian's chromium-headless-shell, and its chromium
# where a test needs the desktop browser (Playwright downloads no browser).
chromium:
	@{ command -v chromium && command -v chromium-headless-shell; } >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium and chromium-headless-shell for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium chromium-headless-shell >/dev/null; \
	  else \
	    echo "the browser tests need chromium: sudo apt-get install chromium chromium-headless-shell"; \
	  fi; }

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Every scenario of docs/performance.md in one run and one table (bench/run.py),
# on PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set.
# BENCH_ARGS: --quick for a smoke run, --only <scenario> for one.
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

# Half an hour of mixed traffic, watching memory, tables and latency
# (bench/soak.py, docs/operations.md "Soak"); not part of make test.
# SOAK_ARGS: --minutes 5 for a shorter one; --faults for rounds of the fault
# run instead (workers killed, Redis and PostgreSQL restarted under traffic).
soak: $(STAMP)
	$(PY) -m bench.soak $(SOAK_ARGS)

clean:
	rm -rf var/test var/broker var/cache

# rollguard: the two commands are `make demo` and `make test`; both create what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BROKER := build/testbroker/TestBroker.class
# A real Apache Kafka from Maven Central (tests/kafka/pom.xml), one folder per version: the
# newest 4.x, and the oldest rollguard supports. A changed pom resolves again.
KAFKA_NEWEST := 4.4.0
KAFKA_OLDEST := 4.0.0
# Kafka Connect's own version: connect-file and connect-mirror are served up to 4.3.1 here.
CONNECT_VERSION := 4.3.1
# mypy's cache lives outside the clone, as Maven's jars do: a fresh clone's lint then takes a second,
# not twenty (mypy checks each cached module against its source's hash and its path).
MYPY_CACHE ?= $(HOME)/.cache/rollguard/mypy
KAFKA := build/kafka/$(KAFKA_NEWEST)/.resolved build/kafka/$(KAFKA_OLDEST)/.resolved \
	build/kafka-connect/$(CONNECT_VERSION)/.resolved
# One Maven at a time: two writing the same local repository at once can clash.
build/kafka/$(KAFKA_OLDEST)/.resolved: | build/kafka/$(KAFKA_NEWEST)/.resolved
build/kafka-connect/$(CONNECT_VERSION)/.resolved: | build/kafka/$(KAFKA_OLDEST)/.resolved

.PHONY: test demo demo-connect demo-agent demo-cluster dist lint bench venv broker kafka format clean image test-image test-security

# Four workers, each taking whole test files (module fixtures, such as a real Kafka cluster,
# stay in one process): most tests wait on real processes (Kafka restarts, agents, Spark), so
# two cores run four at once (five made the agent's timing tests flaky, for no gain); the
# real-Kafka and real-Connect files go first (tests/conftest.py; xdist would
# otherwise start the files with the most tests first). Tests marked
# `alone` measure timings and run afterwards, with nothing beside them (only their files are
# collected again). The real Kubernetes control plane's binaries (`make kube`: a second when its
# cache is warm, 15-40 minutes the first time) are built in the background from the start
# (scripts/kube-build --detach): everything else runs meanwhile, and the tests on the control
# plane run last and wait for it (ROLLGUARD_KUBE_BUILD, set only while that build runs).
# Chromium is installed (`make chromium`). ROLLGUARD_REQUIRE_ALL_TIERS=1: a real tier that cannot
# run fails the run, and so does any skip that is not environment-only (tests/helpers.py,
# ENVIRONMENT_ONLY). The venv, the test broker and the Kafka and Connect jars do not depend on
# each other: made side by side, then the lint, then the tests. Bytecode is compiled ahead (the
# venv's packages when installed, the project's sources here): with PYTHONDONTWRITEBYTECODE set,
# as on this machine, each of the ~550 Python processes a run starts (agents, `rollguard`
# commands) would otherwise compile every module it imports again.
KUBE_STATUS := build/kube-build.status
test:
	@ROLLGUARD_KUBE_CACHE=$(KUBE_CACHE) $(PYTHON) scripts/kube-build --detach $(KUBE_STATUS)
	@$(MAKE) --no-print-directory -j4 $(INSTALLED) $(BROKER) $(KAFKA) prometheus chromium
	@$(MAKE) --no-print-directory lint
	@$(BIN)/python -m compileall -q -j 0 $(SOURCES) >/dev/null
	ROLLGUARD_REQUIRE_ALL_TIERS=1 ROLLGUARD_KUBE_CACHE=$(KUBE_CACHE) ROLLGUARD_PROMETHEUS_CACHE=$(PROMETHEUS_CACHE) \
		env $$(test "$$(cat $(KUBE_STATUS) 2>/dev/null)" = 0 || echo ROLLGUARD_KUBE_BUILD=$(CURDIR)/$(KUBE_STATUS)) \
		$(BIN)/pytest -n 4 --dist loadfile --no-loadscope-reorder -m "not alone" --durations=25
	ROLLGUARD_REQUIRE_ALL_TIERS=1 $(BIN)/pytest -m alone $$(grep -l 'pytest.mark.alone' tests/*/test_*.py)

demo: $(INSTALLED) $(BROKER) build/kafka/$(KAFKA_NEWEST)/.resolved
	$(BIN)/python demo/roll_demo.py

demo-connect: $(INSTALLED) $(KAFKA)
	$(BIN)/python demo/connect_demo.py

demo-agent: $(INSTALLED) $(BROKER)
	$(BIN)/python demo/agent_demo.py

# A real 3-node Kafka cluster with an agent beside each node, left running until Ctrl-C; prints
# the commands to try on it (demo/cluster_demo.py). About 35 s to start.
demo-cluster: $(INSTALLED) build/kafka/$(KAFKA_NEWEST)/.resolved
	$(BIN)/python demo/cluster_demo.py

# The wheels of the five components in dist/ (not the test peers'), each built by its PEP 517
# backend from a copy of its folder (scripts/wheels.py; tests/real/test_install.py installs them).
# PySpark, which rollguard-spark needs, is published as a source distribution only: its wheel
# is in $(WHEELS) after `make`.
dist: $(INSTALLED)
	$(BIN)/python scripts/wheels.py --out dist

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --cache-dir $(MYPY_CACHE)
	$(BIN)/lint-imports
	@$(MAKE) --no-print-directory docs

# The documentation site (mkdocs.yml, docs/): MkDocs with the Material theme, built into
# build/site/ (its pages read from disk: open build/site/index.html), strictly: a broken link or
# anchor, a page left out of the nav, fails it; `make lint`, so `make test`, builds it so. The
# reference pages are written from the code at each build (docs/hooks/). `make docs-serve`
# serves it at http://127.0.0.1:8000 and rebuilds it as you edit. Nothing is fetched from the
# network to build or to read it. MkDocs 1.x's banner about its successor is kept quiet.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
.PHONY: docs docs-serve docs-pictures graphviz
docs: $(INSTALLED)
	$(MKDOCS) build --strict --quiet

docs-serve: $(INSTALLED)
	$(MKDOCS) serve --strict --dev-addr 127.0.0.1:8000

# The pictures in docs/img/ (scripts/docs_pictures.py): the architecture and the node's life
# drawn by Graphviz from the code, and from `make demo`'s real roll run on a terminal (about 4
# minutes) the live view, the report page (headless Chromium) and the canary's chart; committed.
# `make docs-pictures REUSE=1` draws again from the last run's output (build/docs-pictures/).
docs-pictures: $(INSTALLED) $(BROKER) build/kafka/$(KAFKA_NEWEST)/.resolved chromium graphviz
	$(BIN)/python scripts/docs_pictures.py $(if $(REUSE),--reuse)

# Debian's graphviz, for `make docs-pictures` only (scripts/graphviz-install).
graphviz:
	@scripts/graphviz-install

bench: $(INSTALLED) $(BROKER) $(KAFKA)
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/agent_flood.py
	$(BIN)/python bench/retry_herd.py
	$(BIN)/python bench/roll_sim.py
	$(BIN)/python bench/report.py --check
	$(BIN)/python bench/report.py

# `make image`: both images, with podman if present, else docker. BASE=... builds on another
# Debian 12 base (e.g. `make image BASE=localhost/rollguard-base:bookworm` after test-image).
ENGINE ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
VERSION ?= $(or $(shell sed -n 's/^version = "\(.*\)"/\1/p' shared/pyproject.toml),0.1.0)
BASE ?=

image:
	$(ENGINE) build $(if $(BASE),--build-arg BASE=$(BASE)) --target agent -t rollguard-agent:$(VERSION) .
	$(ENGINE) build $(if $(BASE),--build-arg BASE=$(BASE)) --target roller -t rollguard-roller:$(VERSION) .

# Not part of `make test` (minutes): podman, runc and debootstrap from Debian, a local Debian
# base, both images built and the agent image run against the Java test broker.
test-image: $(INSTALLED) $(BROKER)
	scripts/test-image

# Not part of `make test` (about a minute, and apt-get the first time): Debian's testssl.sh
# against a real agent on 127.0.0.1, failing on what it must not find (scripts/test-security).
test-security: $(INSTALLED) $(BROKER)
	$(BIN)/python scripts/test-security

# A real Kubernetes control plane for tests/real/test_real_kube.py: kube-apiserver, -controller-manager
# and -scheduler (the newest Kubernetes and one minor older), etcd and kwok, and Helm, built by
# scripts/kube-build from the Go module proxy (pins: tests/kube/versions.env) into $(KUBE_CACHE),
# outside the clone, as Maven keeps its jars (the tests look there too, or in
# $$ROLLGUARD_KUBE_CACHE). Needs Go only to build: 15-40 minutes of both cores the first time
# (the API servers take most), then a second; a changed pin builds that one again.
KUBE_CACHE ?= $(HOME)/.cache/rollguard/kube
.PHONY: kube test-kube
kube:
	@ROLLGUARD_KUBE_CACHE=$(KUBE_CACHE) $(PYTHON) scripts/kube-build

# Only the tests on the real control plane (marked `kube`: every test using the `kube` fixture,
# the control plane's own smoke tests and Helm's); `make test` runs them with everything else.
test-kube: $(INSTALLED) $(BROKER) $(KAFKA) kube
	ROLLGUARD_KUBE_CACHE=$(KUBE_CACHE) $(BIN)/pytest -n 2 --dist loadfile -m kube

# A real Prometheus for tests/real/test_gates_real.py: Debian's `prometheus` package, downloaded with
# apt-get download and unpacked (never installed) by scripts/prometheus-fetch into
# $(PROMETHEUS_CACHE), outside the clone (the tests look there too, or in
# $$ROLLGUARD_PROMETHEUS_CACHE). Seconds the first time, then a second, without the network.
PROMETHEUS_CACHE ?= $(HOME)/.cache/rollguard/prometheus
.PHONY: prometheus
prometheus:
	@ROLLGUARD_PROMETHEUS_CACHE=$(PROMETHEUS_CACHE) $(PYTHON) scripts/prometheus-fetch

# Debian's Chromium for tests/real/test_report_page.py (the report page as a browser shows it):
# installed with apt-get by scripts/chromium-install when missing (as root), never by a test.
# A second when it is there; about a minute the first time.
.PHONY: chromium
chromium:
	@scripts/chromium-install

format: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

venv: $(INSTALLED)
broker: $(BROKER)
kafka: $(KAFKA)

# The five components and the test peers (tests/peers: never in an image), editable (each X/src on sys.path through a .pth: a new module is visible
# without reinstalling), and the development tools, at the versions in constraints.txt so that
# every run installs the same ones. To move to newer versions: delete constraints.txt's pins you
# want to move (or all of them), `make clean venv` with an empty constraints.txt, then
#   .venv/bin/python -m pip freeze --all --exclude-editable | grep -v '^rollguard-' > constraints.txt
# and run `make test` before committing it. uv (pinned, installed into the venv by pip) installs
# them: seconds where pip took forty. PySpark is published only as a source distribution, which
# uv would build again at every install: its wheel is built once into $(WHEELS), outside the
# clone, as Maven keeps its jars.
WHEELS ?= $(HOME)/.cache/rollguard/wheels
PYSPARK := $(shell sed -n 's/^pyspark==//p' constraints.txt)
COMPONENTS := shared agent roller certs spark tests/peers
PYPROJECTS := $(foreach c,$(COMPONENTS),$(c)/pyproject.toml)
SOURCES := $(foreach c,$(COMPONENTS),$(c)/src)

$(INSTALLED): $(PYPROJECTS) requirements-dev.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "rollguard needs Python 3.11 or newer")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt uv
	@mkdir -p $(WHEELS)
	@test -f $(WHEELS)/pyspark-$(PYSPARK)-py2.py3-none-any.whl || \
		$(BIN)/python -m pip wheel --quiet --no-deps -w $(WHEELS) pyspark==$(PYSPARK)
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode --find-links $(WHEELS) \
		-c constraints.txt pip setuptools -r requirements-dev.txt \
		-e shared -e agent -e 'roller[collect,controller]' -e certs -e spark -e tests/peers
	touch $@

$(BROKER): tests/broker/TestBroker.java
	@command -v javac >/dev/null || { echo "javac not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	mkdir -p $(dir $@)
	javac --release 17 -d $(dir $@) $<

# Kafka's jars (about 55 MB a version, ~10 s from Maven Central, then from ~/.m2).
build/kafka/%/.resolved: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "mvn not found: Kafka's jars come from Maven Central through Maven (apt-get install maven)"; exit 1; }
	@command -v java >/dev/null || { echo "java not found: Kafka needs a JDK 17 (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@rm -rf build/kafka/$*/lib && mkdir -p build/kafka/$*
	@mvn -q -B -f tests/kafka/pom.xml dependency:copy-dependencies -Dkafka.version=$* \
		-DoutputDirectory=$(CURDIR)/build/kafka/$*/lib >build/kafka/$*/mvn.log 2>&1 \
		|| { echo "Kafka $*'s jars could not be resolved from Maven Central: $$(grep -m1 -o 'Could not .*' build/kafka/$*/mvn.log || tail -n1 build/kafka/$*/mvn.log) (full log: build/kafka/$*/mvn.log)"; exit 1; }
	@echo "Kafka $*: $$(ls build/kafka/$*/lib | wc -l) jars in build/kafka/$*/lib"
	@touch $@

build/kafka-connect/%/.resolved: tests/kafka/connect/pom.xml
	@command -v mvn >/dev/null || { echo "mvn not found: Kafka Connect's jars come from Maven Central through Maven (apt-get install maven)"; exit 1; }
	@rm -rf build/kafka-connect/$*/lib && mkdir -p build/kafka-connect/$*
	@mvn -q -B -f tests/kafka/connect/pom.xml dependency:copy-dependencies -Dconnect.version=$* \
		-DoutputDirectory=$(CURDIR)/build/kafka-connect/$*/lib >build/kafka-connect/$*/mvn.log 2>&1 \
		|| { echo "Kafka Connect $*'s jars could not be resolved from Maven Central: $$(grep -m1 -o 'Could not .*' build/kafka-connect/$*/mvn.log || tail -n1 build/kafka-connect/$*/mvn.log) (full log: build/kafka-connect/$*/mvn.log)"; exit 1; }
	@echo "Kafka Connect $*: $$(ls build/kafka-connect/$*/lib | wc -l) jars in build/kafka-connect/$*/lib"
	@touch $@

clean:
	rm -rf $(VENV) build

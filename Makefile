# Everything runs on Node 24 LTS. When the system Node is older, the Node 24 binary is taken from the npm
# registry's node-linux-<arch> package (no other download source is needed) and kept under .tools/.
NODE_VERSION := 24.21.0
ARCH := $(shell uname -m | sed -e 's/x86_64/x64/' -e 's/aarch64/arm64/')
LOCAL_NODE_DIR := $(CURDIR)/.tools/node-$(NODE_VERSION)
SYSTEM_NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)

ifeq ($(shell [ $(SYSTEM_NODE_MAJOR) -ge 24 ] 2>/dev/null && echo yes),yes)
NODE_DEP :=
else
NODE_DEP := $(LOCAL_NODE_DIR)/bin/node
export PATH := $(LOCAL_NODE_DIR)/bin:$(PATH)
endif

SHELL := /bin/bash
NPM := npm --no-fund --no-audit --loglevel=error

.PHONY: image images dev test test-ha ha-tools test-containers lint typecheck check bench bench-idp bench-gateway bench-tools bench-audit node deps install uninstall test-tools container-tools bench-deps clean

# make dev SESSION=jwt: the sign-in page sets an Auth.js JWT-strategy session cookie instead of a database session.
dev: deps
	node bin/platform.js dev$(if $(SESSION), --session $(SESSION))

# The project's image, labelled with its release: package.json's version, the commit and the source's address
# (OCI annotations; docs/operations.md § Releases). IMAGE names it (tagged with the version and `latest`);
# NODE_IMAGE, when set, is the base (an image of your own on a host without a registry: docs/deploy.md).
IMAGE ?= platform-identity
# Debian's docker CLI when there (docker.io: its BuildKit needs no buildx plugin); else the one on PATH.
DOCKER ?= $(shell [ -x /usr/bin/docker ] && echo /usr/bin/docker || echo docker)
image:
	@version=$$(node -p "require('./package.json').version"); \
	revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown); \
	source=$$(git config --get remote.origin.url 2>/dev/null || echo unknown); \
	$(DOCKER) build -f deploy/Dockerfile $(if $(NODE_IMAGE),--build-arg NODE_IMAGE=$(NODE_IMAGE)) \
	  --build-arg VERSION=$$version --build-arg REVISION=$$revision --build-arg SOURCE=$$source \
	  -t $(IMAGE):$$version -t $(IMAGE):latest . && \
	echo "Built $(IMAGE):$$version (commit $$revision)"

# The container suite first (its own vitest config: one compose stack on a Docker Engine, fault runs; it prints
# its timings), then the whole suite.
test: deps test-tools container-tools
	node node_modules/vitest/vitest.mjs run --config test/containers/vitest.config.ts
	node node_modules/vitest/vitest.mjs run

# The failover suite: real Redis Sentinel and Cluster failovers, a Postgres failover behind its write endpoint, a
# Docker Swarm on a private engine (test/ha/vitest.config.ts). .ci/run runs it after `make test`.
test-ha: deps test-tools ha-tools
	node node_modules/vitest/vitest.mjs run --config test/ha/vitest.config.ts

# Every image the deployment needs, on a host without a registry (Debian's packages and npm only; root, for
# debootstrap): prints the deploy/.env lines naming them (docs/deploy.md § Offline hosts).
images: deps container-tools
	node deploy/images/main.ts

test-containers: deps container-tools
	node node_modules/vitest/vitest.mjs run --config test/containers/vitest.config.ts

lint: deps
	node node_modules/@biomejs/biome/bin/biome check .

typecheck: deps
	node node_modules/typescript/bin/tsc -p tsconfig.json

check: lint typecheck test

bench: bench-idp bench-gateway bench-tools bench-audit

bench-idp: deps
	node bench/idp-refresh.ts

bench-gateway: deps bench-deps
	node bench/gateway-proxy.ts

# MCP 2026-07-28 tools/call: the bare SDK v2 server, our tool server, and the tool server behind the gateway.
bench-tools: deps
	node bench/tools-call.ts

# Server time of the admin API's audit pages at 100 000 audit rows (docs/performance.md § Admin audit).
bench-audit: deps
	node bench/admin-audit.ts

node: $(NODE_DEP)

# `platform` on PATH: a link to bin/platform.js, which runs on any Node (on one older than 22.12 it hands over to
# the Node 24 kept under .tools/). PREFIX=/usr/local make install links it there instead.
PREFIX ?= $(HOME)/.local
install: deps
	@mkdir -p $(PREFIX)/bin && ln -sfn $(CURDIR)/bin/platform.js $(PREFIX)/bin/platform
	@echo "Linked $(PREFIX)/bin/platform -> $(CURDIR)/bin/platform.js"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) echo "$(PREFIX)/bin is not on your PATH; add this line to your shell's profile: export PATH=\"$(PREFIX)/bin:\$$PATH\"";; esac

uninstall:
	@if [ "$$(readlink $(PREFIX)/bin/platform)" = "$(CURDIR)/bin/platform.js" ]; then \
	  rm -f $(PREFIX)/bin/platform && echo "Removed $(PREFIX)/bin/platform"; fi

$(LOCAL_NODE_DIR)/bin/node:
	@echo "System Node is $(SYSTEM_NODE_MAJOR).x; fetching Node $(NODE_VERSION) (node-linux-$(ARCH)) from the npm registry"
	@rm -rf $(LOCAL_NODE_DIR) $(LOCAL_NODE_DIR).tmp && mkdir -p $(LOCAL_NODE_DIR).tmp
	@cd $(LOCAL_NODE_DIR).tmp && $(NPM) pack node-linux-$(ARCH)@$(NODE_VERSION) >/dev/null && tar xzf node-linux-$(ARCH)-$(NODE_VERSION).tgz
	@mv $(LOCAL_NODE_DIR).tmp/package $(LOCAL_NODE_DIR) && rm -rf $(LOCAL_NODE_DIR).tmp
	@$(LOCAL_NODE_DIR)/bin/node --version

deps: $(NODE_DEP) node_modules/.installed

node_modules/.installed: package.json package-lock.json | $(NODE_DEP)
	$(NPM) ci
	@touch $@

# Tools from Debian: Chromium for the browser tests (driven by playwright-core, no browser download), Caddy for
# the deploy/Caddyfile test, HAProxy for the benchmark's reference proxy (and the test that holds it to the
# gateway's job), promtool (package prometheus) for the alert rules' test. Installed when missing and apt-get
# is usable as root; otherwise one line says what to install.
# $(1): name:path pairs; $(2): who needs them; $(3): what to do when they cannot be had (exit 1, or carry on).
define debian-packages
	@missing=""; for p in $(1); do [ -x "$${p#*:}" ] || missing="$$missing $${p%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian packages for $(2):$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || \
	      { echo "Could not install$$missing: install these Debian packages for $(2)"; $(3); }; \
	  else \
	    echo "$(2) need these Debian packages:$$missing (apt-get install$$missing)"; $(3); \
	  fi; \
	fi
endef

TEST_PACKAGES := chromium:/usr/bin/chromium caddy:/usr/bin/caddy haproxy:/usr/sbin/haproxy prometheus:/usr/bin/promtool
test-tools:
	$(call debian-packages,$(TEST_PACKAGES),the tests,exit 1)

# The container suite: Debian's Docker Engine and docker-compose, debootstrap for the base image (no registry is
# reachable) and promtool. The suite itself starts dockerd when its socket does not answer.
CONTAINER_PACKAGES := docker.io:/usr/sbin/dockerd docker-compose:/usr/bin/docker-compose debootstrap:/usr/sbin/debootstrap prometheus:/usr/bin/promtool
container-tools:
	$(call debian-packages,$(CONTAINER_PACKAGES),the container suite,exit 1)

# The failover suite's engines (Debian packages): Redis (Sentinel is redis-server --sentinel), HAProxy, the
# Docker Engine for the Swarm test (with ip and nsenter for its private nodes in network namespaces), Patroni and
# etcd for the Postgres failover (PostgreSQL 15 is already there).
HA_PACKAGES := redis-server:/usr/bin/redis-server haproxy:/usr/sbin/haproxy docker.io:/usr/sbin/dockerd iproute2:/usr/sbin/ip util-linux:/usr/bin/nsenter patroni:/usr/bin/patroni etcd-server:/usr/bin/etcd
ha-tools:
	$(call debian-packages,$(HA_PACKAGES),the failover suite,exit 1)

# Without HAProxy the gateway benchmark still runs; it leaves out the reference row and says so.
bench-deps:
	$(call debian-packages,haproxy:/usr/sbin/haproxy,the benchmark,true)

clean:
	rm -rf node_modules .tools .data

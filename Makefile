# The two commands: `make run` (the whole stack, dev profile) and `make test`.
# Builds go to a persistent target dir outside the clone so CI reuses them.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/hub-target
export CARGO_TERM_COLOR ?= never

.PHONY: run test deps build lint fmt sqlx-prepare clean-test-dbs bench-console lighthouse-console bench-auth bench-ledger bench-overview bench-webhooks bench-agent helm-check image deploy-check

run: deps
	scripts/run.sh

test: deps clean-test-dbs lint
	scripts/test.sh

deps:
	scripts/deps.sh

build:
	cargo build --workspace --all-targets

# No module cycle in any crate (scripts/module_cycles.py); proto-docs/settings.md
# is what the services' commented defaults give (scripts/settings_doc.py). Clippy runs with every
# query macro checked against a migrated database, and fails when the committed
# `.sqlx/` or `migrations/*/live/` is not current (scripts/sqlx.sh).
# proto-docs/openapi.yaml validates as OpenAPI 3.1 (scripts/openapi_check.sh).
# Every list of the services agrees with crates/stack's SERVICES (scripts/services_check.py).
lint: deps
	cargo fmt --all -- --check
	scripts/module_cycles.py --self-test
	scripts/module_cycles.py
	scripts/settings_doc.py --check
	scripts/openapi_check.sh
	scripts/services_check.py
	scripts/sqlx.sh check

# After changing a query or a migration: refresh `.sqlx/` (then commit it).
sqlx-prepare: deps
	scripts/sqlx.sh prepare

fmt:
	cargo fmt --all

# What ended test runs left (databases, streams); a run still going keeps its own.
clean-test-dbs:
	scripts/clean-test-dbs.sh

bench-console: deps
	scripts/bench-console.sh

lighthouse-console: deps
	scripts/lighthouse-console.sh

bench-auth: deps
	scripts/bench-auth.sh

bench-ledger: deps
	scripts/bench-ledger.sh

bench-overview: deps
	scripts/bench-overview.sh

helm-check:
	scripts/helm-check.sh

# The one image, with podman and without a registry (scripts/image.sh).
image:
	scripts/image.sh

# Render the chart and run it as podman containers, end to end (scripts/deploy-check.sh).
deploy-check:
	scripts/deploy-check.sh

bench-webhooks: deps
	scripts/bench-webhooks.sh

bench-agent: deps
	scripts/bench-agent.sh

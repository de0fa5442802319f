# OfflineSync — build, test, demo and benchmark.
#
#   make deps    check the toolchain and install the system libraries the package links
#   make build   debug build of every target
#   make test    start a throwaway PostgreSQL, build the tests, run them all, the conformance
#                command against every store, then the third-party example's tests
#   make demo    run the offline-sync demo: a live server process and two clients over HTTP
#   make demo-grdb  run the GRDB demo: two apps sync their own GRDB tables through a live server
#   make serve   run the sync server (127.0.0.1:8080, data in ./offline-sync-data/ on SQLite);
#                mint a client token with `make token IDENTITY=alice`
#   make soak    the long forms of the reliability tests (crash trials, convergence with 20
#                clients, corrupt-store sweeps, hostile requests, the suites under the thread and
#                address sanitizers); writes Docs/Reliability.md
#   make sanitize  the core, StoreKit, service and adapter suites under the thread and the
#                address sanitizers (about an hour on 2 cores); writes sanitizer-results.json and
#                the Sanitizers section of Docs/Reliability.md (make soak runs them too)
#   make fuzz    build offline-sync-fuzz with libFuzzer and the address sanitizer and run every
#                parser's fuzz target for FUZZ_SECONDS (default 60) each; writes fuzz-results.json
#                and the Fuzzing section of Docs/Reliability.md
#   make bench   run the benchmarks (offline-sync-harness bench) in release mode, PostgreSQL's on
#                a throwaway cluster (writes bench-results.json; Scripts/bench-table.py renders it
#                as the table of Docs/Performance.md)
#   make loadtest  a live server (release, SQLite) under many clients over loopback: propagation
#                from one device to another over a 1,000,000-row table, fan-out to 1,000
#                change-channel clients, 200 concurrent writers, 100 channels that never read;
#                then over a throwaway PostgreSQL cluster: propagation across two instances,
#                fan-out, 1,000 devices pushing one row at a time through one instance and
#                then two, a rolling restart under the writers, and pulls from two hot
#                standbys against the primary alone; HdrHistogram percentiles and CPU per
#                operation (writes loadtest-results.json, Docs/loadtest-latency.svg)
#   make client-size  build two small clients in release (URLSession, AsyncHTTPClient), strip
#                them, run them against a live server and write their sizes (client-size.json,
#                Docs/Performance.md)
#   make clean   remove build products
#
# Every target that builds runs `deps` first, so a fresh machine needs only `make test`.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

# Swift lives in /opt/swift/usr/bin on the project's machines; use it when it is not on PATH.
ifneq ($(wildcard /opt/swift/usr/bin/swift),)
export PATH := $(PATH):/opt/swift/usr/bin
endif

SWIFT ?= swift

# How many test cases Swift Testing runs at once in the one test process. Uncapped (its
# default), every test starts together and they share the cooperative pool (one thread per
# core): on a two-core machine a test's in-process round trips then wait behind hundreds of
# others, and its bounded waits can run out. Eight keeps the whole run as fast as uncapped.
TEST_WIDTH ?= 8

# System libraries found through pkg-config, and the Debian packages that provide them.
PKG_CONFIG_MODULES := sqlite3 lmdb libpq
# gdb prints a hung test run's stacks (Scripts/with-deadline.sh); installed along with the
# others, but not needed: without it a hung run is still stopped, with each thread's wait
# channel instead of its stack.
APT_PACKAGES := pkg-config libsqlite3-dev liblmdb-dev libpq-dev postgresql curl pgbouncer gdb

.PHONY: deps build docs fuzz sanitize test test-steps api-check architecture-check docs-check portability-check openapi-check conformance-cli corrupt-sweep crash-trials cognito-test hostile-test console-test pooler-test failover-test ha-test replica-test soak demo demo-grdb serve token bench bench-scale loadtest client-size clean

deps:
	@if ! command -v $(SWIFT) >/dev/null 2>&1; then \
		echo "error: '$(SWIFT)' is not on PATH." >&2; \
		echo "Install Swift 6 (https://www.swift.org/install/linux/) and add its usr/bin directory to PATH," >&2; \
		echo "for example: export PATH=\"/opt/swift/usr/bin:\$$PATH\"" >&2; \
		exit 1; \
	fi
	@missing=0; \
	if ! command -v pkg-config >/dev/null 2>&1; then \
		missing=1; \
	else \
		for module in $(PKG_CONFIG_MODULES); do \
			pkg-config --exists "$$module" || missing=1; \
		done; \
	fi; \
	if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then missing=1; fi; \
	if ! command -v curl >/dev/null 2>&1; then missing=1; fi; \
	if [ ! -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then missing=1; fi; \
	if [ "$$missing" = 0 ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing $(APT_PACKAGES)..."; \
		apt-get update; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y $(APT_PACKAGES); \
		for module in $(PKG_CONFIG_MODULES); do \
			if ! pkg-config --exists "$$module"; then \
				echo "error: pkg-config still cannot find '$$module' after installing $(APT_PACKAGES)." >&2; \
				exit 1; \
			fi; \
		done; \
		if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
			echo "error: the PostgreSQL server (initdb) is still missing after installing $(APT_PACKAGES)." >&2; \
			exit 1; \
		fi; \
	else \
		echo "error: missing system libraries (pkg-config modules: $(PKG_CONFIG_MODULES)) or the PostgreSQL server the tests use." >&2; \
		echo "Install them with:" >&2; \
		echo "    sudo apt-get update && sudo apt-get install -y $(APT_PACKAGES)" >&2; \
		echo "then run make again." >&2; \
		exit 1; \
	fi

build: deps
	$(SWIFT) build

# The third-party adapter example: a separate package that depends on this one by path.
EXAMPLE := Docs/Examples/SnapshotStore
# The example's build lives under the repository's .build, not under Docs/, so the packages it
# checks out (and their own documents) never sit among ours.
EXAMPLE_BUILD := .build/snapshot-example

# The test steps run inside Scripts/with-postgres.sh: a throwaway PostgreSQL cluster (or the
# server OFFLINE_SYNC_TEST_POSTGRES_URL already names) for the PostgreSQL adapter's tests.
# `swift test --skip-build` runs what `swift build --build-tests` built: left to build for
# itself, `swift test` plans the build anew and compiles again (half a minute to a minute here).
# The test run has a deadline (about four times its length here): a run still going then prints
# every thread's stack and PostgreSQL's sessions and locks, and fails (Scripts/with-deadline.sh).
TEST_DEADLINE ?= 1200
test: deps
	Scripts/with-postgres.sh $(MAKE) --no-print-directory test-steps

test-steps: deps openapi-check architecture-check docs-check portability-check
	$(SWIFT) build --build-tests
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) Scripts/with-deadline.sh $(TEST_DEADLINE) $(SWIFT) test --skip-build
	$(MAKE) --no-print-directory api-check
	$(MAKE) --no-print-directory conformance-cli
	$(MAKE) --no-print-directory corrupt-sweep
	$(MAKE) --no-print-directory crash-trials
	Scripts/serve-smoke.sh "$$($(SWIFT) build --show-bin-path)/offline-sync"
	"$$($(SWIFT) build --show-bin-path)/offline-sync" demo
	"$$($(SWIFT) build --show-bin-path)/offline-sync" demo-grdb
	$(MAKE) --no-print-directory cognito-test
	$(MAKE) --no-print-directory hostile-test
	$(MAKE) --no-print-directory console-test
	$(MAKE) --no-print-directory pooler-test
	$(MAKE) --no-print-directory failover-test
	$(MAKE) --no-print-directory replica-test
	"$$($(SWIFT) build --show-bin-path)/offline-sync-harness" loadtest --writes 60 --rate 20 --table-rows 2000 --clients 200 \
		--fanout-writes 5 --group-sizes 50,200 --group-writes 3 --writers 20 --duration 3 --deaf-channels 10 --slow-writes 200 --slow-rate 100 --slow-receivers 3 \
		--channel-seconds 2 --postgres "$$OFFLINE_SYNC_TEST_POSTGRES_URL" --cross-writes 30 --counted-writes 500 --counted-rate 250 --one-row-clients 50 --client-instances 1,2 --delayed-writes 20 \
		--check --output "$$($(SWIFT) build --show-bin-path)/loadtest-short.json"
	$(SWIFT) build --package-path $(EXAMPLE) --scratch-path $(EXAMPLE_BUILD) --build-tests
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) $(SWIFT) test --skip-build --package-path $(EXAMPLE) --scratch-path $(EXAMPLE_BUILD)
	$(MAKE) --no-print-directory docs

# The module table of Docs/Architecture.md matches Package.swift, every import is declared, and
# no source file or function grows past the size limits (Scripts/check-architecture.py).
architecture-check:
	python3 Scripts/check-architecture.py

# What an app links (every library product's targets), the test support and the offline-sync
# tool use no glibc-only call outside an `#if os(Linux)` / `canImport(Glibc)` region, so they
# compile on the Apple platforms Package.swift declares (Scripts/check-portability.py).
portability-check:
	python3 Scripts/check-portability.py

# The library products' public API against the last release CHANGELOG.md names: a break the
# changelog's Unreleased section does not declare fails (Scripts/check-api.py, Docs/Versioning.md).
api-check: deps
	SWIFT="$(SWIFT)" python3 Scripts/check-api.py

# The README stays under 200 lines, and every relative link in it and in Docs/ resolves
# (Scripts/check-docs.py).
docs-check:
	python3 Scripts/check-docs.py

# Docs/openapi.yaml must be a valid OpenAPI 3 document (openapi-spec-validator, from PyPI).
openapi-check:
	@python3 -c "import openapi_spec_validator" 2>/dev/null || python3 -m pip install --quiet openapi-spec-validator
	python3 -m openapi_spec_validator Docs/openapi.yaml

# The Cognito Sync-compatible API driven by boto3's unmodified cognito-sync client (boto3
# from PyPI, installed when missing) against a live `offline-sync serve`.
cognito-test: deps
	$(SWIFT) build --product offline-sync
	@python3 -c "import boto3" 2>/dev/null || python3 -m pip install --quiet boto3
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Cognito/test_cognito_sync.py
	OFFLINE_SYNC_TEST_ORDER=reverse OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest Tests/Cognito/test_cognito_sync.py

# `offline-sync serve` behind PgBouncer (Debian's package): refused at start-up in transaction
# mode, serving in session mode. Needs OFFLINE_SYNC_TEST_POSTGRES_URL (run inside
# Scripts/with-postgres.sh, as `make test` does).
pooler-test: deps
	$(SWIFT) build --product offline-sync
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Pooler/test_pgbouncer.py

# A PostgreSQL primary killed under writers and its synchronous standby promoted (the test
# starts both, and two instances that find the primary through a multi-host connection string).
failover-test: deps
	$(SWIFT) build --product offline-sync
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Failover/test_failover.py

# Pulls served by a hot standby (`serve --postgres-replica`): read-your-writes, a standby whose
# replay is paused, a standby stopped (the test starts the primary, the standby and two instances).
replica-test: deps
	$(SWIFT) build --product offline-sync
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Replica/test_replica.py

# The managed failover: a pg_auto_failover monitor and two PostgreSQL nodes on hosts of their
# own (network namespaces on a bridge; needs root), a host killed and then a host cut off the
# network under writers, readers and change channels. Installs Debian's pg_auto_failover.
ha-test: deps
	@if ! command -v pg_autoctl >/dev/null 2>&1 || [ ! -e /usr/share/postgresql/15/extension/pgautofailover.control ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15-auto-failover pg-auto-failover-cli; \
		else \
			echo "error: the managed failover test needs root (network namespaces) and apt-get install postgresql-15-auto-failover pg-auto-failover-cli" >&2; exit 1; \
		fi; \
	fi
	$(SWIFT) build --product offline-sync
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/HA/test_ha.py

# Hostile requests against a live `offline-sync serve`: schemathesis (from PyPI, installed when
# missing) over Docs/openapi.yaml with no 5xx allowed, malformed JSON, oversized bodies and
# headers, odd paths, slow and abrupt clients, malformed WebSocket handshakes, extreme
# integers, and a log that must not show any token, key, secret or record value; then
# authentication attacks on every route (missing, malformed, forged, tampered, expired and
# other-identity tokens; SigV4 with bad signatures, stale or future dates, swapped bodies), and
# every forgery of an identity provider's token (test_issuers.py, its own JWKS endpoints).
hostile-test: deps
	$(SWIFT) build --product offline-sync
	@python3 -c "import schemathesis" 2>/dev/null || python3 -m pip install --quiet schemathesis
	@python3 -c "import cryptography" 2>/dev/null || python3 -m pip install --quiet cryptography
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Hostile/test_hostile.py Tests/Hostile/test_auth.py Tests/Hostile/test_leaks.py Tests/Hostile/test_issuers.py

# The operator's console (/admin) in headless Chromium driven through Selenium: sign-in,
# the dashboard, the rules explainer against the rules engine, sign-out.
console-test: deps
	$(SWIFT) build --product offline-sync
	@if ! command -v chromedriver >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; \
		else \
			echo "error: the console test needs chromium and chromium-driver (apt-get install chromium chromium-driver)" >&2; \
			exit 1; \
		fi; \
	fi
	@python3 -c "import selenium" 2>/dev/null || python3 -m pip install --quiet selenium
	OFFLINE_SYNC_BIN="$$($(SWIFT) build --show-bin-path)/offline-sync" python3 -m unittest -v Tests/Console/test_console.py

# Damaged copies of a SQLite, an LMDB and an encrypted store file (truncated at 24 offsets, 40
# single-bit flips, 24 zeroed pages, 8 files of other formats), each opened in a child process:
# a typed error or intact data, never a crash, a reinitialised store or a changed file. The
# encrypted file authenticates every byte, so there a damaged copy must never open.
SWEEP_SEED ?= 1
corrupt-sweep: deps
	$(SWIFT) build --product offline-sync-harness
	bin="$$($(SWIFT) build --show-bin-path)/offline-sync-harness"; dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; \
	"$$bin" corrupt-sweep --store "sqlite://$$dir/app.sqlite" --seed $(SWEEP_SEED); \
	"$$bin" corrupt-sweep --store "lmdb://$$dir/app-lmdb" --seed $(SWEEP_SEED); \
	OFFLINE_SYNC_SWEEP_KEY=$$(printf '5a%.0s' $$(seq 32)) "$$bin" corrupt-sweep --require-detection --seed $(SWEEP_SEED) \
		--store "encrypted-file://$$dir/app.osync?key-env=OFFLINE_SYNC_SWEEP_KEY"

# Crash trials, short form: for each configuration (an SQLite, LMDB, encrypted-file or
# PostgreSQL client store; the server on SQLite or PostgreSQL) the client and the server are
# killed with SIGKILL 20 times at chosen phases (before send, after send, mid response, mid
# pull page, mid server apply, mid local write, mid compaction) through a fault-injecting
# proxy; every acknowledged change must reach the server exactly once, with no false conflict
# and no pulled row skipped. The PostgreSQL configurations need OFFLINE_SYNC_TEST_POSTGRES_URL
# (set inside `make test`). Then the membership trials: the server is killed between a
# membership change and the member's pull of its move-in or move-out, and mid-way through it
# (Tests/Reliability/membership_crash.py), on SQLite and PostgreSQL. Then the attachment
# trials (Tests/Reliability/attachment_crash.py) on the SQLite, LMDB and encrypted-file clients:
# killed mid-write of a file, mid-upload, after the upload but before the record's push and
# mid-download, and the server killed mid-chunk; every acknowledged record's file must reach the
# server whole and no wrong byte may reach the app. CRASH_SEED replays a run.
CRASH_TRIALS ?= 20
ATTACHMENT_CRASH_TRIALS ?= 10
crash-trials: deps
	$(SWIFT) build --product offline-sync
	$(SWIFT) build --product offline-sync-harness
	python3 Tests/Reliability/crash_trials.py --trials $(CRASH_TRIALS) --bin "$$($(SWIFT) build --show-bin-path)/offline-sync" \
		$(if $(CRASH_SEED),--seed $(CRASH_SEED),)
	python3 Tests/Reliability/attachment_crash.py --trials $(ATTACHMENT_CRASH_TRIALS) --bin "$$($(SWIFT) build --show-bin-path)/offline-sync" \
		$(if $(CRASH_SEED),--seed $(CRASH_SEED),)
	python3 Tests/Reliability/membership_crash.py --trials 12 --bin "$$($(SWIFT) build --show-bin-path)/offline-sync" \
		$(if $(CRASH_SEED),--seed $(CRASH_SEED),)
	python3 Tests/Reliability/membership_crash.py --trials 12 --store postgres --bin "$$($(SWIFT) build --show-bin-path)/offline-sync" \
		$(if $(CRASH_SEED),--seed $(CRASH_SEED),)

# The long forms of the reliability tests; writes Docs/Reliability.md (see Scripts/soak.py for
# SOAK_ARGS such as --trials, --clients, --rounds, --seeds, --seed).
SOAK_ARGS ?=
soak: deps
	$(SWIFT) build --build-tests
	@python3 -c "import schemathesis" 2>/dev/null || python3 -m pip install --quiet schemathesis
	Scripts/with-postgres.sh python3 Scripts/soak.py $(SOAK_ARGS)

# The suites under each sanitizer, each in its own build directory (Scripts/sanitizers.py says
# what counts as a finding and where the suppressions' reasons are).
sanitize: deps
	Scripts/with-postgres.sh python3 Scripts/sanitizers.py

# Every parser that reads the network or a file, under libFuzzer with the address sanitizer
# (Sources/OfflineSyncFuzzing lists the targets; Scripts/fuzz.py runs them). Its own build
# directory, in release mode: `-DFUZZING` turns offline-sync-fuzz from a replayer into
# libFuzzer's driver, and lld links libFuzzer's runtime where gold fails to.
FUZZ_SECONDS ?= 60
FUZZ_BUILD := .build/fuzz-build
fuzz: deps
	$(SWIFT) build -c release --product offline-sync-fuzz --scratch-path $(FUZZ_BUILD) \
		-Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld
	python3 Scripts/fuzz.py --bin $(FUZZ_BUILD)/release/offline-sync-fuzz --seconds $(FUZZ_SECONDS)

# The whole LocalStore suite through `offline-sync conformance`, as a user runs it: against
# LMDB, against an encrypted file opened with a passphrase and with a raw key (cheap KDF
# settings, so the suite's hundreds of opens stay fast), and against PostgreSQL when
# OFFLINE_SYNC_TEST_POSTGRES_URL names a server (in schemas of its own; its password is not
# echoed). Passing cases are not echoed; every group line, failure and the totals are, and
# any failure fails the target.
conformance-cli: deps
	$(SWIFT) build --product offline-sync
	@tool="$$($(SWIFT) build --show-bin-path)/offline-sync"; \
	scratch="$$(mktemp -d)"; trap 'rm -rf "$$scratch"' EXIT; \
	export OFFLINE_SYNC_CONFORMANCE_PASSPHRASE="correct horse battery staple"; \
	export OFFLINE_SYNC_CONFORMANCE_KEY="$$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"; \
	urls=("lmdb://$$scratch/env" \
	      "encrypted-file://$$scratch/pass.osync?passphrase-env=OFFLINE_SYNC_CONFORMANCE_PASSPHRASE&kdf=pbkdf2&iterations=1000" \
	      "encrypted-file://$$scratch/key.osync?key-env=OFFLINE_SYNC_CONFORMANCE_KEY"); \
	if [ -n "$${OFFLINE_SYNC_TEST_POSTGRES_URL:-}" ]; then \
		pg="$$OFFLINE_SYNC_TEST_POSTGRES_URL"; \
		case "$$pg" in *\?*) pg="$$pg&";; *) pg="$$pg?";; esac; \
		urls+=("$${pg}schema=osync_test_$${OFFLINE_SYNC_TEST_RUN:-local}_cli_$$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"); \
	fi; \
	for url in "$${urls[@]}"; do \
		echo "offline-sync conformance --store $$url" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#'; \
		"$$tool" conformance --store "$$url" | grep -v '^  PASS '; \
	done

demo: deps
	$(SWIFT) run offline-sync demo

# Two apps keeping their todos in their own GRDB databases sync through a live server.
demo-grdb: deps
	$(SWIFT) run offline-sync demo-grdb

# Flags and environment: see `offline-sync serve --help` (OFFLINE_SYNC_HOST, OFFLINE_SYNC_PORT,
# OFFLINE_SYNC_STORE, OFFLINE_SYNC_TOKEN_SECRET, OFFLINE_SYNC_ADMIN_KEY, OFFLINE_SYNC_DATA).
serve: deps
	$(SWIFT) build --product offline-sync
	exec "$$($(SWIFT) build --show-bin-path)/offline-sync" serve $(SERVE_FLAGS)

IDENTITY ?= dev
token: deps
	@$(SWIFT) build --product offline-sync >/dev/null
	@"$$($(SWIFT) build --show-bin-path)/offline-sync" token --identity "$(IDENTITY)"

# The PostgreSQL workload runs against a throwaway cluster (or OFFLINE_SYNC_TEST_POSTGRES_URL's server).
bench: deps
	$(SWIFT) build -c release --product offline-sync
	$(SWIFT) build -c release --product offline-sync-harness
	Scripts/with-postgres.sh $(SWIFT) run -c release --skip-build offline-sync-harness bench

# Workloads too large for `make bench`: pull-10m (ten million rows against pull-1m). The first
# run seeds bench-work/seed-10000000.sqlite (minutes; kept), and a run needs about 10 GB of disk.
bench-scale: deps
	$(SWIFT) build -c release --product offline-sync
	$(SWIFT) build -c release --product offline-sync-harness
	$(SWIFT) run -c release --skip-build offline-sync-harness bench --only pull-10m --runs 1

# The load test (bounded: about twenty minutes with its release build and seeding); the short form in
# `make test` checks the same invariants with 200 clients for a few seconds.
loadtest: deps
	$(SWIFT) build -c release --product offline-sync
	$(SWIFT) build -c release --product offline-sync-harness
	Scripts/with-postgres.sh sh -c '"$$0" loadtest --postgres "$$OFFLINE_SYNC_TEST_POSTGRES_URL" --output loadtest-results.json' \
		"$$($(SWIFT) build -c release --show-bin-path)/offline-sync-harness"
	# The reads from hot standbys on a server of their own: standbys cost the other workloads' primary.
	Scripts/with-postgres.sh Scripts/with-replicas.sh 2 sh -c 'harness="$$0"; set -- $$OFFLINE_SYNC_TEST_POSTGRES_REPLICAS; \
		"$$harness" loadtest --only pulls-postgres-replicas --postgres "$$OFFLINE_SYNC_TEST_POSTGRES_URL" \
		--postgres-replica "$$1" --postgres-replica "$$2" --output loadtest-replicas.json' \
		"$$($(SWIFT) build -c release --show-bin-path)/offline-sync-harness"
	Scripts/loadtest-plot.py --merge loadtest-replicas.json loadtest-results.json Docs/loadtest-latency.svg Docs/Performance.md
	rm -f loadtest-replicas.json

# What each HTTP transport adds to an app's binary: Scripts/client-size's two clients, release, stripped.
client-size: deps
	$(SWIFT) build --product offline-sync
	Scripts/client-size.py "$$($(SWIFT) build --show-bin-path)/offline-sync"

# The DocC documentation of the core and the adapter toolkit (Docs/ guides included as
# articles), as .doccarchive bundles under .build/plugins/Swift-DocC/outputs; any DocC
# warning fails it.
docs: deps
	$(SWIFT) package generate-documentation --target OfflineSync --target OfflineSyncStoreKit --warnings-as-errors

clean:
	@if command -v $(SWIFT) >/dev/null 2>&1; then $(SWIFT) package clean; else rm -rf .build; fi
	rm -rf $(EXAMPLE)/.build $(EXAMPLE_BUILD)

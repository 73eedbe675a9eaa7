# The project's verbs. `make test` is what CI runs (.ci/run).

CARGO          ?= cargo
PREFIX         ?= /usr/local
DESTDIR        ?=
SYSCONFDIR     ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system

# `make install CARGO_PROFILE=dev` installs a debug build (quick checks of the install layout).
CARGO_PROFILE  ?= release
OUT := target/$(if $(filter dev,$(CARGO_PROFILE)),debug,$(CARGO_PROFILE))
HOOKS   := resume suspend resume-fail

.PHONY: build test bench install clean

## build: binaries (release unless CARGO_PROFILE=dev): slurm-dws and slurm-dws-sim
build:
	$(CARGO) build --profile $(CARGO_PROFILE) --bins

## test: install Slurm/munge if missing, then fmt, clippy and every test (real Slurm included)
test:
	./scripts/install-deps.sh
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		echo "$(CARGO) nextest run --no-fail-fast"; \
		$(CARGO) nextest run --no-fail-fast && $(CARGO) test --doc; \
	else \
		echo "$(CARGO) test --no-fail-fast"; \
		$(CARGO) test --no-fail-fast; \
	fi

## bench: release build, then measure every budget of SPEC.md and print one table (not part of `test`)
bench:
	$(CARGO) build --release --bins --example sqlite_commit
	$(CARGO) bench --bench budgets

## install: binaries, hook symlinks, example config (never overwritten), systemd unit
install: build
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(OUT)/slurm-dws $(DESTDIR)$(PREFIX)/sbin/slurm-dws
	for hook in $(HOOKS); do ln -sfn slurm-dws $(DESTDIR)$(PREFIX)/sbin/slurm-dws-$$hook; done
	install -m 0755 $(OUT)/slurm-dws-sim $(DESTDIR)$(PREFIX)/bin/slurm-dws-sim
	@if [ -d conf ]; then \
		install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/slurm-dws; \
		for f in conf/*; do \
			[ -f "$$f" ] || continue; \
			dest=$(DESTDIR)$(SYSCONFDIR)/slurm-dws/$$(basename "$$f"); \
			if [ -e "$$dest" ]; then echo "keeping existing $$dest"; \
			else echo "install $$f -> $$dest"; install -m 0644 "$$f" "$$dest"; fi; \
		done; \
	fi
	@if [ -d systemd ]; then \
		install -d $(DESTDIR)$(SYSTEMDUNITDIR); \
		for f in systemd/*; do \
			[ -f "$$f" ] || continue; \
			echo "install $$f -> $(DESTDIR)$(SYSTEMDUNITDIR)/"; \
			sed 's|/usr/local/|$(PREFIX)/|g' "$$f" > $(DESTDIR)$(SYSTEMDUNITDIR)/$$(basename "$$f"); \
			chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$(basename "$$f"); \
		done; \
	fi

## clean: remove build output
clean:
	$(CARGO) clean

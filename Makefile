# Thin front end: every target's logic lives in Python (the int8-systolic command, python -m int8_systolic....)
# or pytest.
# `make test` and `make install` work on a fresh clone: install creates .venv and
# installs the Debian packages the simulators need when they are missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
DEBIAN_PACKAGES := iverilog build-essential perl liblz4-dev zlib1g-dev
# pytest options, e.g. make test PYTEST_ARGS="-k conv -x"
PYTEST_ARGS ?=
# Accelerator configuration for `make verilog` / `make lint`
ROWS ?= 8
COLS ?= 8
ROUNDING ?= double
# FPGA target for `make synth`: ecp5 (LFE5U-85F) or ice40 (UP5K)
TARGET ?= ecp5
# What `make synth` places and routes: accelerator, array (the MAC array alone), lane (one requantizer lane) axi (the AXI top) or engine (the memory engine)
BLOCK ?= accelerator
# nextpnr placement seed for `make synth` (the routed Fmax moves by up to a third between seeds on 8x8)
SEED ?= 1
# engine parts for `make synth-parts` (comma-separated; empty: all but the core)
PARTS ?=
# seeds `make synth` tries, from SEED on, while the placer finds no legal placement (a design at the
# device's limit, such as the UP5K 4x1; empty: 1, and 3 in `make synth-scaling`)
PLACE_TRIES ?=
# seeds for `make synth-seeds` (one netlist placed and routed with each seed)
SEEDS ?= 1-5
# parallel jobs of `make sim` (simulator runs) and `make synth-seeds` (nextpnr runs): default, the cores
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# `make sim SHARD=i/n`: the i-th of n deterministic parts of the regression (merge with `make sim-merge`)
SHARD ?=
# nextpnr router for `make synth`: router1, router2, router2-alt or router2-tmg (empty: the target's, ecp5 router2-tmg)
ROUTER ?=
# ECP5 multiplier floorplan for `make synth` (fpga/floorplan.py): 1 (default) or 0 (nextpnr places them)
FLOORPLAN ?= 1
# Primitives for `make verilog`: generic (portable) or ecp5 (MULT18X18D multipliers, DP16KD tables)
DSP ?= generic
# `make verilog BLOCK=axi` (and `make lint BLOCK=axi`): the AXI top instead of the core
EXPORT_BLOCK := $(if $(filter axi,$(BLOCK)),axi,core)
VERILOG := build/verilog/int8_systolic_$(if $(filter axi,$(BLOCK)),axi_)$(ROWS)x$(COLS)_$(ROUNDING).v

export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# random cases per op in `make conformance` (the directed and discriminator cases come on top)
PER_OP ?= 30
CONFORMANCE_PACK := build/conformance/int8-conformance-v2

.PHONY: help install sim sim-merge test test-all lint verilog synth synth-seeds synth-scaling synth-parts synth-depth bench bench-models bench-golden demo \
	conformance conformance-rtl formal mutate clean

help:
	@echo "make install       create .venv, install the project + dev tools and missing Debian packages, fetch the MLPerf Tiny models"
	@echo "make sim           the RTL regression: every configuration on Icarus and Verilator (JOBS=n SHARD=i/n WAVES=1 SEED=n)"
	@echo "make sim-merge     merge the summaries and JUnit of SHARD=i/n runs copied into build/sim/shards/"
	@echo "make test          the default test suite (golden model, TFLM cross-check, RTL subset)"
	@echo "make test-all      the default suite plus the slow regressions"
	@echo "make verilog       export build/verilog/int8_systolic_<ROWS>x<COLS>_<ROUNDING>.v (ROWS=8 COLS=8 ROUNDING=double DSP=generic|ecp5)"
	@echo "make synth         Yosys + nextpnr: resources and routed Fmax (TARGET=ecp5|ice40 ROWS COLS ROUNDING BLOCK SEED PLACE_TRIES FLOORPLAN=1|0 ROUTER)"
	@echo "make synth-seeds   one netlist placed and routed with SEEDS=1-5 (JOBS at a time): Fmax spread, worst paths"
	@echo "make synth-scaling 2x2, 4x4, 8x8 and the largest that fits, both targets (table + build/synth/scaling.png)"
	@echo "make synth-parts   each memory-engine part alone on the ECP5 (PARTS=dwgen,in_buf; default all): LUTs, Fmax, worst path"
	@echo "make synth-depth   Yosys only, then every register-to-register path estimated: the long ones and the parts they cross (BLOCK=engine)"
	@echo "make lint          ruff, then verilator --lint-only -Wall on the exported Verilog (reasoned waivers)"
	@echo "make demo          okay_nabu wake-word model, 20 steps, every MAC layer on the RTL (Verilator)"
	@echo "make bench         RTL cycles, utilization and simulation speed (writes build/bench/rtl.json)"
	@echo "make bench-models  every bundled model on the RTL, 8x8 and 16x16: per-layer cycles, utilization, bound (build/bench/models.json)"
	@echo "make bench-golden  time the golden model against TFLite-Micro (writes build/bench/golden.json)"
	@echo "make conformance   write the conformance pack (PER_OP=30, checked against TFLM) and check golden on it"
	@echo "make conformance-rtl  the pack's FC/CONV/DW cases on the RTL (ROUNDING=double|single): report + verdict"
	@echo "make formal        prove the requantizer against the golden arithmetic (SymbiYosys + Boolector, z3)"
	@echo "make mutate        mutation testing of hw/ against make test's RTL tests (JOBS, MUTATE_FILES, MUTATE_ARGS=--resume): build/mutate/report.md"
	@echo "make clean         remove build/ and caches (keeps .venv)"

install: $(STAMP)

$(STAMP): pyproject.toml tools/install-debian-packages.sh tools/fetch_models.py
	tools/install-debian-packages.sh $(DEBIAN_PACKAGES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,fpga]'
	$(PY) tools/fetch_models.py
	touch $@

sim: $(STAMP)
	$(PY) -m int8_systolic.sim.regress --jobs $(JOBS) $(if $(SHARD),--shard $(SHARD))

sim-merge: $(STAMP)
	$(PY) -m int8_systolic.sim.regress --merge build/sim/shards/summary-*.json

test: $(STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP) verilog
	$(PY) -m ruff check .
	$(PY) -m int8_systolic.sim.lint $(VERILOG)

verilog: $(STAMP)
	$(VENV)/bin/int8-systolic export --rows $(ROWS) --cols $(COLS) --rounding $(ROUNDING) --dsp $(DSP) --block $(EXPORT_BLOCK)
	$(PY) -m int8_systolic.hw.registers --markdown build/regs/registers.md

# the configuration options `make synth` and `make synth-seeds` share
SYNTH_ARGS = --target $(TARGET) --rows $(ROWS) --cols $(COLS) --rounding $(ROUNDING) --block $(BLOCK) \
	$(if $(filter 0,$(FLOORPLAN)),--no-floorplan) $(if $(ROUTER),--router $(ROUTER))

synth: $(STAMP)
	$(PY) -m int8_systolic.fpga.synth $(SYNTH_ARGS) --seed $(SEED) $(if $(PLACE_TRIES),--place-tries $(PLACE_TRIES))

synth-seeds: $(STAMP)
	$(PY) -m int8_systolic.fpga.synth $(SYNTH_ARGS) --seeds $(SEEDS) --jobs $(JOBS)

# each part of the memory engine placed and routed alone (out of context): build/synth/engine_parts.json
synth-parts: $(STAMP)
	$(PY) -m int8_systolic.fpga.parts --rows $(ROWS) --cols $(COLS) $(if $(PARTS),--parts $(PARTS))

synth-depth: $(STAMP)
	$(PY) -m int8_systolic.fpga.depth --rows $(ROWS) --cols $(COLS) --block $(if $(filter engine axi accelerator,$(BLOCK)),$(BLOCK),engine)

synth-scaling: $(STAMP)
	$(PY) -m int8_systolic.fpga.synth --scaling --rounding $(ROUNDING)

demo: $(STAMP)
	$(VENV)/bin/int8-systolic run-model okay_nabu --steps 20

bench: $(STAMP)
	$(PY) -m int8_systolic.sim.bench

bench-models: $(STAMP)
	$(PY) -m int8_systolic.sim.bench_models

bench-golden: $(STAMP)
	$(PY) -m int8_systolic.golden.bench

conformance: $(STAMP)
	$(VENV)/bin/int8-systolic conformance make --out $(CONFORMANCE_PACK) --per-op $(PER_OP) --seed $(SEED)
	$(VENV)/bin/int8-systolic conformance run $(CONFORMANCE_PACK) --dut golden --report-dir build/conformance

conformance-rtl: $(STAMP)
	@test -f $(CONFORMANCE_PACK)/manifest.json || $(MAKE) conformance
	$(PY) -m int8_systolic.sim.conformance_rtl $(CONFORMANCE_PACK) --rounding $(ROUNDING) --rows $(ROWS) --cols $(COLS)

formal: $(STAMP)
	$(PY) -m int8_systolic.formal --jobs $(JOBS)

mutate: $(STAMP)
	$(PY) -m int8_systolic.mutate --jobs $(JOBS) $(if $(MUTATE_FILES),--files $(MUTATE_FILES)) $(MUTATE_ARGS)

clean:
	rm -rf build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +

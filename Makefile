# Front door. `make tune` runs the main job, `make test` runs every non-GPU test.
# Both install missing dependencies first (deploy/install-deps.sh) and build in build/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
STAMP := $(BUILD_DIR)/.deps-installed

.PHONY: all build deps tune test gpu-test fuzz format clean

all: build

$(STAMP): deploy/install-deps.sh
	./deploy/install-deps.sh
	@mkdir -p $(BUILD_DIR) && touch $(STAMP)

deps: $(STAMP)

$(BUILD_DIR)/CMakeCache.txt: $(STAMP) CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: tune the default workload on the GPU if there is one, else on the host.
tune: build
	$(BUILD_DIR)/cli/tessel tune

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu

gpu-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L gpu

# The libFuzzer targets of tests/fuzz, built with clang, AddressSanitizer and UBSan in
# $(FUZZ_BUILD_DIR), each run for FUZZ_SECONDS on its seed corpus (new inputs go to
# $(FUZZ_BUILD_DIR)/corpus/<target>, crashes to $(FUZZ_BUILD_DIR)/crash-*). Needs clang.
# `make fuzz FUZZ_TARGETS=submit_job FUZZ_SECONDS=300` builds and runs one target.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := workload_parser trace_replay candidate_file jsonl_import proto_convert submit_job

fuzz: $(STAMP)
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang and libFuzzer: apt-get install \
	  clang libclang-rt-14-dev libomp-dev" >&2; exit 1; }
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_BUILD_TYPE=Debug -DTESSEL_FUZZ=ON \
	  -DTESSEL_WITH_CUDA=OFF
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target $(addprefix tessel_fuzz_,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD_DIR)/corpus/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD_DIR)/tests/fuzz/tessel_fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=25 \
	    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD_DIR)/ \
	    $(FUZZ_BUILD_DIR)/corpus/$$t tests/fuzz/corpus/$$t; \
	done

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)

# Front door. `make tune` runs the main job, `make test` runs every non-GPU test.
# Both install missing dependencies first (deploy/install-deps.sh) and build in build/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
STAMP := $(BUILD_DIR)/.deps-installed

.PHONY: all build deps tune test gpu-test format clean

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

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)

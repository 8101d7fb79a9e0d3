# bubblebench — thin wrapper over CMake. `make deps && make run`, then `make test`.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
PYTHON     ?= /usr/bin/python3
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := build-essential cmake git pkg-config mpich libmpich-dev libhdf5-dev \
  libopenblas-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  python3-h5py python3-pandas python3-matplotlib python3-pytest python3-numpy shellcheck \
  slurm-wlm munge

.PHONY: all deps configure build test run bench asan format clean

all: build

deps:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES)

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# MPI tests start several ranks each: run them one at a time on small machines.
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

# The default job: simulate every schedule over a small sweep, with the closed forms beside.
run: build
	$(BUILD)/bubblebench sim --schedule all -P 4 -M 8:32:x2 -v 2 --t-f 1 --t-b 1 --t-w 1

bench: build
	$(BUILD)/bench_sim

# AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests.
asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBB_SANITIZE=ON -DBB_CUDA=OFF $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure --timeout 900

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) build-asan

# bubblebench — thin wrapper over CMake. `make deps && make run`, then `make test`.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
PYTHON     ?= /usr/bin/python3
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := build-essential cmake git pkg-config mpich libmpich-dev libhdf5-dev \
  libopenblas-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  python3-h5py python3-pandas python3-tables python3-matplotlib python3-pytest python3-numpy \
  libbenchmark-tools python3-scipy shellcheck slurm-wlm munge universal-ctags iproute2 gdb \
  pybind11-dev python3-dev

.PHONY: all deps configure build test run analysis bench asan format clean slurm-soak crash-soak \
  slurm-two-node pip-check

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

# The default job: a real CPU pipeline sweep (two ranks, OpenBLAS stages, gradients checked
# against the sequential reference), results in results/default.h5, then the simulator's view
# of the same schedules at P=4. Ranks are bound to cores (-bind-to core).
RUN_RANKS ?= 2
run: build
	mkdir -p results
	mpiexec -n $(RUN_RANKS) -bind-to core $(BUILD)/bubblebench run --schedule all -M 4,8 -v 2 \
	  --hidden 256 --mb-size 32 --layers 2 --warmup 1 --iters 5 --check \
	  --out results/default.h5 --force
	$(BUILD)/bubblebench sim --schedule all -P 4 -M 8:32:x2 -v 2 --t-f 1 --t-b 1 --t-w 1

# Tables and plots from every results file under results/ (see analysis/README.md).
analysis:
	cd analysis && $(PYTHON) -m bbanalysis report ../results --out ../results/report \
	  --bubblebench $(abspath $(BUILD))/bubblebench

bench: build
	$(BUILD)/bench_sim

# N cold starts of the local SLURM (tools/slurm-local.sh up, a job, down): prints the count.
N ?= 50
slurm-soak:
	bash tests/slurm/soak.sh $(N)

# SLURM nodes on this machine (three slurmd in network + UTS namespaces, root): jobs/multi-node.sbatch
# across two of them over TCP; a node lost mid-sweep and a requeued start forced onto a dead node,
# both ending requeued, resumed and completed (tests/slurm/two_node.sh, ~4 min; ctest slurm.two_node
# runs it in `make test`, so CI runs it where it has root and network namespaces).
slurm-two-node: configure
	cmake --build $(BUILD) -j $(JOBS) --target bubblebench
	bash tests/slurm/two_node.sh $(BUILD)/bubblebench

# Crash safety of `run --out`: N kills per signal (SIGKILL/SIGINT/SIGTERM to rank 0 or the
# launcher) at random moments under CPU load; each file checked, then resumed (docs/runtime.md).
CRASH_ITERS ?= 300
crash-soak: build
	ITERS=$(CRASH_ITERS) bash tests/mpi/crash_soak.sh $(BUILD)/bubblebench mpiexec $(N)

# `pip install .` into a fresh venv (PyPI's scikit-build-core and pybind11), then the module's
# tests against this build's CLI (tests/python/pip_install.sh; README "From Python").
pip-check: build
	bash tests/python/pip_install.sh $(BUILD)/bubblebench $(PYTHON)

# AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests.
asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBB_SANITIZE=ON -DBB_CUDA=OFF $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure --timeout 900

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) build-asan

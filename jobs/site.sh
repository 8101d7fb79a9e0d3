# shellcheck shell=bash
# bubblebench: the site's environment for the jobs — the one file a site edits. Sourced by
# jobs/common.sh (so by every jobs/*.sbatch script) when the job starts, before anything
# else; SITE_SH=/path/to/file uses another file instead. It runs inside the batch script
# (bash, `set -euo pipefail`): a command that fails stops the job, so guard optional ones.
# The srun step inherits what it exports.
#
# Examples (uncomment and adapt):
#
# Environment modules (Lmod / Environment Modules):
#   module purge
#   module load gcc/12 mpich/4.0 cuda/13.0 hdf5/1.10
#
# An MPI or CUDA outside the default paths:
#   export PATH=/opt/mpich/bin:$PATH
#   export LD_LIBRARY_PATH=/opt/mpich/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
#
# Site defaults for the scripts' variables (a value given at submission still wins):
#   : "${MPI_PLUGIN:=pmi2}"        # srun --mpi=...; pmix for an MPI built against PMIx
#   : "${SRUN_ARGS:=}"             # e.g. --network=... on some fabrics
#
# NCCL / UCX tuning for this fabric:
#   export NCCL_IB_HCA=mlx5
#   export UCX_TLS=rc,sm,self

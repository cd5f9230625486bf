# Sourced by the multi-rank tests: the binary and the launcher from the
# arguments (TESSERA MPIEXEC), a scratch directory removed on exit, one thread
# per rank (the ranks share the cores), and `mpi N command...` to launch N ranks.
tessera=$1
mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
mpi() { "$mpiexec" -np "$1" --allow-run-as-root --oversubscribe "${@:2}"; }

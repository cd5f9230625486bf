# Sourced by the multi-rank tests: the binary and the launcher from the
# arguments (TESSERA MPIEXEC), a scratch directory removed on exit, one thread
# per rank (the ranks share the cores), and `mpi N command...` to launch N ranks.
tessera=$1
mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
mpi() { "$mpiexec" -np "$1" --allow-run-as-root --oversubscribe "${@:2}"; }
# largest_error_pct RUN_DIR: the largest |error_pct| of `tessera compare` over every rank and category of a run.
largest_error_pct() {
  "$tessera" compare "$1/plan.json" "$1/metrics.json" --format json |
    grep -o '"error_pct": [-0-9.e+]*' | awk '{e = $2 < 0 ? -$2 : $2; if (e > m) m = e} END {print m + 0}'
}

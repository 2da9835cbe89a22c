# Sourced by the training benches: sets the array `mpi` to the command that starts 2 processes here
# (oversubscribed and unbound, as the cores are shared; as root with both of OpenMPI's consents), or to ()
# with NO_MPI=1 or without mpirun. MPIRUN=CMD starts them with CMD instead, one per host: e.g. the mpirun of
# scripts/hosts.sh's test hosts (MPIRUN=/tmp/dtrain-hosts-dt/mpirun), for 2 processes on 2 hosts.
mpi=()
if [[ -n "${MPIRUN:-}" && -z "${NO_MPI:-}" ]]; then
  read -r -a mpi <<<"$MPIRUN"
  mpi+=(-np 2 --map-by node)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
elif [[ -z "${NO_MPI:-}" ]] && command -v mpirun >/dev/null; then
  mpi=(mpirun -np 2 --oversubscribe --bind-to none)
  if [[ $(id -u) -eq 0 ]]; then
    mpi+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi

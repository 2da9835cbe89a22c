# Sourced by the training benches: sets the array `mpi` to the command that starts 2 processes here
# (oversubscribed and unbound, as the cores are shared; as root with both of OpenMPI's consents), or to ()
# with NO_MPI=1 or without mpirun.
mpi=()
if [[ -z "${NO_MPI:-}" ]] && command -v mpirun >/dev/null; then
  mpi=(mpirun -np 2 --oversubscribe --bind-to none)
  if [[ $(id -u) -eq 0 ]]; then
    mpi+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi

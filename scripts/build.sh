#!/usr/bin/env bash
# Configures and builds dtrain (Release) into build/ (or $1): every target, or only the targets named after the
# folder (scripts/dtrain.sh builds `dtrain` alone). The CUDA backend is built when nvcc is found (it is looked
# for in /usr/local/cuda too), as build/libdtrain_cuda.so beside dtrain, which loads it from there; MPI when
# OpenMPI is installed. The compiler's output goes to BUILD_DIR/build.log; the console shows the progress, any
# warning, and on failure the log's end.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
targets=("${@:2}")
[[ -d /usr/local/cuda/bin ]] && export PATH="$PATH:/usr/local/cuda/bin"
launcher=()  # ccache, when installed, makes rebuilds in several build folders cheap
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
target_args=()
for target in "${targets[@]}"; do target_args+=(--target "$target"); done
log="$build_dir/build.log"
# On a terminal one line shows the step being built; elsewhere (CI logs) each tenth of the way.
show_progress() {
  local line shown=-10 percent
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      percent=${BASH_REMATCH[1]}
      if [[ -t 1 ]]; then
        printf '\r\033[K  building: %s' "${line:0:$((${COLUMNS:-100} - 12))}"
      elif ((percent >= shown + 10)); then
        echo "  building: $percent%"
        shown=$percent
      fi
    elif [[ $line == *warning:* || $line == *error:* ]]; then
      [[ -t 1 ]] && printf '\r\033[K'
      printf '%s\n' "$line"
    fi
  done
  [[ -t 1 ]] && printf '\r\033[K'
  return 0
}
: >"$log"
status=0
# pipefail: the status is the build's (show_progress never fails)
cmake --build "$build_dir" -j"$(nproc)" "${target_args[@]}" 2>&1 | show_progress || status=$?
if ((status != 0)); then
  echo "build.sh: the build failed; the end of $log:" >&2
  tail -40 "$log" >&2
  exit "$status"
fi
echo "build.sh: built ${targets[*]:-every target} in $build_dir"

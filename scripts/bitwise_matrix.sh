#!/usr/bin/env bash
# train.bitwise on the real data: each shipped config trained on {1}, {8} (or the config's data-parallel
# equivalent), its own mesh, {2,2,2} where its layouts allow, and under `mpirun -np 2` and `-np 4`; every run
# compared with the one-device run by `dtrain diff` (checkpoints) and `dtrain diff --metrics` (every logged
# loss). Prints one line per run and exits 1 if any differs.
#   scripts/bitwise_matrix.sh DTRAIN DATA_DIR [EPOCH_OVERRIDES...]
#   e.g. scripts/bitwise_matrix.sh build/dtrain ../shared/data --set data.train_split=train[:4096]
# DATA_DIR holds mnist/ and aclImdb/ (an extracted copy of the archive).
set -uo pipefail
dtrain=$(realpath "$1"); data=$(realpath "$2"); shift 2
extra=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failed=0
# config | path | one-device mesh | other meshes (; separated)
matrix=(
  "imdb_dp|aclImdb|{batch: 1}|{batch: 8};{batch: 2}"
  "imdb_dp_adam|aclImdb|{batch: 1}|{batch: 8};{batch: 4}"
  "imdb_mp|aclImdb|{batch: 1, model: 1}|{batch: 4, model: 2};{batch: 8, model: 1};{batch: 2, model: 4}"
  "imdb_sp|aclImdb|{batch: 1, feature: 1, model: 1}|{batch: 2, feature: 2, model: 2};{batch: 8, feature: 1, model: 1}"
  "mnist_core_dp|mnist|{batch: 1}|{batch: 8};{batch: 2}"
  "mnist_mp|mnist|{batch: 1, model: 1}|{batch: 4, model: 2};{batch: 2, model: 4}"
  "mnist_cnn_sp|mnist|{batch: 1, spatial: 1}|{batch: 4, spatial: 2};{batch: 8, spatial: 1}"
  "imdb_embedding|aclImdb|{batch: 1, model: 1}|{batch: 4, model: 2};{batch: 8, model: 1}"
  "imdb_transformer|aclImdb|{batch: 1, model: 1, seq: 1}|{batch: 2, model: 2, seq: 2};{batch: 8, model: 1, seq: 1}"
)
for row in "${matrix[@]}"; do
  IFS='|' read -r name path one others <<<"$row"
  common=(--config "$root/configs/$name.yaml" --set "data.path=$data/$path" --set train.bitwise=true
          --set train.log_every=1 "${extra[@]}")
  train() {  # train TAG NP MESH
    local tag=$1 np=$2 mesh=$3 rc=0
    local args=(train "${common[@]}" --set "mesh.dims=$mesh" --set "checkpoint.dir=$work/$name-$tag" --run-dir "$work/run-$name-$tag")
    if [[ $np == 1 ]]; then "$dtrain" "${args[@]}" >"$work/out" 2>&1 || rc=$?
    else mpirun --oversubscribe -np "$np" "$dtrain" "${args[@]}" >"$work/out" 2>&1 || rc=$?; fi
    if [[ $rc != 0 ]]; then echo "FAILED $name $tag ($mesh, -np $np): exit $rc: $(tail -2 "$work/out")"; failed=1; return 1; fi
    grep -h "test accuracy" "$work/out" | tail -1
  }
  start=$(date +%s)
  reference=$(train one 1 "$one") || continue
  IFS=';' read -ra meshes <<<"$others"
  runs=()
  for mesh in "${meshes[@]}"; do runs+=("1|$mesh"); done
  runs+=("2|${meshes[0]}" "4|${meshes[0]}")
  for run in "${runs[@]}"; do
    IFS='|' read -r np mesh <<<"$run"
    tag="np$np-$(echo "$mesh" | tr -dc '0-9')"
    accuracy=$(train "$tag" "$np" "$mesh") || continue
    ckpt=0; losses=0
    "$dtrain" diff "$work/$name-one" "$work/$name-$tag" >"$work/diff" 2>&1 || ckpt=$?
    "$dtrain" diff --metrics "$work/run-$name-one" "$work/run-$name-$tag" >"$work/mdiff" 2>&1 || losses=$?
    verdict="identical"; [[ $ckpt == 0 && $losses == 0 ]] || { verdict="DIFFERENT ($(grep verdict "$work/diff"), $(grep -m1 'first differing\|verdict' "$work/mdiff"))"; failed=1; }
    echo "$name $mesh -np $np: $verdict; $(grep -m1 'losses identical' "$work/mdiff" || true); $accuracy"
  done
  echo "$name: one device $reference; $(( $(date +%s) - start )) s"
done
exit $failed

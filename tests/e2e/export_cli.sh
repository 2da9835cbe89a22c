#!/usr/bin/env bash
# End-to-end `dtrain export`: every shipped config's model (the MLPs, the CNN, the ResNet, the TF-IDF models with
# the parameter-free batch norm, the embedding model and the transformer), trained a few steps on small data on
# its own mesh (and one MLP under `mpirun -np 2`), and a masked causal transformer, a binary head, arrays models
# (one a graph of merge layers) and an image folder model, exported with --onnx and --safetensors, then read by PyPI's
# readers in the .venv: onnx.checker passes, onnxruntime's probabilities on the same inputs equal `dtrain
# predict --output`'s within 1e-5 (a text model's inputs made from the vectorizer written beside the model),
# the metadata names the classes, the step and the run; safetensors.numpy gives every variable of the
# checkpoint (read with h5py) bit for bit. And the usage errors: exit 2.
# Usage: export_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/venv.sh"
configs=$source_dir/configs

# ---- usage errors (no training needed) ----
expect 2 "export: give --onnx FILE and/or --safetensors FILE" -- export nowhere
expect 2 "export: nowhere does not exist" -- export nowhere --onnx m.onnx
expect 2 "export: --onnx no_such_folder/m.onnx: folder no_such_folder does not exist" -- export . --onnx no_such_folder/m.onnx
mkdir not_a_checkpoint
expect 2 "dtrain: error: .*not_a_checkpoint" -- export not_a_checkpoint --safetensors m.safetensors
check "a refused export writes nothing" test ! -e m.safetensors
expect 2 "export takes no --config" -- export not_a_checkpoint --onnx m.onnx --config x.yaml
expect 2 "required" -- export --onnx m.onnx

python=$(venv_python onnx onnxruntime safetensors numpy h5py) || python=
[[ -n $python ]] || skip_part "onnxruntime's and safetensors' checks (no .venv with onnx, onnxruntime, safetensors, numpy and h5py: scripts/python_env.sh)"

# ---- data: the MNIST-format IDX files (data/) and an aclImdb tree (data/aclImdb) ----
source "$lib/mnist_fixture.sh"
python3 - <<'PY'
import os, random
random.seed(5)
words = "movie film plot acting the a was ending music and it not story scene actor long".split()
for split, count in (("train", 48), ("test", 16)):
    for label in ("pos", "neg"):
        folder = f"data/aclImdb/{split}/{label}"
        os.makedirs(folder)
        for i in range(count):
            text = [random.choice(words) for _ in range(random.randrange(5, 30))]
            for _ in range(3):
                text.insert(random.randrange(len(text)), random.choice(["great", "superb"] if label == "pos" else ["bad", "dull"]))
            with open(f"{folder}/{i}_7.txt", "w") as f:
                f.write(" ".join(text).capitalize() + ". The end!")
# What predict classifies: 12 texts (fewer than any batch: the parameter-free batch norm normalizes over one batch).
texts = []
for i in range(12):
    text = [random.choice(words) for _ in range(random.randrange(3, 40))]
    text.insert(random.randrange(len(text)), random.choice(["great", "bad", "superb", "dull", "unheard"]))
    texts.append(" ".join(text) + ("!" if i % 2 else "."))
open("texts.txt", "w").write("\n".join(texts) + "\n")
PY
mapfile -t texts <texts.txt

quick=(--set train.eval_every_epoch=false)

# exported NAME: CKPT's export into NAME.onnx and NAME.safetensors (checked to exit 0).
exported() {
  expect 0 "written to $1.onnx" -- export "$2" --onnx "$1.onnx" --safetensors "$1.safetensors"
}

# compare NAME CKPT INPUT_KIND: onnxruntime on NAME.onnx against predict's NAME.csv; NAME.safetensors against CKPT.
compare() {
  [[ -n $python ]] || return 0
  check "$1: onnxruntime gives predict's probabilities; safetensors holds the checkpoint's variables" \
    "$python" - "$1" "$2" "$3" <<'PY'
import csv, json, os, re, sys
import h5py, numpy as np, onnx, onnxruntime
from safetensors.numpy import load_file

name, checkpoint, kind = sys.argv[1:]
checkpoint = checkpoint if os.path.exists(f"{checkpoint}/index.h5") else f"{checkpoint}/{open(checkpoint + '/latest').read().strip()}"
model = onnx.load(f"{name}.onnx")
onnx.checker.check_model(model, full_check=True)
assert model.opset_import[0].version >= 17, model.opset_import
meta = {p.key: p.value for p in model.metadata_props}
rows = list(csv.reader(open(f"{name}.csv")))
classes = len(rows[0]) - 3
names = json.loads(meta["class_names"])
assert len(names) == classes, (names, rows[0])
for r in rows[1:]:
    assert names[int(r[1])] == r[2], (names, r)
step = int(re.search(r"ckpt-(\d+)$", checkpoint).group(1))
assert meta["step"] == str(step), (meta, checkpoint)
assert meta["run_id"] == re.search(r"^run_id (\S+)$", open(f"{checkpoint}/manifest").read(), re.M).group(1), meta

# The inputs predict read, as the ONNX model takes them.
shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
if kind == "idx":  # raw pixels 0..255
    raw = open("data/t10k-images-idx3-ubyte", "rb").read()[16:]
    x = np.frombuffer(raw, dtype=np.uint8).astype(np.float32).reshape([-1] + shape)
elif kind.startswith("npy:"):  # raw values (before data.arrays.divide_by)
    x = np.load(kind[4:]).astype(np.float32).reshape([-1] + shape)
else:  # texts through the vectorizer beside the model: Keras' lower_and_strip_punctuation, whitespace split
    v = json.load(open(f"{name}.vectorizer.json"))
    vocabulary = {t: i for i, t in enumerate(v["vocabulary"])}
    punctuation = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\''
    def tokens(text):
        return "".join(c for c in text.lower() if c not in punctuation).split()
    texts = open("texts.txt").read().splitlines()
    if v["mode"] == "tf_idf":
        x = np.zeros((len(texts), v["max_tokens"]), dtype=np.float32)
        idf = np.array(v["idf"], dtype=np.float32)
        for i, text in enumerate(texts):
            counts = np.zeros(len(v["vocabulary"]), dtype=np.float32)
            for t in tokens(text):
                counts[vocabulary.get(t, 0)] += 1  # out of vocabulary: [UNK], column 0
            x[i, :len(counts)] = counts * idf
    else:
        length = v["output_sequence_length"]
        x = np.zeros((len(texts), length), dtype=np.int64)
        for i, text in enumerate(texts):
            ids = [vocabulary.get(t, 1) for t in tokens(text)]  # 0 pads, 1 is [UNK]
            ids = ids[:length] if v["truncating"] == "post" else ids[-length:]
            if v["padding"] == "post": x[i, :len(ids)] = ids
            else: x[i, length - len(ids):] = ids
got = onnxruntime.InferenceSession(f"{name}.onnx", providers=["CPUExecutionProvider"]).run(["probabilities"], {"input": x})[0]
expected = np.array([[float(p) for p in r[3:]] for r in rows[1:]])
assert got.shape == expected.shape, (got.shape, expected.shape)
error = float(np.max(np.abs(got - expected)))
assert error <= 1e-5, f"{name}: onnxruntime differs from predict by {error}"  # NaN fails too

tensors = load_file(f"{name}.safetensors")
with h5py.File(f"{checkpoint}/index.h5") as index:
    stored = [n.decode() if isinstance(n, bytes) else n for n in index["meta/tensors"][()]]
    variables = [n[len("variables/"):] for n in stored if n.startswith("variables/")]
    assert sorted(tensors) == sorted(variables), (sorted(tensors), variables)
    for v in variables:
        whole = index["variables/" + v][()]
        assert whole.dtype == np.float32 and tensors[v].dtype == np.float32, v
        assert whole.shape == tensors[v].shape, (v, whole.shape, tensors[v].shape)
        assert np.array_equal(whole.view(np.uint32), tensors[v].view(np.uint32)), f"{v} differs"
print(f"{name}: {len(expected)} inputs, largest difference {error:.2e}; {len(variables)} variables bitwise equal")
PY
}

# image NAME CONFIG MAX_STEPS SETTINGS...: train the config a few steps on the IDX images, predict the test
# images, export and compare.
image() {
  local name=$1 config=$2 steps=$3
  shift 3
  expect 0 "parameters on mesh" -- train --config "$configs/$config" --set data.path=data --set "train.max_steps=$steps" \
    "${quick[@]}" --set "checkpoint.dir=ckpt_$name" --run-dir "run_$name" "$@"
  expect 0 "written to $name.csv" -- predict --checkpoint "ckpt_$name" --idx data/t10k-images-idx3-ubyte --output "$name.csv"
  exported "$name" "ckpt_$name"
  compare "$name" "ckpt_$name" idx
}

# text NAME CONFIG MAX_STEPS SETTINGS...: the same on the aclImdb tree, predicting texts.txt's texts.
text() {
  local name=$1 config=$2 steps=$3
  shift 3
  expect 0 "parameters on mesh" -- train --config "$configs/$config" --set data.path=data/aclImdb --set "train.max_steps=$steps" \
    "${quick[@]}" --set "checkpoint.dir=ckpt_$name" --run-dir "run_$name" "$@"
  expect 0 "written to $name.csv" -- predict --checkpoint "ckpt_$name" "${texts[@]}" --output "$name.csv"
  exported "$name" "ckpt_$name"
  check "$name: the vectorizer is written beside the model" test -s "$name.vectorizer.json"
  compare "$name" "ckpt_$name" text
}

image keras mnist_keras_dp.yaml 6
image mp mnist_mp.yaml 6
image core mnist_core_dp.yaml 4 --set data.train_split=train --set data.test_split=test
image cnn mnist_cnn_sp.yaml 3
image resnet mnist_resnet_sp.yaml 3
text imdb_dp imdb_dp.yaml 4 --set data.vectorizer.max_tokens=40
text imdb_sp imdb_sp.yaml 4 --set data.vectorizer.max_tokens=40
text imdb_mp imdb_mp.yaml 4 --set data.vectorizer.max_tokens=40
text imdb_adam imdb_dp_adam.yaml 4 --set data.vectorizer.max_tokens=40
text embedding imdb_embedding.yaml 4 --set data.vectorizer.max_tokens=40 --set data.vectorizer.output_sequence_length=24
text transformer imdb_transformer.yaml 4 --set data.vectorizer.max_tokens=40 --set data.vectorizer.output_sequence_length=16

# A checkpoint written by two processes: mnist_mp's mesh with `model` outermost, so that each process holds
# one half of the kernels and writes its own shard file.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 300 mpirun -np 2 --oversubscribe "$dtrain" train --config "$configs/mnist_mp.yaml" --set data.path=data \
    --set "mesh.dims={model: 2, batch: 4}" --set train.max_steps=6 "${quick[@]}" --set checkpoint.dir=ckpt_np2 \
    --run-dir run_np2 </dev/null >np2.log 2>&1 || rc=$?
  check "mpirun -np 2: mnist_mp trains and saves (rc $rc: $(tail -3 np2.log))" test "$rc" = 0
  check "mpirun -np 2: over 2 processes" grep -q "over 2 processes" np2.log
  check "mpirun -np 2: each process wrote a shard file" test -e "ckpt_np2/$(latest ckpt_np2)/shard-0-of-8.h5" -a \
    -e "ckpt_np2/$(latest ckpt_np2)/shard-4-of-8.h5"
  expect 0 "written to np2.csv" -- predict --checkpoint ckpt_np2 --idx data/t10k-images-idx3-ubyte --output np2.csv
  exported np2 "ckpt_np2/$(latest ckpt_np2)"
  compare np2 ckpt_np2 idx
else
  skip_part "the export of a checkpoint written by mpirun -np 2 (no mpirun or no MPI build)"
fi

# Beyond the shipped configs: an embedding's mask_zero (padding hidden from causal attention with dropout, whose
# masked probabilities are zeroed, and left out of the pooled mean), on {batch: 2, model: 2} with the heads sharded.
text masked imdb_transformer.yaml 4 --set data.vectorizer.max_tokens=40 --set data.vectorizer.output_sequence_length=24 \
  --set "model=[{embedding: 16, mask_zero: true, name: token}, {position_embedding: {}, name: position},
    {multi_head_attention: 2, key_dim: 8, dropout: 0.2, causal: true, name: attention},
    {add: {}, inputs: [position, attention]}, {layer_norm: {}}, {dense: 16, activation: gelu}, {global_average_pool: {}},
    {dense: 2}]" --set "mesh.dims={batch: 2, model: 2}" --set "data.layout=[batch, unsharded]" \
  --set "layouts={attention/(query|key|value)/kernel: [unsharded, model, unsharded], attention/attention_output/kernel: [model, unsharded, unsharded]}"
# A binary head (binary_crossentropy over one sigmoid unit): the probabilities [1 - p, p].
text binary imdb_dp_adam.yaml 4 --set data.vectorizer.max_tokens=40 --set train.loss=binary_crossentropy \
  --set "model=[{dense: 8, activation: tanh}, {dense: 1, activation: sigmoid}]"
# An arrays model: its raw uint8 values, divided by data.arrays.divide_by in the graph; average pooling with same padding.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct
from npy_file import npy
random.seed(3)
os.makedirs("arrays")
for split, count in (("train", 96), ("test", 32)):
    values, labels = [], []
    for e in range(count):
        label = random.randrange(4)
        values += [random.randrange(0, 100) + (150 if k % 4 == label else 0) for k in range(25)]
        labels.append(label)
    npy(f"arrays/{split}_x.npy", "|u1", (count, 5, 5, 1), bytes(values))
    npy(f"arrays/{split}_y.npy", "<i8", (count,), struct.pack(f"<{count}q", *labels))
PY
cat >arrays.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data:
  dataset: arrays
  path: arrays
  arrays: {train: {features: train_x.npy, labels: train_y.npy}, test: {features: test_x.npy, labels: test_y.npy}, divide_by: 255}
  batch_size: 8
model:
  - {conv2d: 3, kernel_size: 2, strides: 2, padding: same, activation: tanh}
  - {avg_pool2d: 2, strides: 1, padding: same}
  - {flatten: {}}
  - {dense: 4, activation: softmax}
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}, eval_every_epoch: false}
checkpoint: {dir: ckpt_arrays, every: epoch}
run_dir: run_arrays
YAML
expect 0 "parameters on mesh" -- train --config arrays.yaml
expect 0 "written to arrays.csv" -- predict --checkpoint ckpt_arrays --npy arrays/test_x.npy --output arrays.csv
exported arrays ckpt_arrays
compare arrays ckpt_arrays npy:arrays/test_x.npy

# A functional graph of the merge layers (subtract, multiply, average, concatenate) on the same arrays.
expect 0 "parameters on mesh" -- train --config arrays.yaml --set checkpoint.dir=ckpt_merges --run-dir run_merges \
  --set "model=[{flatten: {}, name: flat}, {dense: 6, activation: relu, name: a},
    {dense: 6, activation: sigmoid, name: b, inputs: flat}, {subtract: {}, inputs: [a, b], name: difference},
    {multiply: {}, inputs: [a, b, difference], name: product}, {average: {}, inputs: [a, b, difference], name: mean},
    {concatenate: {}, inputs: [difference, product, mean], name: joined}, {dense: 4, name: head}]"
expect 0 "written to merges.csv" -- predict --checkpoint ckpt_merges --npy arrays/test_x.npy --output merges.csv
exported merges ckpt_merges
compare merges ckpt_merges npy:arrays/test_x.npy

# An image folder model: RGB PNGs (their pixels kept in a .npy for onnxruntime), a global average pool of images.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct, zlib
from npy_file import npy
random.seed(4)
def png(path, pixels):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\0" + bytes(pixels[y * 24:(y + 1) * 24]) for y in range(8))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
tested = []
for split, count in (("train", 16), ("test", 4)):
    for label, color in (("red", (200, 40, 30)), ("blue", (30, 50, 210))):
        for i in range(count):
            pixels = [min(255, max(0, c + random.randrange(-40, 40))) for _ in range(64) for c in color]
            png(f"shapes/{split}/{label}/{i}.png", pixels)
            if split == "test":
                tested.append((f"shapes/{split}/{label}/{i}.png", pixels))
open("shapes_files.txt", "w").write("\n".join(path for path, _ in tested) + "\n")
npy("shapes_pixels.npy", "|u1", (len(tested), 8, 8, 3), bytes(sum((p for _, p in tested), [])))
PY
cat >shapes.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data: {dataset: image_folder, path: shapes, image_shape: [8, 8, 3], resize: none, batch_size: 8}
model:
  - {conv2d: 4, kernel_size: 3, activation: relu}
  - {global_average_pool: {}}
  - {dense: 2}
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}, eval_every_epoch: false}
checkpoint: {dir: ckpt_shapes, every: epoch}
run_dir: run_shapes
YAML
expect 0 "parameters on mesh" -- train --config shapes.yaml
mapfile -t shape_files <shapes_files.txt
files=()
for f in "${shape_files[@]}"; do files+=(--file "$f"); done
expect 0 "written to shapes.csv" -- predict --checkpoint ckpt_shapes "${files[@]}" --output shapes.csv
exported shapes ckpt_shapes
compare shapes ckpt_shapes npy:shapes_pixels.npy

# --safetensors alone: no ONNX model and no vectorizer.
expect 0 "written to only.safetensors" -- export ckpt_masked --safetensors only.safetensors
check "--safetensors alone writes neither an ONNX model nor a vectorizer" test ! -e only.onnx -a ! -e only.vectorizer.json

report

# The small MNIST-format data set and configs of the CLI scripts (sourced, in the script's work folder):
# h5python (a python3 with h5py, or empty), the IDX files under data/, and config NAME MESH INPUT_LAYOUT
# LAYOUTS, which writes NAME.yaml: the same model and training on another mesh and layouts (dp, mp and sp
# are written here).
# A python3 with h5py (Debian's python3-h5py), for the checks that read HDF5 without dtrain.
h5python=
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import h5py" 2>/dev/null; then h5python=$candidate; break; fi
done

# 512 training and 128 test images of 28x28 whose label is the brightest of 10 pixel bands (learnable).
python3 - <<'PY'
import random, struct
random.seed(1)
def write(prefix, count):
    pixels, labels = bytearray(), bytearray()
    for _ in range(count):
        label = random.randrange(10)
        image = [random.randrange(0, 120) for _ in range(784)]
        for i in range(label * 78, label * 78 + 78):
            image[i] = min(255, image[i] + 120)
        pixels += bytes(image)
        labels.append(label)
    with open(f"data/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 28, 28) + pixels)
    with open(f"data/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + labels)
import os
os.makedirs("data", exist_ok=True)
write("train", 512)
write("t10k", 128)
PY

# config NAME MESH INPUT_LAYOUT LAYOUTS: the same model and training on another mesh and layouts.
config() {
  cat >"$1.yaml" <<YAML
mesh: {dims: $2}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 3}, image_shape: flat, layout: $3}
model:
  - {dense: 32, activation: relu, init: {glorot_uniform: {seed: [1, 2]}}}
  - {dense: 10, init: {glorot_uniform: {seed: [3, 4]}}}
layouts: $4
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.01}}, eval_every_epoch: false}
checkpoint: {dir: ckpt, every: epoch, max_to_keep: 2}
run_dir: run
YAML
}
config dp "{batch: 8}" "[batch, unsharded]" "{}"
config mp "{batch: 4, model: 2}" "[batch, unsharded]" "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}"
config sp "{batch: 2, feature: 2, model: 2}" "[batch, feature]" "{dense1/kernel: [feature, model], dense2/kernel: [model, unsharded]}"

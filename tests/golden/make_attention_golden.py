#!/usr/bin/env python3
# Writes attention_keras.txt: what REAL Keras gives for the sequence layers on [batch, length, features]:
# MultiHeadAttention (plain, causal, with the padding mask of an Embedding(mask_zero=True), with dropout > 0
# in inference, which takes Keras' explicit path), a learned position embedding added to token embeddings,
# LayerNormalization and Dense (gelu) on rank 3, GlobalAveragePooling1D under the mask; the output and the gradients of sum(output * cotangent) for
# the input and every variable (tf.GradientTape). Run with /work/tfvenv/bin/python; dtrain only reads the
# file (tests/test_attention_golden.cpp).
#
# Format:
#   # header
#   case NAME input x|ids
#   layer KIND NAME key=value ...          (the chain, in order)
#   tensor NAME RANK D0 .. D{RANK-1} V0 V1 ...
# tensors: input, every variable by dtrain path (LAYER/query/kernel, ...), cotangent, y, d_input (x only),
# d_PATH for every variable.
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


class PositionEmbedding(keras.layers.Layer):
    """keras_hub's PositionEmbedding added to its input (TokenAndPositionEmbedding's position half)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape):
        self.embeddings = self.add_weight(shape=(input_shape[1], input_shape[2]), name="embeddings")

    def call(self, x):
        return x + self.embeddings


B, T, F = 2, 4, 8
IDS = np.array([[3, 1, 0, 0], [5, 0, 2, 7]], dtype=np.int32)  # padding at the end and inside

CASES = [
    ("dense_gelu", "x", [("dense", "dense1", {"units": 5, "activation": "gelu"})]),
    ("layer_norm", "x", [("layer_norm", "ln1", {"epsilon": 1e-6})]),
    ("mha", "x", [("multi_head_attention", "mha1", {"num_heads": 2, "key_dim": 4})]),
    ("mha_causal", "x", [("multi_head_attention", "mha1", {"num_heads": 2, "key_dim": 4, "causal": 1})]),
    ("mha_padding", "ids", [("embedding", "emb1", {"input_dim": 10, "output_dim": F, "mask_zero": 1}),
                            ("position_embedding", "pos1", {}),
                            ("multi_head_attention", "mha1", {"num_heads": 2, "key_dim": 4})]),
    ("mha_padding_causal_dropout", "ids",
     [("embedding", "emb1", {"input_dim": 10, "output_dim": F, "mask_zero": 1}),
      ("multi_head_attention", "mha1",
       {"num_heads": 2, "key_dim": 3, "value_dim": 5, "output_shape": 6, "dropout": 0.1, "causal": 1})]),
    ("mha_no_bias", "x", [("multi_head_attention", "mha1", {"num_heads": 4, "key_dim": 2, "use_bias": 0})]),
    ("masked_block", "ids", [("embedding", "emb1", {"input_dim": 10, "output_dim": F, "mask_zero": 1}),
                             ("position_embedding", "pos1", {}),
                             ("multi_head_attention", "mha1", {"num_heads": 2, "key_dim": 4, "causal": 1}),
                             ("layer_norm", "ln1", {"epsilon": 1e-6}),
                             ("dense", "dense1", {"units": 6, "activation": "gelu"}),
                             ("global_average_pool", "pool1", {})]),
]


def write_tensor(out, name, value):
    value = np.asarray(value, dtype=np.float32)
    values = " ".join(repr(float(v)) for v in value.reshape(-1))
    out.write(f"tensor {name} {value.ndim} {' '.join(str(d) for d in value.shape)} {values}\n")


def make_layer(kind, name, a):
    if kind == "dense":
        return keras.layers.Dense(a["units"], activation=a["activation"], name=name), {}
    if kind == "layer_norm":
        return keras.layers.LayerNormalization(epsilon=a["epsilon"], name=name), {}
    if kind == "embedding":
        return keras.layers.Embedding(a["input_dim"], a["output_dim"], mask_zero=bool(a["mask_zero"]), name=name), {}
    if kind == "position_embedding":
        return PositionEmbedding(name=name), {}
    if kind == "global_average_pool":
        return keras.layers.GlobalAveragePooling1D(name=name), {}
    layer = keras.layers.MultiHeadAttention(
        a["num_heads"], a["key_dim"], value_dim=a.get("value_dim"), dropout=a.get("dropout", 0.0),
        use_bias=bool(a.get("use_bias", 1)), output_shape=a.get("output_shape"), name=name)
    return layer, {"use_causal_mask": bool(a.get("causal", 0))}


# dtrain's path of each Keras variable of a layer.
def variable_paths(kind, name, layer):
    if kind == "multi_head_attention":
        out = []
        for sub, dense in [("query", layer._query_dense), ("key", layer._key_dense), ("value", layer._value_dense),
                           ("attention_output", layer._output_dense)]:
            out.append((f"{name}/{sub}/kernel", dense.kernel))
            if dense.bias is not None:
                out.append((f"{name}/{sub}/bias", dense.bias))
        return out
    if kind == "global_average_pool":
        return []
    names = {"dense": ["kernel", "bias"], "layer_norm": ["gamma", "beta"], "embedding": ["embeddings"],
             "position_embedding": ["embeddings"]}[kind]
    weights = {"dense": lambda: [layer.kernel, layer.bias], "layer_norm": lambda: [layer.gamma, layer.beta],
               "embedding": lambda: [layer.embeddings], "position_embedding": lambda: [layer.embeddings]}[kind]()
    return [(f"{name}/{n}", w) for n, w in zip(names, weights)]


def main(path):
    rng = np.random.default_rng(11)
    with open(path, "w") as out:
        out.write(f"# Keras sequence layers golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        for case, input_kind, chain in CASES:
            if input_kind == "x":
                inp = keras.Input((T, F))
                x_value = rng.uniform(-1, 1, size=(B, T, F)).astype(np.float32)
            else:
                inp = keras.Input((T,), dtype="int32")
                x_value = IDS
            h = inp
            layers = []
            for kind, name, attributes in chain:
                layer, call_kwargs = make_layer(kind, name, attributes)
                h = layer(h, h, **call_kwargs) if kind == "multi_head_attention" else layer(h)
                layers.append((kind, name, layer))
            model = keras.Model(inp, h)
            out.write(f"case {case} input {input_kind}\n")
            for kind, name, attributes in chain:
                out.write(f"layer {kind} {name} " + " ".join(f"{k}={v}" for k, v in attributes.items()) + "\n")
            write_tensor(out, "input", x_value)
            variables = []
            for kind, name, layer in layers:
                for dpath, var in variable_paths(kind, name, layer):
                    var.assign(rng.uniform(-0.7, 0.7, size=var.shape).astype(np.float32))
                    write_tensor(out, dpath, var.numpy())
                    variables.append((dpath, var))
            x = tf.constant(x_value)
            y = model(x, training=False)
            cotangent = tf.constant(rng.uniform(-1, 1, size=y.shape).astype(np.float32))
            with tf.GradientTape() as tape:
                if input_kind == "x":
                    tape.watch(x)
                y = model(x, training=False)
                loss = tf.reduce_sum(y * cotangent)
            sources = ([x] if input_kind == "x" else []) + [v for _, v in variables]
            grads = tape.gradient(loss, sources)
            write_tensor(out, "cotangent", cotangent.numpy())
            write_tensor(out, "y", y.numpy())
            if input_kind == "x":
                write_tensor(out, "d_input", grads[0].numpy())
                grads = grads[1:]
            for (dpath, _), g in zip(variables, grads):
                g = tf.convert_to_tensor(g)  # an embedding's gradient comes as IndexedSlices
                write_tensor(out, "d_" + dpath, g.numpy())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "attention_keras.txt"))

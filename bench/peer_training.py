"""The timed training loop the PyTorch peers of the training benches share (cnn_peer.py, transformer_peer.py,
mlp_peer.py, embedding_peer.py): batches taken in order from whole tensors, Adam with Keras' defaults (or the
caller's optimizer), mean (or summed) cross-entropy; --warmup steps, then --steps timed one by one. Returns the
figures every peer prints."""
import resource
import statistics
import time

import torch
import torch.nn.functional as F


def train_timed(net, x_all, y_all, batch, warmup, steps, optimizer=None, reduction="mean"):
    """optimizer: the net's optimizer (Adam 1e-3 with Keras' defaults when None); reduction: the loss's."""
    opt = optimizer or torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    batches = x_all.shape[0] // batch

    def step(i):
        j = i % batches
        xb, yb = x_all[j * batch:(j + 1) * batch], y_all[j * batch:(j + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(xb), yb, reduction=reduction)
        loss.backward()
        opt.step()
        return loss

    for i in range(warmup):
        step(i)
    times = []
    for i in range(warmup, warmup + steps):
        start = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - start)
    median, mean = statistics.median(times), sum(times) / len(times)
    return {"seconds": round(median, 6), "examples_per_s": round(batch / median, 1),
            "mean_seconds": round(mean, 6), "examples_per_s_mean": round(batch / mean, 1),
            "last_loss": round(float(loss), 5),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}

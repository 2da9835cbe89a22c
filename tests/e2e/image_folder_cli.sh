#!/usr/bin/env bash
# End-to-end: the real `dtrain` binary on a small generated image folder (dataset: image_folder): 3 classes
# (blue, green, red) of RGB PNGs, gray PNGs and JPEGs, some of another size (resized): plan -> train -> inspect
# -> eval -> predict on image files (the right class for each, one line naming each file); a corrupt image is
# exit 2 naming the file (or skipped and counted with on_bad_file: skip); resize none refuses another size;
# predict refuses a text file for an image model.
# Usage: image_folder_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# PNGs written here (zlib, no imaging library); JPEGs written by libjpeg (tests/image_files.hpp's write_jpeg,
# quality 75), kept as base64: a 12x12 mostly-red, -green and -blue one and a 12x12 gray one.
python3 - <<'PY'
import base64, os, random, struct, zlib
random.seed(3)
def png(path, width, height, pixels, channels):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    stride = width * channels
    raw = b"".join(b"\0" + bytes(pixels[y * stride:(y + 1) * stride]) for y in range(height))
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
colors = {"red": (220, 40, 30), "green": (30, 200, 50), "blue": (40, 60, 210)}
def image(name, size, channels):
    pixels = []
    for _ in range(size * size):
        rgb = [min(255, max(0, v + random.randrange(-30, 30))) for v in colors[name]]
        pixels += rgb + [random.randrange(256)] if channels == 4 else rgb  # alpha is dropped
    return pixels
for split, count in (("train", 24), ("test", 8)):
    for name in colors:
        for i in range(count):
            size = 16 if i % 4 == 0 else 12  # resized to 12x12 (bilinear)
            channels = 4 if i % 3 == 0 else 3
            png(f"data/shapes/{split}/{name}/{i}.png", size, size, image(name, size, channels), channels)
jpegs = {
    "red": "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjL/wAARCAAMAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDFpRntRj+tNHI5Ar58/UD/2Q==",
    "green": "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjL/wAARCAAMAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwC6KUe1Lj+tNByOgr5Y/Pj/2Q==",
    "blue": "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjL/wAARCAAMAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDjxSj2pcf1poOR0Ffox5Z//9k=",
}
for name, text in jpegs.items():
    for split in ("train", "test"):
        open(f"data/shapes/{split}/{name}/photo.JPG", "wb").write(base64.b64decode(text))
    open(f"{name}.jpg", "wb").write(base64.b64decode(text))
open("gray.jpeg", "wb").write(base64.b64decode("/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/wAALCAAMAAwBAREA/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/9oACAEBAAA/AKO0BCTFsH97aOPzNKNmP9Z+i0iL7/oP8KnC8df0H+Ff/9k="))
png("red.png", 20, 20, image("red", 20, 3), 3)
png("blue.png", 12, 12, image("blue", 12, 3), 3)
open("data/shapes/train/green/notes.txt", "w").write("not an image: not an example")
PY

cat >shapes.yaml <<YAML
mesh: {dims: {batch: 2}}
data:
  dataset: image_folder
  path: data/shapes
  image_shape: [12, 12, 3]
  batch_size: 8
  shuffle: {seed: 1}
model:
  - {conv2d: 4, kernel_size: 3, activation: relu}
  - {max_pool2d: 2}
  - {flatten: {}}
  - {dense: 3}
train: {epochs: 4, optimizer: {adam: {learning_rate: 0.01}}}
checkpoint: {dir: ckpt, every: epoch}
run_dir: run
YAML

expect 0 "input x: global \(8,12,12,3\).*3 classes \(image_folder data/shapes: 12x12 rgb, resize bilinear, the subfolders of data/shapes/train\)" -- \
  plan --config shapes.yaml
expect 0 "test accuracy" -- train --config shapes.yaml
check "training reaches test accuracy >= 0.9 on the 27 test images" python3 - <<'PY'
import re
accuracy = float(re.findall(r"test accuracy: ([0-9.]+)", open("out").read())[-1])
assert accuracy >= 0.9, accuracy
PY
expect 0 "^data: image_folder data/shapes: images 12x12x3 \(rgb\), resize bilinear, on_bad_file error$" -- inspect ckpt
expect 0 "split test: loss [0-9.]+ accuracy .*\(27 examples\)" -- eval --config shapes.yaml
# Classes in sorted folder order: blue 0, green 1, red 2. A 20x20 PNG and the JPEGs are resized as in training.
expect 0 "^0	red.png	class 2	red [01]\.[0-9]{4}	probabilities" -- \
  predict --checkpoint ckpt --file red.png --file blue.png --file green.jpg --file blue.jpg --file gray.jpeg
check "predict names each file on its line, with the right class for the coloured ones" python3 - <<'PY'
lines = open("out").read().splitlines()
assert len(lines) == 5, lines
want = {"red.png": "2", "blue.png": "0", "green.jpg": "1", "blue.jpg": "0"}
for i, line in enumerate(lines):
    index, name, label, named, probabilities = line.split("\t")
    assert index == str(i), line
    if name in want:
        assert label == "class " + want[name], line
        assert named.split()[0] == ["blue", "green", "red"][int(want[name])], line
    p = [float(v) for v in probabilities.split()[1:]]
    assert len(p) == 3 and abs(sum(p) - 1) < 1e-4, line
assert lines[4].split("\t")[1] == "gray.jpeg", lines
PY
echo "a review" >review.txt
expect 2 "^dtrain: error: \[predict\] --file 'review.txt': checkpoint .* holds a model of data set image_folder, which takes image" -- \
  predict --checkpoint ckpt --file review.txt
expect 2 "^dtrain: error: \[predict\] --file 'notes.doc': not an image" -- predict --checkpoint ckpt --file notes.doc
expect 2 "^dtrain: error: \[image\] cannot open 'missing.png'" -- predict --checkpoint ckpt --file missing.png
expect 2 "give texts to classify, --file PATH ..., --idx FILE, --npy FILE or --csv FILE \(one kind of input\)" -- \
  predict --checkpoint ckpt "a text" --file red.png
head -c 100 red.png >cut.png
expect 2 "^dtrain: error: \[image\] 'cut.png': corrupt PNG data: the file is truncated" -- predict --checkpoint ckpt --file cut.png

# A corrupt file in the training data: exit 2 naming it; skipped with a notice when on_bad_file says so.
head -c 200 data/shapes/train/red/1.png >data/shapes/train/red/broken.png
expect 2 "^dtrain: error: \[image\] 'data/shapes/train/red/broken.png': corrupt PNG data" -- \
  train --config shapes.yaml --overwrite --set train.epochs=1
expect 0 "notice: \[image_folder\] split 'train': skipped 1 of 76 files that do not decode" -- \
  train --config shapes.yaml --overwrite --set train.epochs=1 --set data.on_bad_file=skip
check "the notice names the skipped file" grep -q "  \[image\] 'data/shapes/train/red/broken.png'" out
rm data/shapes/train/red/broken.png
# resize none: every image must already be 12x12.
expect 2 "^dtrain: error: \[image\] 'data/shapes/train/.*/[0-9]+.png' is 16x16 \(height x width\), but image_shape asks for 12x12 and resize is none" -- \
  train --config shapes.yaml --overwrite --set data.resize=none
sed '/image_shape/d' shapes.yaml >no_shape.yaml
expect 2 "^dtrain: error: no_shape.yaml:3:3: data: missing required key 'image_shape'" -- plan --config no_shape.yaml
expect 2 "--set data.resize=cubic: data.resize: expected one of" -- plan --config shapes.yaml --set data.resize=cubic
expect 2 "^dtrain: error: --set data.test_split=valid: split 'valid': no folder 'data/shapes/valid'" -- \
  train --config shapes.yaml --overwrite --set data.test_split=valid

report

#!/usr/bin/env bash
# A picture of TensorBoard's scalars page for a run (docs/tensorboard_scalars.png was made with it): TensorBoard
# from the .venv (scripts/python_env.sh) serves RUN_DIR/tensorboard on 127.0.0.1 only, and headless Chromium
# (Debian's chromium) saves the page.
# Usage: scripts/tensorboard_screenshot.sh RUN_DIR OUT.png [TAG_FILTER]   (TAG_FILTER: default "epoch_")
set -euo pipefail
run_dir=$1 out=$(realpath -m "$2") filter=${3:-epoch_}
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v chromium >/dev/null || { echo "tensorboard_screenshot: no chromium (apt-get install chromium)" >&2; exit 2; }
[[ -x $root/.venv/bin/tensorboard ]] || { echo "tensorboard_screenshot: no TensorBoard: run scripts/python_env.sh" >&2; exit 2; }
port=$((20000 + RANDOM % 20000))
"$root/.venv/bin/tensorboard" --logdir "$run_dir/tensorboard" --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.5; done
# SwiftShader draws the charts' WebGL without a GPU; the time budget lets the page load its data first.
chromium --headless=new --no-sandbox --use-angle=swiftshader --enable-unsafe-swiftshader --hide-scrollbars \
  --window-size=1500,1000 --virtual-time-budget=20000 --screenshot="$out" \
  "http://127.0.0.1:$port/?darkMode=false#scalars&tagFilter=$filter" >/dev/null 2>&1
echo "tensorboard_screenshot: $out"

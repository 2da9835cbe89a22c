# Sourced by the checkpoint scripts that change a checkpoint's files on purpose.
# reseal FOLDER: a forged manifest, each file's size and XXH3-128 recomputed (libxxhash through ctypes).
reseal() {
  python3 - "$1" <<'PY'
import ctypes, sys
class Hash(ctypes.Structure):
    _fields_ = [("low", ctypes.c_uint64), ("high", ctypes.c_uint64)]
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_128bits.restype = Hash
xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
def hex128(data):
    h = xxh.XXH3_128bits(data, len(data))
    return "%016x%016x" % (h.high, h.low)
folder = sys.argv[1]
lines = []
for line in open(folder + "/manifest").read().splitlines()[:-1]:
    words = line.split()
    if words[0] == "file":
        data = open(folder + "/" + words[1], "rb").read()
        line = "file %s %d %s" % (words[1], len(data), hex128(data))
    lines.append(line)
body = "\n".join(lines) + "\n"
open(folder + "/manifest", "w").write(body + "checksum " + hex128(body.encode()) + "\n")
PY
}
can_reseal=
python3 -c 'import ctypes; ctypes.CDLL("libxxhash.so.0")' 2>/dev/null && can_reseal=1

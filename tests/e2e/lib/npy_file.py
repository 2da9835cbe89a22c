"""Writes a .npy file (NumPy's format 1.0: magic, version, a padded header dict, raw little-endian data) without
numpy, for the e2e scripts: `PYTHONPATH="$lib" python3 - <<'PY'` then `from npy_file import npy`."""
import struct


def npy(path, descr, shape, data):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)

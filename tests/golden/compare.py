"""Compares two golden output folders (tests/golden/run.sh) bit for bit:
every HDF5 file's datasets (dtype, shape, bytes) and attributes, every other
file's bytes, and the exit statuses. Prints one line per difference and
exits 1 when there is any.

  compare.py OLD NEW [--ignore-attr NAME ...] [--ignore-suffix .png ...]

--ignore-suffix leaves out files whose name ends so: for a change that is
meant to alter them (it is named in the summary line).

Files only in one folder are differences too, except *.err (timings)."""
import os
import sys

import h5py
import numpy as np


def h5_items(path):
    out = {}
    with h5py.File(path, "r") as f:
        out["/"] = ("attrs", {k: np.asarray(v).tobytes() for k, v in f.attrs.items()})

        def visit(name, obj):
            attrs = {k: np.asarray(v).tobytes() for k, v in obj.attrs.items()}
            if isinstance(obj, h5py.Dataset):
                a = obj[...]
                out[name] = ("data", (str(a.dtype), a.shape, np.asarray(a).tobytes(), attrs))
            else:
                out[name] = ("attrs", attrs)
        f.visititems(visit)
    return out


def compare_h5(a, b, ignore, say):
    ia, ib = h5_items(a), h5_items(b)
    for k in sorted(set(ia) | set(ib)):
        if k not in ia or k not in ib:
            say("%s: '%s' only in %s" % (os.path.basename(a), k, "old" if k in ia else "new"))
            continue
        (ka, va), (kb, vb) = ia[k], ib[k]
        if ka == "data":
            if va[:3] != vb[:3]:
                what = "dtype/shape" if va[:2] != vb[:2] else "bytes"
                say("%s: dataset '%s' differs (%s)" % (os.path.basename(a), k, what))
            aa, ab = va[3], vb[3]
        else:
            aa, ab = va, vb
        for n in sorted(set(aa) | set(ab)):
            if n in ignore:
                continue
            if aa.get(n) != ab.get(n):
                say("%s: attribute '%s' of '%s' differs" % (os.path.basename(a), n, k))


def main():
    old, new = sys.argv[1], sys.argv[2]
    ignore = set(sys.argv[i + 1] for i, x in enumerate(sys.argv) if x == "--ignore-attr")
    skip = tuple(sys.argv[i + 1] for i, x in enumerate(sys.argv) if x == "--ignore-suffix")
    diffs = []
    say = diffs.append
    names = sorted(set(os.listdir(old)) | set(os.listdir(new)))
    checked = 0
    for n in names:
        if n.endswith(".err") or (skip and n.endswith(skip)):
            continue
        a, b = os.path.join(old, n), os.path.join(new, n)
        if not (os.path.isfile(a) and os.path.isfile(b)):
            say("%s: only in %s" % (n, "old" if os.path.exists(a) else "new"))
            continue
        checked += 1
        if h5py.is_hdf5(a) and h5py.is_hdf5(b):
            compare_h5(a, b, ignore, say)
        elif open(a, "rb").read() != open(b, "rb").read():
            say("%s: bytes differ" % n)
    for d in diffs:
        print("DIFF " + d)
    print("golden compare: %d files, %d differences%s" % (
        checked, len(diffs), " (left out: *%s)" % ", *".join(skip) if skip else ""))
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()

"""Makes damaged copies of a staticpipe model file, one per validation check.

usage: corrupt.py SRC OUTDIR   -> writes OUTDIR/<case>.h5 for every case
Each case breaks exactly one rule of the format (MODEL.md "Model file")."""
import os
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from h5crc import crc32c  # noqa: E402

src, outdir = sys.argv[1], sys.argv[2]
DS = "/blocks/0001/ffn.0.weight"


def copy(name):
    path = os.path.join(outdir, name + ".h5")
    shutil.copy(src, path)
    return path


def rewrite(path, ds_path, make):
    """Replaces one dataset with what make(f, name, data, attrs) creates."""
    with h5py.File(path, "r+") as f:
        d = f[ds_path]
        data, attrs = d[...], dict(d.attrs)
        del f[ds_path]
        make(f, ds_path, data, attrs)


# truncated: the second half of the file is gone
p = copy("truncated")
size = os.path.getsize(p)
with open(p, "r+b") as fh:
    fh.truncate(size // 2)

# flipped data byte: the checksum no longer matches
p = copy("flipped_byte")
with h5py.File(p, "r") as f:
    off = f[DS].id.get_offset()
with open(p, "r+b") as fh:
    fh.seek(off + 1000)
    b = fh.read(1)
    fh.seek(off + 1000)
    fh.write(bytes([b[0] ^ 0x10]))


def as_float32(f, name, data, attrs):
    d = f.create_dataset(name, data=data.astype(np.float32))
    for k, v in attrs.items():
        d.attrs[k] = v


rewrite(copy("wrong_dtype"), DS, as_float32)


def wrong_shape(f, name, data, attrs):
    d = f.create_dataset(name, data=data.reshape(-1)[: data.size // 2].reshape(data.shape[0] // 2, -1))
    for k, v in attrs.items():
        d.attrs[k] = v


rewrite(copy("wrong_shape"), DS, wrong_shape)

p = copy("missing_dataset")
with h5py.File(p, "r+") as f:
    del f[DS]


def chunked(f, name, data, attrs):
    d = f.create_dataset(name, data=data, chunks=True, compression="gzip")
    for k, v in attrs.items():
        d.attrs[k] = v


rewrite(copy("chunked_compressed"), DS, chunked)

p = copy("external_link")
ext = os.path.join(outdir, "external_target.h5")
with h5py.File(ext, "w") as g, h5py.File(p, "r+") as f:
    g.create_dataset("w", data=f[DS][...])
    del f[DS]
    f[DS] = h5py.ExternalLink(ext, "/w")

p = copy("soft_link")
with h5py.File(p, "r+") as f:
    del f[DS]
    f[DS] = h5py.SoftLink("/blocks/0000/ffn.0.weight")

p = copy("format_version")
with h5py.File(p, "r+") as f:
    f.attrs["format_version"] = np.int64(99)

p = copy("wrong_format")
with h5py.File(p, "r+") as f:
    f.attrs["format"] = "something-else"

p = copy("extra_dataset")
with h5py.File(p, "r+") as f:
    f.create_dataset("/blocks/0002/lora_A.weight", data=np.ones(4, np.uint16))

p = copy("bad_config")
with h5py.File(p, "r+") as f:
    f.attrs["heads"] = np.int64(3)

p = copy("missing_block")
with h5py.File(p, "r+") as f:
    del f["/blocks/0003"]



# a tensor rewritten together with its checksum attribute: every dataset
# checks, only the root checksum (a function of them) tells
p = copy("rewritten_with_crc")
with h5py.File(p, "r+") as f:
    small = "/blocks/0001/self_attn.norm_q.weight"
    x = f[small][...]
    x[0] ^= 0x0101
    f[small][...] = x
    f[small].attrs["checksum"] = np.uint32(crc32c(x.astype("<u2").tobytes()))

# a dataset hard-linked to another of the same shape
p = copy("hard_link")
with h5py.File(p, "r+") as f:
    del f[DS]
    f[DS] = f["/blocks/0000/ffn.0.weight"]

# an extra object on the root
p = copy("extra_root")
with h5py.File(p, "r+") as f:
    f.create_group("/lora")

# a group's object header overwritten: HDF5 opens the file but cannot walk
# its groups (a damaged or truncated file, not a link)
p = copy("damaged_group")
with h5py.File(p, "r") as f:
    addr = h5py.h5o.get_info(f["/blocks/0002"].id).addr
with open(p, "r+b") as fh:
    fh.seek(addr)
    fh.write(b"\xff" * 64)

"""Atomic file writes for the Python tools (launch/encode_prompt.py,
launch/bench/torch_block.py): the content goes into a temporary file
beside the destination (the same folder, so the rename never crosses
filesystems), which os.replace then moves onto it; on any failure the
temporary file is removed and the destination is left as it was.
Standard library only, so a tool's --help still needs nothing else."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_path(path, prefix=None):
    """Yields the name of a new, empty temporary file beside `path` for the
    caller to write by name (open, h5py.File). When the block ends normally
    the file replaces `path`; when it raises, the file is removed and the
    exception goes on. prefix starts the temporary name (default: '.', the
    destination's name, '.'); the name ends in '.tmp'."""
    d = os.path.dirname(os.path.abspath(path))
    if prefix is None:
        prefix = "." + os.path.basename(path) + "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=d)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

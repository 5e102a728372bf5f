"""Helpers shared by the corpus scripts (corpus.py, archive.py)."""
import subprocess

import numpy as np


def convert(tet, src, dst):
    """Convert `src` (NetCDF or Zarr) to the .tet file `dst` with upstream's `tet convert`."""
    if dst.exists():
        dst.unlink()
    subprocess.run([tet, "convert", str(src), str(dst)], check=True, capture_output=True)


def floats(a):
    """JSON-safe list (NaN -> None)."""
    return [None if (isinstance(x, float) and np.isnan(x)) else float(x) for x in np.asarray(a).tolist()]

"""Fixtures: NetCDF files written by xarray, converted to .tet by upstream's `tet convert`.

The converter is `$TET_BIN` (CI installs it under ~/.cache/tet-ci/tetration/bin/tet, see
.ci/run and CONTRIBUTING.md); without it the tests that need files skip with a notice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest


def tet_bin() -> str | None:
    """The `tet` converter: $TET_BIN, else CI's cached copy, else `tet` on PATH."""
    candidates = [
        os.environ.get("TET_BIN"),
        str(Path.home() / ".cache/tet-ci/tetration/bin/tet"),
        shutil.which("tet"),
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def convert(src: Path, dst: Path) -> Path:
    tet = tet_bin()
    if tet is None:
        msg = "NOTICE: TET_BIN is not set and no `tet` converter was found; skipping the tests that need .tet files"
        print(msg)
        pytest.skip(msg)
    if dst.exists():
        dst.unlink()
    subprocess.run([tet, "convert", str(src), str(dst)], check=True, capture_output=True)
    return dst


def weather_dataset():
    """A small cube: temp (float32, K) and precip (float32, NaN fill, some missing) over
    time x lat x lon, with CF time, lat descending as in reanalyses."""
    import pandas as pd
    import xarray as xr

    rng = np.random.default_rng(7)
    time = pd.date_range("2024-01-01", periods=12, freq="6h")
    lat = np.linspace(60.0, -60.0, 9)
    lon = np.arange(0.0, 360.0, 30.0)
    shape = (len(time), len(lat), len(lon))
    temp = (280 + 20 * np.cos(np.deg2rad(lat))[None, :, None] + rng.normal(0, 2, shape)).astype("float32")
    precip = rng.gamma(1.0, 2.0, shape).astype("float32")
    precip[rng.random(shape) < 0.1] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "lat", "lon"), temp, {"units": "K", "long_name": "air temperature"}),
            "precip": (("time", "lat", "lon"), precip, {"units": "mm", "long_name": "precipitation"}),
        },
        coords={
            "time": ("time", time),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
    )
    ds["precip"].encoding["_FillValue"] = np.float32(np.nan)
    ds["time"].encoding["units"] = "hours since 2024-01-01 00:00:00"
    return ds


@pytest.fixture(scope="session")
def weather(tmp_path_factory):
    """(xarray Dataset as written, path of the .tet file, path of the NetCDF source)."""
    d = tmp_path_factory.mktemp("weather")
    ds = weather_dataset()
    nc = d / "weather.nc"
    ds.to_netcdf(nc)
    tet = convert(nc, d / "weather.tet")
    import xarray as xr

    with xr.open_dataset(nc) as src:
        source = src.load()
    return source, tet, nc


@pytest.fixture(scope="session")
def archive(tmp_path_factory):
    """Three monthly files of the cube along time: (dataset, folder)."""
    d = tmp_path_factory.mktemp("archive")
    ds = weather_dataset()
    parts = [ds.isel(time=slice(i * 4, (i + 1) * 4)) for i in range(3)]
    for i, part in enumerate(parts):
        nc = d / f"part{i}.nc"
        part.to_netcdf(nc)
        convert(nc, d / f"part{i}.tet")
        nc.unlink()
    return ds, d


@pytest.fixture
def ctx():
    import datafusion

    import datafusion_tet

    c = datafusion.SessionContext()
    datafusion_tet.register(c)
    return c

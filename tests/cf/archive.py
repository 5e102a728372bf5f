#!/usr/bin/env python3
"""An archive of monthly NetCDF files as users have them, converted by upstream's `tet
convert`, with the answers of xarray's `open_mfdataset(..., combine='by_coords')`.

Usage: archive.py OUT_DIR TET_BIN

Writes into OUT_DIR:
- nc/2024-01.nc, nc/2024-02.nc, nc/2024-03.nc: 6-hourly ERA5-like cubes (time × latitude
  descending × longitude), each with its own time reference and encoding: January int32
  `hours since 2024-01-01`, February int32 `hours since 2024-02-01`, March float64
  `days since 2024-03-01`. Variables: `t2m` float32 with NaN holes (NaN _FillValue) and
  `sst` float32 with _FillValue -9999 (its NaN cells are -9999 on disk);
- zarr/2024-0{1,2,3}.zarr: `msl` of the same months packed as int16 with the same
  scale_factor/add_offset in every file (NaN cells are -32767, `missing_value`), with the
  same time references. Zarr v2 because upstream's NetCDF importer refuses packed integers
  ("CF decode supports f32/f64 storage only"); its Zarr importer keeps them packed but
  drops `_ARRAY_DIMENSIONS`, which `tet semantics apply` stamps back as `dim_names`;
- tet/2024-0{1,2,3}.tet (t2m, sst) and tet_msl/2024-0{1,2,3}.tet (msl): the converted files;
- mixed/tet_msl/*.tet: msl stored each file its own way (packed as above; packed with
  another scale, offset and fill; float32 with a -9999 fill), with xarray's answers;
- bad_<name>/tet/*.tet: archives that do not combine (overlapping months, a latitude grid
  that differs in one file), each beside what xarray raises when it combines the same
  NetCDF files;
- answers.json: what xarray (which decodes CF per file and skips missing values) computes
  over the archive; every reduction in float64, as SQL's avg/sum/stddev do.

The archive is opened with `xr.open_mfdataset(..., combine='by_coords')` (dask); without
dask, with `xr.combine_by_coords` of the opened files, which combines alike. answers.json
says which.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cfutil  # noqa: E402
from cfutil import floats  # noqa: E402,F401

out = Path(sys.argv[1])
tet = sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(57)
answers = {}

try:
    import dask  # noqa: F401

    HAVE_DASK = True
except ImportError:
    HAVE_DASK = False


def convert(src, dst):
    cfutil.convert(tet, src, dst)


def iso(times):
    return [str(t)[:19] for t in np.asarray(times)]


def open_archive(files, engine=None):
    """The files as one dataset, as xarray combines them by their coordinates (`join`
    spelled out: its default is about to change; "outer" is today's)."""
    files = sorted(str(f) for f in files)
    if HAVE_DASK:
        return xr.open_mfdataset(files, combine="by_coords", join="outer", engine=engine)
    return xr.combine_by_coords([xr.open_dataset(f, engine=engine) for f in files], join="outer")


# --- the monthly files ------------------------------------------------------------------
nlat, nlon = 19, 36
lat = np.linspace(90, -90, nlat).astype(np.float32)
lon = np.arange(0, 360, 10).astype(np.float32)
SCALE, OFFSET = 0.25, 100_000.0  # msl in Pa as int16: 91 808 .. 108 192 Pa
MSL_FILL = np.int16(-32767)
# msl as every file of the archive stores it. The fill value is also `missing_value`:
# `_FillValue` becomes Zarr's fill_value, which upstream's importer does not carry.
PACKED = {
    "dtype": "int16",
    "scale_factor": SCALE,
    "add_offset": OFFSET,
    "_FillValue": MSL_FILL,
    "missing_value": MSL_FILL,
}
# Each month: (file name, first instant, steps, time units, stored time dtype).
months = [
    ("2024-01", "2024-01-01", 31 * 4, "hours since 2024-01-01", np.int32),
    ("2024-02", "2024-02-01", 29 * 4, "hours since 2024-02-01", np.int32),
    ("2024-03", "2024-03-01", 31 * 4, "days since 2024-03-01", np.float64),
]
SEMANTICS = """schema_version = 1
[datasets.msl]
dim_names = ["time", "latitude", "longitude"]
[datasets.time]
dim_names = ["time"]
[datasets.latitude]
dim_names = ["latitude"]
[datasets.longitude]
dim_names = ["longitude"]
"""


def month_dataset(first, steps, lat=lat):
    time = pd.date_range(first, periods=steps, freq="6h")
    shape = (steps, len(lat), nlon)
    # A seasonal and diurnal signal, so that daily, monthly and hourly means differ.
    hour = time.hour.values[:, None, None]
    doy = time.day_of_year.values[:, None, None]
    coslat = np.cos(np.deg2rad(lat))[None, :, None]
    t2m = 250 + 40 * coslat + 5 * np.sin(2 * np.pi * hour / 24) + 0.1 * doy + rng.normal(0, 3, shape)
    t2m = t2m.astype(np.float32)
    t2m[rng.random(shape) < 0.08] = np.nan
    sst = (285 + 15 * coslat + rng.normal(0, 2, shape)).astype(np.float32)
    sst[:, :2, :] = np.nan  # sea ice: missing
    sst[rng.random(shape) < 0.03] = np.nan
    msl = np.clip(100_500 + 800 * rng.standard_normal(shape) + 30 * doy, 92_000, 108_000)
    msl[rng.random(shape) < 0.02] = np.nan
    dims = ("time", "latitude", "longitude")
    return xr.Dataset(
        {
            "t2m": (dims, t2m, {"units": "K", "long_name": "2 metre temperature"}),
            "sst": (dims, sst, {"units": "K", "long_name": "Sea surface temperature"}),
            "msl": (dims, msl, {"units": "Pa", "long_name": "Mean sea level pressure"}),
        },
        coords={
            "time": ("time", time, {"long_name": "time"}),
            "latitude": ("latitude", lat, {"units": "degrees_north"}),
            "longitude": ("longitude", lon, {"units": "degrees_east"}),
        },
    )


def write_month(ds, stem, units, tdtype, msl=PACKED):
    """`stem`/nc/M.nc (t2m, sst) and `stem`/zarr/M.zarr (msl, stored as the encoding
    `msl` says) of one month (`stem` a folder and M the file name), converted into
    `stem`/tet/M.tet and `stem`/tet_msl/M.tet."""
    folder, name = stem
    time = {"units": units, "calendar": "gregorian", "dtype": tdtype}
    nc = folder / "nc" / f"{name}.nc"
    ds[["t2m", "sst"]].to_netcdf(
        nc,
        encoding={"time": time, "t2m": {"_FillValue": np.float32(np.nan)}, "sst": {"_FillValue": np.float32(-9999.0)}},
    )
    convert(nc, folder / "tet" / f"{name}.tet")
    store = folder / "zarr" / f"{name}.zarr"
    raw = {"compressors": None}  # upstream's Zarr importer reads raw or zstd chunks
    ds[["msl"]].to_zarr(
        store,
        mode="w",
        zarr_format=2,
        consolidated=True,
        encoding={
            "time": {**time, **raw},
            "latitude": raw,
            "longitude": raw,
            "msl": {**msl, **raw},
        },
    )
    tet_msl = folder / "tet_msl" / f"{name}.tet"
    convert(store, tet_msl)
    (folder / "semantics.toml").write_text(SEMANTICS)
    subprocess.run(
        [tet, "semantics", "apply", str(tet_msl), "--from", str(folder / "semantics.toml")],
        check=True,
        capture_output=True,
    )


def fresh(folder):
    shutil.rmtree(folder, ignore_errors=True)
    for d in ["nc", "zarr", "tet", "tet_msl"]:
        (folder / d).mkdir(parents=True)


for d in ["nc", "zarr", "tet", "tet_msl"]:
    shutil.rmtree(out / d, ignore_errors=True)
    (out / d).mkdir()
datasets = {}
for name, first, steps, units, tdtype in months:
    datasets[name] = month_dataset(first, steps)
    write_month(datasets[name], (out, name), units, tdtype)

# The encodings are what the files say they are (a check of this script).
stored = {}
for name, *_ in months:
    with xr.open_dataset(out / "nc" / f"{name}.nc", decode_cf=False) as raw:
        with xr.open_zarr(out / "zarr" / f"{name}.zarr", decode_cf=False) as z:
            stored[name] = {
                "time_units": raw.time.attrs["units"],
                "time_dtype": str(raw.time.dtype),
                "zarr_time_units": z.time.attrs["units"],
                "sst_fill": float(raw.sst.attrs["_FillValue"]),
                "msl_dtype": str(z.msl.dtype),
                "msl_scale": float(z.msl.attrs["scale_factor"]),
            }
assert stored["2024-01"]["time_units"].startswith("hours since 2024-01-01"), stored
assert stored["2024-02"]["time_units"].startswith("hours since 2024-02-01"), stored
assert stored["2024-03"]["time_units"].startswith("days since 2024-03-01"), stored
assert stored["2024-03"]["time_dtype"] == "float64" and stored["2024-01"]["time_dtype"] == "int32", stored
assert all(s["msl_dtype"] == "int16" and s["sst_fill"] == -9999.0 for s in stored.values()), stored
assert all(s["time_units"] == s["zarr_time_units"] for s in stored.values()), stored

# --- xarray's answers over the archive --------------------------------------------------
d = open_archive((out / "nc").glob("*.nc")).load()
m = open_archive((out / "zarr").glob("*.zarr"), engine="zarr").load()
assert m.msl.dtype == np.float64, m.msl.dtype  # float64 scale_factor: decoded as float64
assert (m.time.values == d.time.values).all()
t2m, sst, msl = d.t2m.astype(np.float64), d.sst.astype(np.float64), m.msl
times = [
    "2024-01-01T00:00:00",
    "2024-01-31T18:00:00",
    "2024-02-01T00:00:00",
    "2024-02-29T18:00:00",
    "2024-03-01T00:00:00",
    "2024-03-01T06:00:00",
    "2024-03-31T18:00:00",
]
boundary = slice("2024-01-31T18:00:00", "2024-02-01T12:00:00")  # inclusive at both ends, as xarray slices
answers["archive"] = {
    "opened_with": "xr.open_mfdataset(combine='by_coords')" if HAVE_DASK else "xr.combine_by_coords",
    "xarray": xr.__version__,
    "stored": stored,
    "times": iso(d.time.values),
    "lat": floats(d.latitude.values),
    "cells": int(t2m.size),
    "count": {"t2m": int(t2m.count()), "sst": int(sst.count()), "msl": int(msl.count())},
    "mean": {"t2m": float(t2m.mean()), "sst": float(sst.mean())},
    "zonal_t2m": floats(t2m.mean(("time", "longitude")).values),
    "zonal_count": [int(x) for x in t2m.count(("time", "longitude")).values],
    "per_time_sst": floats(sst.mean(("latitude", "longitude")).values),
    "at_times": {
        "times": times,
        "t2m": floats(t2m.sel(time=times).mean(("latitude", "longitude")).values),
        "count": [int(x) for x in t2m.sel(time=times).count(("latitude", "longitude")).values],
    },
    "daily_days": iso(t2m.resample(time="1D").mean(...).time.values),
    "daily_t2m": floats(t2m.resample(time="1D").mean(...).values),
    "monthly_t2m": floats(t2m.groupby("time.month").mean(...).values),
    "monthly_count": [int(x) for x in t2m.groupby("time.month").count(...).values],
    "hourly_clim_t2m": floats(t2m.groupby("time.hour").mean(...).values),
    "boundary": {
        "start": boundary.start,
        "stop": boundary.stop,
        "times": iso(d.time.sel(time=boundary).values),
        "count": int(t2m.sel(time=boundary).count()),
        "mean": float(t2m.sel(time=boundary).mean()),
        "sst_mean": float(sst.sel(time=boundary).mean()),
    },
    "diff_mean": float((t2m - sst).mean()),
    "diff_count": int((t2m - sst).count()),
    "msl": {
        "mean": float(msl.mean()),
        "min": float(msl.min()),
        "max": float(msl.max()),
        "std": float(msl.std()),
        "count": int(msl.count()),
        "sum": float(msl.sum()),
        "monthly_mean": floats(msl.groupby("time.month").mean(...).values),
        "boundary_mean": float(msl.sel(time=boundary).mean()),
    },
}

# --- archives that do not combine -------------------------------------------------------
answers["bad"] = {}


def bad(name, files, names, source="nc"):
    """Write the monthly files `{file name: (dataset, units, time dtype)}` of a bad archive
    into bad_`name`, convert them, and record what xarray raises when it combines the
    `source` files (NetCDF or Zarr), or None if it does not. `names`: the files our error
    must name."""
    folder = out / f"bad_{name}"
    fresh(folder)
    for file, (ds, units, tdtype) in files.items():
        write_month(ds, (folder, file), units, tdtype)
    try:
        if source == "nc":
            open_archive((folder / "nc").glob("*.nc")).load()
        else:
            open_archive((folder / "zarr").glob("*.zarr"), engine="zarr").load()
        raised = None
    except Exception as e:  # what xarray says, whatever its class
        raised = f"{type(e).__name__}: {e}"
    table, dataset = ("tet", "t2m") if source == "nc" else ("tet_msl", "msl")
    answers["bad"][name] = {
        "files": f"bad_{name}/{table}",
        "dataset": dataset,
        "xarray_raises": raised,
        "names": names,
    }


(jan, _, _, jan_units, jan_dtype), (feb, feb_first, feb_steps, feb_units, feb_dtype), mar = months
# The second file starts on 31 January 12:00: its first three steps are January's last.
bad(
    "overlap",
    {
        jan: (datasets[jan], jan_units, jan_dtype),
        feb: (month_dataset("2024-01-31T12:00:00", feb_steps + 3), "hours since 2024-01-31T12:00", feb_dtype),
    },
    [f"{jan}.tet", f"{feb}.tet"],
)
# February's latitudes are shifted by half a degree.
bad(
    "lat_grid",
    {
        jan: (datasets[jan], jan_units, jan_dtype),
        feb: (month_dataset(feb_first, feb_steps, lat=(lat - 0.5).astype(np.float32)), feb_units, feb_dtype),
        mar[0]: (datasets[mar[0]], mar[3], mar[4]),
    },
    [f"{feb}.tet"],
)

# --- files that store msl each their own way --------------------------------------------
# January packed as the archive's, February packed with another scale, offset and fill,
# March as float32 with a -9999 fill. xarray decodes each file, then concatenates (float64).
folder = out / "mixed"
fresh(folder)
stored_as = {
    jan: PACKED,
    feb: {
        "dtype": "int16",
        "scale_factor": 0.5,
        "add_offset": 101_000.0,
        "_FillValue": np.int16(-32768),
        "missing_value": np.int16(-32768),
    },
    mar[0]: {"dtype": "float32", "_FillValue": np.float32(-9999.0), "missing_value": np.float32(-9999.0)},
}
for name, _, _, units, tdtype in months:
    write_month(datasets[name], (folder, name), units, tdtype, msl=stored_as[name])
x = open_archive((folder / "zarr").glob("*.zarr"), engine="zarr").load().msl
assert x.dtype == np.float64, x.dtype
answers["mixed_msl"] = {
    "files": "mixed/tet_msl",
    "stored_as": {k: {a: str(b) for a, b in v.items()} for k, v in stored_as.items()},
    "mean": float(x.mean()),
    "min": float(x.min()),
    "max": float(x.max()),
    "std": float(x.std()),
    "count": int(x.count()),
    "sum": float(x.sum()),
    "monthly_mean": floats(x.groupby("time.month").mean(...).values),
    "monthly_count": [int(c) for c in x.groupby("time.month").count(...).values],
}

(out / "answers.json").write_text(json.dumps(answers, indent=1))
print("ok", answers["archive"]["opened_with"])

#!/usr/bin/env python3
"""The CF corpus: files written by the tools users have, converted by upstream's `tet convert`,
with xarray's answers.

Usage: corpus.py OUT_DIR TET_BIN

Writes into OUT_DIR:
- era5.nc / era5.tet: an ERA5-like cube (time int32 "hours since 1900-01-01", latitude
  descending, longitude), `t2m` float32 with NaN holes (xarray's default NaN _FillValue) and
  `sst` float32 whose _FillValue is -9999 (NaN cells become -9999 on disk);
- cal_<calendar>.nc / .tet: a 1-D `x(time)` per calendar, time in several units/references,
  integer and fractional offsets;
- packed.zarr / packed.tet: an int16 Zarr v2 store (uncompressed) with scale_factor,
  add_offset and missing_value, as ERA5 packs;
- answers.json: what xarray (which decodes CF and skips missing values) computes.
"""

import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cfutil  # noqa: E402
from cfutil import floats  # noqa: E402,F401

out = Path(sys.argv[1])
tet = sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
answers = {}


def convert(src, dst):
    cfutil.convert(tet, src, dst)


# --- ERA5-like NetCDF -------------------------------------------------------------------
nt, nlat, nlon = 72, 19, 36
hours0 = 1_086_960  # 2024-01-01T00:00 in hours since 1900-01-01
time = np.arange(hours0, hours0 + nt, dtype=np.int32)
lat = np.linspace(90, -90, nlat).astype(np.float32)
lon = np.arange(0, 360, 10).astype(np.float32)
t2m = (rng.normal(280, 10, (nt, nlat, nlon))).astype(np.float32)
t2m[rng.random(t2m.shape) < 0.1] = np.nan
sst = (rng.normal(290, 5, (nt, nlat, nlon))).astype(np.float32)
sst[:, :3, :] = np.nan  # sea ice / land: missing
ds = xr.Dataset(
    {
        "t2m": (("time", "latitude", "longitude"), t2m, {"units": "K", "long_name": "2 metre temperature"}),
        "sst": (("time", "latitude", "longitude"), sst, {"units": "K", "standard_name": "sea_surface_temperature"}),
    },
    coords={
        "time": ("time", time, {"units": "hours since 1900-01-01 00:00:00.0", "calendar": "gregorian", "long_name": "time"}),
        "latitude": ("latitude", lat, {"units": "degrees_north"}),
        "longitude": ("longitude", lon, {"units": "degrees_east"}),
    },
)
ds.to_netcdf(
    out / "era5.nc",
    encoding={"sst": {"_FillValue": np.float32(-9999.0)}, "t2m": {"_FillValue": np.float32(np.nan)}},
)
convert(out / "era5.nc", out / "era5.tet")
d = xr.open_dataset(out / "era5.nc")  # decodes CF: times, fill values -> NaN
answers["era5"] = {
    "time0": str(d.time.values[0])[:19],
    "zonal_t2m": floats(d.t2m.mean(("time", "longitude")).values),
    "zonal_count": [int(x) for x in d.t2m.count(("time", "longitude")).values],
    "lat": floats(d.latitude.values),
    "per_time_sst": floats(d.sst.mean(("latitude", "longitude")).values),
    "range_count": int(d.t2m.sel(time=slice("2024-01-01T12:00", "2024-01-02T05:00")).count()),
    "daily_t2m": floats(d.t2m.resample(time="1D").mean(...).values),
    "hourly_clim_t2m": floats(d.t2m.groupby("time.hour").mean(...).values),
    "diff_mean": float((d.t2m - d.sst).mean()),
}

# --- calendars --------------------------------------------------------------------------
calendars = [
    # (name, calendar, units, offsets): integer and fractional offsets, dates before 1582,
    # leap days, and the days the standard calendar skips.
    ("standard", "standard", "days since 1582-10-01", np.array([0, 3, 4, 20, 150000], dtype=np.int64)),
    ("standard_early", "standard", "hours since 1000-02-27 06:00", np.array([0, 42, 66, 5e6], dtype=np.float64)),
    ("gregorian", "gregorian", "hours since 2000-1-1T12:00:00Z", np.array([-36, 0, 1.5, 1e6], dtype=np.float64)),
    ("proleptic_gregorian", "proleptic_gregorian", "minutes since 1970-01-01 00:00:00", np.array([0, 59, 525600 * 30 + 7], dtype=np.int32)),
    ("proleptic_early", "proleptic_gregorian", "days since 1500-02-27", np.array([0, 1, 2, 3, 400], dtype=np.int32)),
    ("julian", "julian", "days since 1900-02-27", np.array([0, 1, 2, 3, 36500], dtype=np.int32)),
    ("noleap", "noleap", "days since 2001-01-01", np.array([0, 58, 59, 365 * 3 + 59, 10.25], dtype=np.float64)),
    ("365_day", "365_day", "seconds since 1999-12-31 23:00:00", np.array([0, 3600, 86400 * 60], dtype=np.int64)),
    ("all_leap", "all_leap", "seconds since 2003-02-28", np.array([0, 86400, 2 * 86400], dtype=np.int64)),
    ("360_day", "360_day", "days since 2000-01-01", np.array([0, 29, 59, 359, 360], dtype=np.int32)),
]
answers["calendars"] = {}
for name, cal, units, values in calendars:
    c = xr.Dataset(
        {"x": (("time",), np.arange(len(values), dtype=np.float32))},
        coords={"time": ("time", values, {"units": units, "calendar": cal})},
    )
    nc = out / f"cal_{name}.nc"
    c.to_netcdf(nc)
    convert(nc, out / f"cal_{name}.tet")
    decoded = xr.open_dataset(nc, decode_times=xr.coders.CFDatetimeCoder(use_cftime=True))
    answers["calendars"][name] = {
        "calendar": cal,
        "units": units,
        "values": [float(v) for v in values],
        "dates": [t.isoformat().replace(" ", "T") for t in decoded.time.values],
        "file": f"cal_{name}.tet",
    }

# --- packed int16 Zarr v2 ---------------------------------------------------------------
shape = (6, 40, 50)
raw = rng.integers(-32000, 32000, shape, dtype=np.int16)
raw[rng.random(shape) < 0.05] = -32767
scale, offset = 0.0016, 250.5
store = out / "packed.zarr"
if store.exists():
    import shutil

    shutil.rmtree(store)
root = zarr.open_group(str(store), mode="w", zarr_format=2)
arr = root.create_array("t", shape=shape, chunks=(2, 16, 25), dtype="<i2", compressors=None, fill_value=None)
arr[...] = raw
arr.attrs.update(
    {
        "_ARRAY_DIMENSIONS": ["step", "y", "x"],
        "scale_factor": scale,
        "add_offset": offset,
        "missing_value": -32767,
        "units": "K",
    }
)
zarr.consolidate_metadata(str(store), zarr_format=2)
convert(store, out / "packed.tet")
p = xr.open_zarr(store, consolidated=True)["t"]  # mask_and_scale: float, NaN where missing
answers["packed"] = {
    "mean": float(p.mean()),
    "min": float(p.min()),
    "max": float(p.max()),
    "count": int(p.count()),
    "std": float(p.std()),
    "sum": float(p.sum()),
    "per_step_mean": floats(p.mean(("y", "x")).values),
    "above": int((p > 260).sum()),
}

(out / "answers.json").write_text(json.dumps(answers, indent=1))
print("ok")

"""to_xarray over the CF corpus (tests/cf/corpus.py: NetCDF and Zarr written by xarray and
zarr, converted by upstream's `tet convert`) equals xarray opening the source files:
decoded times, fill values as NaN, unpacked integers, CF attributes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import datafusion_tet

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")
pytest.importorskip("netCDF4")

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "cf" / "corpus.py"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    from conftest import tet_bin

    tet = tet_bin()
    if tet is None:
        msg = "NOTICE: no `tet` converter (TET_BIN); skipping the CF corpus tests"
        print(msg)
        pytest.skip(msg)
    out = tmp_path_factory.mktemp("cf")
    subprocess.run([sys.executable, str(CORPUS), str(out), tet], check=True, capture_output=True)
    return out


def whole(ctx, path, dataset):
    return datafusion_tet.to_xarray(ctx.sql(f"SELECT * FROM tet('{path}', '{dataset}')"))["v"]


@pytest.mark.parametrize("name", ["t2m", "sst"])
def test_era5_variables_equal_xarray(ctx, corpus, name):
    # t2m: NaN fill; sst: _FillValue -9999 on disk; time int32 hours since 1900.
    with xr.open_dataset(corpus / "era5.nc") as src:
        want = src[name].load()
    got = whole(ctx, corpus / "era5.tet", name)
    assert got.dims == want.dims
    want = want.sortby(list(want.dims))
    np.testing.assert_array_equal(got.time.values, want.time.values)
    np.testing.assert_array_equal(got.latitude.values, want.latitude.values)
    # Same cells, the same ones missing.
    np.testing.assert_array_equal(got.values, want.values)
    assert got.attrs["units"] == want.attrs["units"] == "K"
    assert "_FillValue" not in got.attrs


def test_era5_zonal_mean_by_fold_equals_xarray(ctx, corpus):
    path = corpus / "era5.tet"
    q = f"SELECT latitude, avg(v) AS t2m, count(v) AS n FROM tet('{path}', 't2m') GROUP BY latitude"
    got = datafusion_tet.to_xarray(datafusion_tet.sql(ctx, q))
    assert "TetAggregateExec" in datafusion_tet.explain(q)
    with xr.open_dataset(corpus / "era5.nc") as src:
        t2m = src.t2m.load().sortby("latitude")
    np.testing.assert_allclose(got.t2m.values, t2m.mean(("time", "longitude")).values, rtol=1e-6)
    np.testing.assert_array_equal(got.n.values, t2m.count(("time", "longitude")).values)


def test_packed_int16_equals_xarray_unpacked(ctx, corpus):
    # int16 with scale_factor, add_offset and missing_value (ERA5's packing), from Zarr v2.
    want = xr.open_zarr(corpus / "packed.zarr", consolidated=True)["t"].load()
    got = whole(ctx, corpus / "packed.tet", "t")
    # Upstream's converter does not carry Zarr v2's _ARRAY_DIMENSIONS: positional axes.
    assert got.dims == ("dim_0", "dim_1", "dim_2") and got.shape == want.shape
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got.values), np.isnan(want.values))
    np.testing.assert_allclose(got.values, want.values.astype(np.float64), rtol=1e-6)
    assert got.attrs["units"] == "K" and "scale_factor" not in got.attrs


@pytest.mark.parametrize("name", ["gregorian", "proleptic_gregorian"])
def test_time_axes_decode_as_xarray(ctx, corpus, name):
    # Calendars and units xarray decodes to datetime64 (the others give cftime objects).
    with xr.open_dataset(corpus / f"cal_{name}.nc") as src:
        want = src.x.load()
    got = whole(ctx, corpus / f"cal_{name}.tet", "x")
    np.testing.assert_array_equal(got.time.values.astype("datetime64[ns]"), want.time.values)
    np.testing.assert_array_equal(got.values, want.values)

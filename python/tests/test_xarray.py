"""to_xarray: results pivoted back into arrays equal what xarray computes from the NetCDF
source of the same file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import datafusion_tet

xr = pytest.importorskip("xarray")


def test_whole_dataset_round_trips(ctx, weather):
    source, path, _ = weather
    got = datafusion_tet.to_xarray(ctx.sql(f"SELECT * FROM tet('{path}', 'temp')"))
    v = got["v"]
    assert v.dims == ("time", "lat", "lon")
    want = source.temp.sortby(["time", "lat", "lon"])
    xr.testing.assert_equal(v.rename("temp").drop_attrs(), want.drop_attrs())
    # CF attributes come back
    assert v.attrs["units"] == "K" and got.lat.attrs["units"] == "degrees_north"


def test_group_by_lat_lon_is_a_map(ctx, weather):
    source, path, _ = weather
    q = f"SELECT lat, lon, avg(v) AS temp FROM tet('{path}', 'temp') GROUP BY lat, lon"
    for df in (ctx.sql(q), datafusion_tet.sql(ctx, q)):
        got = datafusion_tet.to_xarray(df)
        assert got.temp.dims == ("lat", "lon")
        want = source.temp.astype("float64").mean("time")
        xr.testing.assert_allclose(got.temp, want.sortby(["lat", "lon"]).drop_attrs(), rtol=1e-9)


def test_group_by_time_is_a_series_and_nan_for_missing(ctx, weather):
    source, path, _ = weather
    df = ctx.sql(f"SELECT time, avg(v) AS precip FROM tet('{path}', 'precip') WHERE lat >= 0 GROUP BY time")
    got = datafusion_tet.to_xarray(df)
    want = source.precip.where(source.lat >= 0, drop=True).mean(["lat", "lon"])
    xr.testing.assert_allclose(got.precip, want.astype("float64").drop_attrs(), rtol=1e-6)
    # a cell no row gives is NaN
    sparse = ctx.sql(
        f"SELECT lat, lon, max(v) AS hi FROM tet('{path}', 'temp') "
        "WHERE (lat > 0 AND lon < 100) OR (lat < 0 AND lon > 200) GROUP BY lat, lon"
    )
    grid = datafusion_tet.to_xarray(sparse)
    north, south = int((source.lat > 0).sum()), int((source.lat < 0).sum())
    west, east = int((source.lon < 100).sum()), int((source.lon > 200).sum())
    assert grid.hi.shape == (north + south, west + east)
    assert int(np.isnan(grid.hi.values).sum()) == north * east + south * west
    want = source.temp.max("time").where((source.lat > 0) & (source.lon < 100))
    got_nw = grid.hi.sel(lat=source.lat[source.lat > 0], lon=source.lon[source.lon < 100])
    np.testing.assert_allclose(got_nw.values, want.sel(lat=got_nw.lat, lon=got_nw.lon).values)


def test_computed_keys_need_dims(ctx, weather):
    source, path, _ = weather
    q = f"SELECT date_trunc('day', time) AS day, lat, avg(v) AS temp FROM tet('{path}', 'temp') GROUP BY 1, 2"
    with pytest.raises(ValueError, match="dims"):
        datafusion_tet.to_xarray(ctx.sql(f"SELECT date_trunc('day', time) AS day, avg(v) FROM tet('{path}', 'temp') GROUP BY 1"))
    got = datafusion_tet.to_xarray(ctx.sql(q), dims=["day", "lat"])
    want = source.temp.astype("float64").resample(time="1D").mean().mean("lon").rename(time="day")
    xr.testing.assert_allclose(got.temp, want.sortby("lat").drop_attrs().transpose("day", "lat"), rtol=1e-9)


def test_arrow_inputs(ctx, weather):
    _, path, _ = weather
    df = ctx.sql(f"SELECT lat, avg(v) AS m FROM tet('{path}', 'temp') GROUP BY lat")
    table = df.to_arrow_table()
    a = datafusion_tet.to_xarray(table)
    b = datafusion_tet.to_xarray(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))
    xr.testing.assert_identical(a, b)
    assert a.m.dims == ("lat",)
    with pytest.raises(ValueError, match="repeat"):
        datafusion_tet.to_xarray(pa.table({"x": [1, 1], "y": [1.0, 2.0]}), dims=["x"])

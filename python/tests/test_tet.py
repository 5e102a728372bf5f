"""datafusion_tet in a datafusion-python 55 session: registration, every function, DDL,
tables with options, the fold path against the row path, errors, the version guard."""

from __future__ import annotations

import importlib
import sys

import datafusion
import numpy as np
import pyarrow as pa
import pytest

import datafusion_tet


def rows(df) -> list[dict]:
    """A result as rows in a fixed order (by every value, floats rounded)."""
    table = df.to_arrow_table() if hasattr(df, "to_arrow_table") else df
    out = table.to_pylist()

    def key(r):
        return tuple((v is None, str(round(v, 3)) if isinstance(v, float) else str(v)) for v in r.values())

    return sorted(out, key=key)


def assert_same_rows(got: list[dict], want: list[dict]) -> None:
    """Equal rows, floats to 1e-9 relative (the fold sums in another order)."""
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for k in g:
            if isinstance(w[k], float) and g[k] is not None:
                assert g[k] == pytest.approx(w[k], rel=1e-9, nan_ok=True), (k, g, w)
            else:
                assert g[k] == w[k], (k, g, w)


def plan_text(ctx, query: str) -> str:
    batches = ctx.sql(f"EXPLAIN FORMAT INDENT {query}").collect()
    table = pa.Table.from_batches(batches)
    return "\n".join(table.column("plan").to_pylist())


# --- registration and the metadata functions ---------------------------------------


def test_version_matches_the_host():
    assert datafusion_tet.DATAFUSION_VERSION.split(".")[0] == datafusion.__version__.split(".")[0]


def test_register_adds_every_function(ctx, weather):
    _, path, _ = weather
    names = rows(ctx.sql(f"SELECT name, dtype, shape FROM tet_datasets('{path}')"))
    assert {r["name"] for r in names} >= {"temp", "precip", "lat", "lon", "time"}
    temp = next(r for r in names if r["name"] == "temp")
    assert temp["shape"] == [12, 9, 12]
    chunks = ctx.sql(f"SELECT count(*) AS n FROM tet_chunks('{path}', 'temp')").to_pydict()
    assert chunks["n"][0] >= 1
    files = ctx.sql(f"SELECT file, axes FROM tet_files('{path}', 'temp')").to_pydict()
    assert files["file"] == [str(path)]
    assert files["axes"][0] == ["time", "lat", "lon"]


def test_tet_reads_the_dataset(ctx, weather):
    source, path, _ = weather
    got = ctx.sql(f"SELECT count(*) AS n, avg(v) AS mean, max(v) AS hi FROM tet('{path}', 'temp')").to_pydict()
    assert got["n"] == [source.temp.size]
    assert got["mean"][0] == pytest.approx(float(source.temp.astype("float64").mean()), rel=1e-9)
    assert got["hi"][0] == pytest.approx(float(source.temp.max()))
    table = ctx.sql(f"SELECT * FROM tet('{path}', 'temp')").to_arrow_table()
    assert table.column_names == ["time", "lat", "lon", "v"]
    assert table.schema.field("lat").metadata[b"units"] == b"degrees_north"
    assert table.schema.field("lat").metadata[datafusion_tet.AXIS_KEY.encode()] == b"1"
    assert table.schema.field("v").metadata[b"units"] == b"K"


def test_axis_filters_reach_the_scan(ctx, weather):
    source, path, _ = weather
    q = f"SELECT count(*) AS n FROM tet('{path}', 'temp') WHERE lat > 10 AND lon < 100"
    expected = int(((source.lat > 10).sum() * (source.lon < 100).sum() * source.time.size).item())
    assert ctx.sql(q).to_pydict()["n"] == [expected]
    plan = plan_text(ctx, f"SELECT v FROM tet('{path}', 'temp') WHERE lat > 10")
    # The host shows our scan by its own display: the selection on lat was pushed.
    assert "TetScanExec" in plan and "selection=[lat:" in plan, plan


def test_zone_maps_and_exact_statistics_reach_the_host(ctx, weather):
    source, path, _ = weather
    above = float(source.temp.max()) + 1
    q = f"SELECT count(*) AS n FROM tet('{path}', 'temp') WHERE v > {above}"
    plan = plan_text(ctx, q)
    # Every chunk's zone map excludes the value: none is read.
    assert "pruned_by_zone=" in plan and "chunks=0/" in plan, plan
    assert ctx.sql(q).to_pydict()["n"] == [0]
    # The host answers count(*) from our exact statistics, without a scan.
    plan = plan_text(ctx, f"SELECT count(*) FROM tet('{path}', 'temp')")
    assert "PlaceholderRowExec" in plan and str(source.temp.size) in plan and "TetScanExec" not in plan, plan


def test_several_datasets_make_one_table(ctx, weather):
    source, path, _ = weather
    got = ctx.sql(f"SELECT count(temp) AS t, count(precip) AS p FROM tet('{path}', 'temp', 'precip')").to_pydict()
    assert got["t"] == [source.temp.size]
    assert got["p"] == [int(source.precip.notnull().sum())]


def test_archive_by_folder_and_glob(ctx, archive):
    ds, folder = archive
    for location in (f"{folder}/", f"{folder}/*.tet"):
        got = ctx.sql(f"SELECT count(*) AS n, min(time) AS t0 FROM tet('{location}', 'temp')").to_pydict()
        assert got["n"] == [ds.temp.size]
    files = ctx.sql(f"SELECT file FROM tet_files('{folder}/*.tet')").to_pydict()["file"]
    assert len(files) == 3


def test_create_external_table(ctx, weather):
    source, path, _ = weather
    ctx.sql(f"CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{path}' OPTIONS ('tet.dataset' 'temp')").collect()
    got = ctx.sql("SELECT count(*) AS n FROM t WHERE lat < 0").to_pydict()
    assert got["n"] == [int((source.lat < 0).sum()) * source.time.size * source.lon.size]
    ctx.sql(
        f"CREATE EXTERNAL TABLE both_vars STORED AS TET LOCATION '{path}' OPTIONS ('tet.datasets' 'temp,precip')"
    ).collect()
    assert ctx.sql("SELECT * FROM both_vars LIMIT 1").to_arrow_table().column_names == [
        "time",
        "lat",
        "lon",
        "temp",
        "precip",
    ]


# --- TetTable -----------------------------------------------------------------------


def test_tet_table_registers(weather):
    source, path, _ = weather
    ctx = datafusion.SessionContext()
    t = datafusion_tet.TetTable(path, "temp")
    assert t.axes == ["time", "lat", "lon"] and t.columns[-1] == "v"
    ctx.register_table("temp", t)
    got = ctx.sql("SELECT lat, avg(v) AS m FROM temp GROUP BY lat").to_pandas().set_index("lat")["m"]
    want = source.temp.astype("float64").mean(["time", "lon"]).to_series()
    np.testing.assert_allclose(got.sort_index().to_numpy(), want.sort_index().to_numpy(), rtol=1e-9)
    # read_table takes it too
    assert ctx.read_table(datafusion_tet.TetTable(path, "precip")).count() == source.precip.size


def test_tet_table_options_apply(weather):
    source, path, _ = weather
    ctx = datafusion.SessionContext()
    ctx.register_table("plain", datafusion_tet.TetTable(path, "temp"))
    ctx.register_table("limited", datafusion_tet.TetTable(path, "temp", max_dataset_cells=10))
    assert ctx.sql("SELECT count(v) AS n FROM plain").to_pydict()["n"] == [source.temp.size]
    with pytest.raises(Exception, match="max_dataset_cells|cells"):
        ctx.sql("SELECT count(v) AS n FROM limited").collect()
    with pytest.raises(datafusion_tet.TetError, match="no_such_option"):
        datafusion_tet.TetTable(path, "temp", no_such_option=1)
    with pytest.raises(datafusion_tet.TetError):
        datafusion_tet.TetTable(path, "temp", fetch_concurrency="many")


def test_host_session_options_via_extension(weather):
    source, path, _ = weather
    config = datafusion.SessionConfig().with_extension(datafusion_tet.TetOptions())
    ctx = datafusion.SessionContext(config)
    datafusion_tet.register(ctx)
    q = f"SELECT count(v) AS n FROM tet('{path}', 'temp')"
    assert ctx.sql(q).to_pydict()["n"] == [source.temp.size]
    ctx.sql("SET tet.max_dataset_cells = 10").collect()
    with pytest.raises(Exception, match="cells"):
        ctx.sql(q).collect()


# --- the fold path ------------------------------------------------------------------

FOLD_QUERIES = [
    "SELECT lat, avg(v) AS m FROM tet('{p}', 'temp') GROUP BY lat",
    "SELECT lat, lon, min(v) AS lo, max(v) AS hi, count(*) AS n FROM tet('{p}', 'temp') GROUP BY lat, lon",
    "SELECT time, sum(v) AS s, stddev(v) AS sd FROM tet('{p}', 'temp') WHERE lat > 0 GROUP BY time",
    "SELECT date_trunc('day', time) AS day, avg(v) AS m FROM tet('{p}', 'temp') GROUP BY 1",
    "SELECT floor(lat / 30) * 30 AS band, corr(temp, precip) AS r FROM tet('{p}', 'temp', 'precip') GROUP BY 1",
    "SELECT avg(v) FILTER (WHERE v > 290) AS warm, count(*) AS n FROM tet('{p}', 'temp')",
]


@pytest.mark.parametrize("template", FOLD_QUERIES)
def test_fold_path_equals_row_path(ctx, weather, template):
    _, path, _ = weather
    q = template.format(p=path)
    row_path = rows(ctx.sql(q))
    assert len(row_path) >= 1
    assert_same_rows(rows(datafusion_tet.sql(ctx, q)), row_path)
    assert_same_rows(rows(ctx.sql(f"SELECT * FROM tet_query('{q.replace(chr(39), chr(39) * 2)}')")), row_path)


def test_explain_shows_the_fold(ctx, weather):
    _, path, _ = weather
    q = f"SELECT lat, avg(v) FROM tet('{path}', 'temp') GROUP BY lat"
    ours = datafusion_tet.explain(q)
    assert "TetAggregateExec" in ours, ours
    assert "TetAggregateExec" not in plan_text(ctx, q)  # the host plans its own aggregate
    host = plan_text(ctx, f"SELECT * FROM tet_query('{q.replace(chr(39), chr(39) * 2)}')")
    assert "TetAggregateExec" in host, host
    assert "TetAggregateExec" not in datafusion_tet.explain(q, aggregate_pushdown=False)


def test_fold_result_joins_host_tables(ctx, weather):
    _, path, _ = weather
    ctx.from_pydict({"lat": [60.0, 0.0, -60.0], "zone": ["north", "equator", "south"]}, name="zones")
    folded = datafusion_tet.sql(ctx, f"SELECT lat, avg(v) AS m FROM tet('{path}', 'temp') GROUP BY lat")
    ctx.register_view("folded", folded)
    got = rows(ctx.sql("SELECT zone, m FROM folded JOIN zones USING (lat)"))
    want = rows(
        ctx.sql(
            f"SELECT zone, avg(v) AS m FROM tet('{path}', 'temp') JOIN zones USING (lat) GROUP BY zone, lat"
        )
    )
    assert len(got) == 3
    assert_same_rows(got, want)


# --- errors -------------------------------------------------------------------------


def test_errors_are_exceptions(ctx, weather, tmp_path):
    _, path, _ = weather
    missing = tmp_path / "missing.tet"
    with pytest.raises(datafusion_tet.TetError, match="missing.tet"):
        datafusion_tet.TetTable(missing, "temp")
    with pytest.raises(Exception, match="missing.tet"):
        ctx.sql(f"SELECT * FROM tet('{missing}', 'temp')").collect()
    with pytest.raises(Exception, match="nope"):
        ctx.sql(f"SELECT * FROM tet('{path}', 'nope')").collect()
    with pytest.raises(datafusion_tet.TetError, match="nope"):
        datafusion_tet.TetTable(path, "nope")
    with pytest.raises(Exception, match="datasets"):  # several datasets, none named
        ctx.sql(f"SELECT * FROM tet('{path}')").collect()
    with pytest.raises(datafusion_tet.TetError):
        datafusion_tet.sql(ctx, "SELECT FROM WHERE")
    with pytest.raises(Exception):
        ctx.sql("SELECT * FROM tet_query('CREATE TABLE x (a int)')").collect()
    with pytest.raises(Exception, match="tet_query"):
        ctx.sql("SELECT * FROM tet_query(1, 2)").collect()
    not_tet = tmp_path / "not.tet"
    not_tet.write_bytes(b"definitely not a tet file" * 10)
    with pytest.raises(Exception):
        ctx.sql(f"SELECT * FROM tet('{not_tet}')").collect()
    # the session still works
    assert ctx.sql(f"SELECT count(*) AS n FROM tet('{path}', 'temp')").to_pydict()["n"][0] > 0


def test_version_guard(monkeypatch):
    monkeypatch.setattr(datafusion, "__version__", "56.0.0")
    monkeypatch.delitem(sys.modules, "datafusion_tet")
    with pytest.raises(ImportError) as e:
        importlib.import_module("datafusion_tet")
    assert "56.0.0" in str(e.value) and datafusion_tet.DATAFUSION_VERSION in str(e.value)
    monkeypatch.undo()
    assert importlib.import_module("datafusion_tet").DATAFUSION_VERSION.startswith("55.")

#!/usr/bin/env python3
"""Benchmark: the fold vs. every other way to get the same answers, against a native floor.

Generates a weather-like f32 cube (time x lat x lon, default 512 x 361 x 720, ~0.5 GiB) as
`.tet` (one chunk per time step) and as long-format Parquet, warms the page cache, and
reports the median of several runs of each query shape in QUERIES (the plain fold, the
analysis shapes: time buckets, latitude bands, area weights, value filters, FILTER
clauses, affine and other expressions of v). Engines, all in the same run:

  ours via the Rust API (benches/driver.rs; also with TET_SIMD=avx512 and =portable) and via tet-sql
  (its own Elapsed for a repeated query in one session, the first query, and the process
  wall time),
  DataFusion's own plan over our scan (SET tet.aggregate_pushdown = false),
  DataFusion and DuckDB over the Parquet table,
  xarray on the in-memory DataArray (groupby, weighted, where), numpy for the plain shapes,
  the upstream engine (tet-py 0.8.3 `mean(..., axes=...)`) where it has the shape,
  the native floor: benches/floor.c built with `cc -O3 -march=native -fopenmp`, two
  threads summing every f32 of the payload through a pre-faulted mmap, prefetching 8 KiB ahead; measured once,
  and paired with each timed run of our Rust API and of a query typed into one tet-sql
  session (one floor pass just before it; the median of the per-run ratios is reported
  beside the ratios to the single floor).

The same cube with zstd chunks (level 3) is timed for the plain shapes (full_mean, by_lat,
by_time) against its own native floor, benches/floor_zstd.c (libzstd, the version our build
uses compiled with -march=native, decompressing every chunk and summing it, two threads),
with decoded GB/s beside each time.

Usage: python3 benches/run.py [--time 512] [--reps 5] [--out benches/RESULTS.md]
       python3 benches/run.py --only maps [--reps 9]   (maps per grid cell, issue 59)
       python3 benches/run.py --archive [--dir DIR] [--archive-bin target/release/deps/archive-HASH]
       python3 benches/run.py --archive-mixed [--dir DIR] [--archive-bin ...]
(`--archive`: only the section of archives, issue 57, benches/archive.rs: the cube split into
16 files vs one file, opening 1 000 local files and 200 objects on moto's S3, a cold page cache;
it replaces that section of --out. Its files are written once under DIR/archive and reused.)
Installs numpy, pyarrow, duckdb, xarray and tet-py with pip if they are missing (and
libzstd-dev with apt when the zstd-sys sources are not in the cargo registry).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["full_mean", "by_lat", "by_time", "by_lon", "by_lat_sliced", "hour_of_day", "lat_bands", "area_weighted",
           "value_filter", "filter_clause", "affine", "non_affine"]
# The shapes issue 13 targets at <= 2x the floor (non_affine: <= 4x).
TARGET = {q: 2.0 for q in QUERIES} | {"non_affine": 4.0}


def ensure(pkgs):
    missing = []
    for mod, pkg in pkgs:
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *missing])


def run_times(fn, reps):
    """The seconds of `reps` runs of `fn`, after one run to warm up."""
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def median_time(fn, reps):
    return statistics.median(run_times(fn, reps))


def cube(T, LAT, LON):
    import numpy as np

    t = np.arange(T, dtype=np.float64)[:, None, None]
    lat = np.linspace(-90.0, 90.0, LAT)[None, :, None]
    lon = (np.arange(LON) * 360.0 / LON)[None, None, :]
    base = 300.0 - 45.0 * np.sin(np.radians(lat)) ** 2
    daily = 6.0 * np.cos((lon / 15.0 + (t * 6) % 24) / 24.0 * 2 * np.pi) * np.cos(np.radians(lat))
    ripple = 0.5 * (((np.arange(LAT)[None, :, None] * 7 + np.arange(LON)[None, None, :] * 13 + t.astype(np.int64) * 3) % 11) / 11.0)
    return (base + daily + ripple).astype("<f4")


def write_parquet(path, cubes):
    """Cubes [T, LAT, LON] (name -> array) as long-format Parquet: time, lat, lon, then a
    column per cube; row groups of 16 time steps."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    T, LAT, LON = next(iter(cubes.values())).shape
    lat_vals = np.linspace(-90.0, 90.0, LAT).astype("f4")
    lon_vals = (np.arange(LON) * 360.0 / LON).astype("f4")
    writer = None
    for t0 in range(0, T, 16):
        t1 = min(T, t0 + 16)
        n = (t1 - t0) * LAT * LON
        table = pa.table({
            "time": np.repeat(np.arange(t0, t1, dtype=np.int64), LAT * LON),
            "lat": np.tile(np.repeat(lat_vals, LON), t1 - t0),
            "lon": np.tile(lon_vals, (t1 - t0) * LAT),
        } | {name: c[t0:t1].reshape(n) for name, c in cubes.items()})
        writer = writer or pq.ParquetWriter(path, table.schema, compression="snappy")
        writer.write_table(table)
    writer.close()


MULTI_HEADING = "## Two variables"
MULTI_QUERIES = ["diff_by_lat", "weighted_product", "corr", "filtered_by_lat", "join_diff_by_lat",
                 "diff_by_lat_sliced", "join_diff_by_lat_sliced"]
# Issue 14: each shape <= 2x a native pass over both payloads; the join form within 1.2x
# of the form over the table of both datasets.
MULTI_TARGET = {"diff_by_lat": 2.0, "weighted_product": 2.0, "corr": 2.0}


def multi(a, d, driver, tet_sql, floor_bin):
    """Two variables of the cube's shape (datasets a and b of one file): ours vs the peers."""
    import duckdb
    import numpy as np
    import xarray as xr

    T, LAT, LON = a.time, a.lat, a.lon
    tet2, parq2 = d / f"cube2_{T}.tet", d / f"cube2_{T}.parquet"
    A = cube(T, LAT, LON)
    # A second variable correlated with the first (a dew point under a temperature).
    t = np.arange(T, dtype=np.float64)[:, None, None]
    lat = np.linspace(-90.0, 90.0, LAT)[None, :, None]
    lon = (np.arange(LON) * 360.0 / LON)[None, None, :]
    B = (A - 4.0 - 3.0 * np.cos(np.radians(lat)) * np.sin((lon + 15.0 * t) / 57.3) ** 2).astype("<f4")
    if not tet2.exists():
        ra, rb = d / "cube2_a.f32", d / "cube2_b.f32"
        A.tofile(ra)
        B.tofile(rb)
        subprocess.check_call(driver + ["write-tet2", str(ra), str(rb), str(tet2), str(T), str(LAT), str(LON)])
        ra.unlink()
        rb.unlink()
    lat_vals = np.linspace(-90.0, 90.0, LAT).astype("f4")
    lon_vals = (np.arange(LON) * 360.0 / LON).astype("f4")
    if not parq2.exists():
        write_parquet(parq2, {"a": A, "b": B})
    for p in (tet2, parq2):
        with open(p, "rb") as f:
            while f.read(64 << 20):
                pass
    sl = max(1, T // 8)
    res = {}
    out = subprocess.check_output(driver + ["run-multi", str(tet2), str(a.reps)], text=True,
                                  env=os.environ | {"TET_FLOOR_BIN": str(floor_bin)})
    for line in out.splitlines():
        r = json.loads(line)
        res[(r["engine"], r["query"])] = r["median_s"]
    floor = res[("floor_native_c", "both_payloads")]
    m, x, y = f"tet('{tet2}', 'a', 'b')", f"tet('{tet2}', 'a')", f"tet('{tet2}', 'b')"
    join = ("SELECT x.lat, avg(x.v - y.v) FROM {x} x JOIN {y} y "
            "ON x.time = y.time AND x.lat = y.lat AND x.lon = y.lon{w} GROUP BY x.lat")
    sql = {
        "diff_by_lat": "SELECT lat, avg(a - b) FROM {m} GROUP BY lat",
        "weighted_product": "SELECT sum(a * b * cos(radians(lat))) / sum(cos(radians(lat))) FROM {m}",
        "corr": "SELECT corr(a, b) FROM {m}",
        "filtered_by_lat": "SELECT lat, avg(a) FROM {m} WHERE b > 290 GROUP BY lat",
        "join_diff_by_lat": join.replace("{w}", ""),
        "diff_by_lat_sliced": "SELECT lat, avg(a - b) FROM {m} WHERE time < %d GROUP BY lat" % sl,
        "join_diff_by_lat_sliced": join.replace("{w}", " WHERE x.time < %d" % sl),
    }

    def tet_sql_elapsed(s):
        out = subprocess.run([str(tet_sql), "--format", "csv", "-c"] + [s] * (a.reps + 1), check=True,
                             capture_output=True, text=True).stdout
        elapsed = [float(v) for v in re.findall(r"Elapsed ([0-9.]+) seconds", out)]
        return statistics.median(elapsed[1:])

    for q in MULTI_QUERIES:
        res[("ours_tet_sql", q)] = tet_sql_elapsed(sql[q].format(m=m, x=x, y=y))
    con = duckdb.connect()
    con.execute("SET threads = %d" % os.cpu_count())
    pt = f"read_parquet('{parq2}')"
    duck = {
        "diff_by_lat": f"SELECT lat, avg(a - b) FROM {pt} GROUP BY lat",
        "weighted_product": f"SELECT sum(a * b * cos(radians(lat))) / sum(cos(radians(lat))) FROM {pt}",
        "corr": f"SELECT corr(a, b) FROM {pt}",
        "filtered_by_lat": f"SELECT lat, avg(a) FROM {pt} WHERE b > 290 GROUP BY lat",
        "diff_by_lat_sliced": f"SELECT lat, avg(a - b) FROM {pt} WHERE time < {sl} GROUP BY lat",
    }
    for q, s in duck.items():
        res[("duckdb_parquet", q)] = median_time(lambda: con.execute(s).fetchall(), a.reps)
    coords = {"time": np.arange(T), "lat": lat_vals.astype("f8"), "lon": lon_vals.astype("f8")}
    XA = xr.DataArray(A, dims=("time", "lat", "lon"), coords=coords)
    XB = xr.DataArray(B, dims=("time", "lat", "lon"), coords=coords)
    w = np.cos(np.radians(XA.lat))
    xshapes = {
        "diff_by_lat": lambda: (XA - XB).mean(("time", "lon")).values,
        "weighted_product": lambda: float((XA * XB).weighted(w).mean()),
        "corr": lambda: float(xr.corr(XA, XB)),
        "filtered_by_lat": lambda: XA.where(XB > 290).mean(("time", "lon")).values,
        "diff_by_lat_sliced": lambda: (XA - XB).isel(time=slice(0, sl)).mean(("time", "lon")).values,
    }
    for q, fn in xshapes.items():
        res[("xarray_in_memory", q)] = median_time(fn, a.reps)

    # Correctness: ours (tet-sql) against numpy in f64 and xarray's corr.
    def ours(q):
        got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                       sql[q].format(m=m, x=x, y=y) + (" ORDER BY 1" if "lat" in q else "")],
                                      text=True)
        return np.array([[float(v) for v in l.split(",")] for l in got.strip().splitlines()[1:]])
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    want = (A64 - B64).mean(axis=(0, 2))
    for q in ("diff_by_lat", "join_diff_by_lat"):
        assert np.allclose(ours(q)[:, 1], want, rtol=1e-9), f"{q} differs from numpy"
    hot = B64 > 290
    n_hot = hot.sum(axis=(0, 2))
    want_hot = np.where(hot, A64, 0.0).sum(axis=(0, 2))[n_hot > 0] / n_hot[n_hot > 0]
    assert np.allclose(ours("filtered_by_lat")[:, 1], want_hot, rtol=1e-9), "filtered_by_lat differs from numpy"
    assert np.isclose(ours("corr")[0, 0], float(xr.corr(XA.astype("f8"), XB.astype("f8"))), rtol=1e-9), \
        "corr differs from xarray"
    wl = np.cos(np.radians(lat_vals.astype(np.float64)))[None, :, None]
    ref = float((A64 * B64 * wl).sum() / (wl.sum() * T * LON))
    assert np.isclose(ours("weighted_product")[0, 0], ref, rtol=1e-6), "weighted_product differs from numpy"

    engines = ["ours_rust_api", "ours_tet_sql", "datafusion_over_our_scan", "datafusion_hash_join",
               "duckdb_parquet", "xarray_in_memory"]
    cell = lambda e, q, fmt: fmt(res[(e, q)]) if (e, q) in res else "n/a"
    lines = [MULTI_HEADING, "",
             f"Two f32 cubes [{T}, {LAT}, {LON}] as datasets `a` and `b` of one file "
             f"({tet2.stat().st_size / 2**20:.0f} MiB .tet, raw chunks; {parq2.stat().st_size / 2**20:.0f} MiB "
             "Parquet with both columns). `{m}` = `tet(f, 'a', 'b')`, `{x}`/`{y}` = `tet(f, 'a')`/`tet(f, 'b')`; "
             f"`_sliced` = first {sl} time steps. Native floor: `benches/floor.c` over both payloads (one pass over "
             f"every f32 of `a` and `b`), same run: **{floor:.4f} s**. Median of {a.reps} runs (the hash join: 3).",
             "", "Queries:", ""]
    lines += [f"- `{q}`: `{sql[q].format(m='{m}', x='{x}', y='{y}')}`" for q in MULTI_QUERIES]
    lines += ["", "| engine | " + " | ".join(MULTI_QUERIES) + " |",
              "| --- | " + " | ".join("---" for _ in MULTI_QUERIES) + " |"]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda v: f"{v:.4f}") for q in MULTI_QUERIES) + " |")
    lines += ["", "Time / native floor over both payloads (the target is the issue's):", "",
              "| engine | " + " | ".join(MULTI_QUERIES) + " |",
              "| --- | " + " | ".join("---" for _ in MULTI_QUERIES) + " |",
              "| target | " + " | ".join(f"<= {MULTI_TARGET[q]:.0f}" if q in MULTI_TARGET else "-"
                                     for q in MULTI_QUERIES) + " |"]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda v: f"{v / floor:.2f}") for q in MULTI_QUERIES) + " |")
    ratio = lambda e, j, q: f"{res[(e, j)] / res[(e, q)]:.2f}" if (e, j) in res and (e, q) in res else "n/a"
    lines += ["", "Time of the join form / time of the same query over the table of both datasets (target <= 1.2), and DataFusion's "
              "hash join (rewrite off) over ours on the same slice:", "",
              "| engine | join_diff_by_lat / diff_by_lat | join_diff_by_lat_sliced / diff_by_lat_sliced |",
              "| --- | --- | --- |"]
    for e in ["ours_rust_api", "ours_tet_sql"]:
        lines.append(f"| {e} | {ratio(e, 'join_diff_by_lat', 'diff_by_lat')} | "
                     f"{ratio(e, 'join_diff_by_lat_sliced', 'diff_by_lat_sliced')} |")
    if ("datafusion_hash_join", "join_diff_by_lat_sliced") in res:
        hj = res[("datafusion_hash_join", "join_diff_by_lat_sliced")]
        lines.append(f"| datafusion_hash_join / ours_rust_api join | n/a | "
                     f"{hj / res[('ours_rust_api', 'join_diff_by_lat_sliced')]:.0f}x |")
    lines += ["", "datafusion_over_our_scan: `SET tet.aggregate_pushdown = false` (DataFusion's aggregate over our "
              "scan of both datasets); datafusion_hash_join: `SET tet.join_rewrite = false` (DataFusion's hash join "
              "of the two one-dataset scans, then its aggregate), on the slice only. xarray works on both arrays "
              "already in memory (`(a - b).mean`, `(a * b).weighted(cos(lat)).mean()`, `xr.corr`).", ""]
    return lines


MAPS_HEADING = "## Maps per grid cell (issue 59)"
MAPS_QUERIES = ["cell_mean", "cell_stats", "cell_hot", "median_by_lat", "p90_per_cell", "approx_p90_by_lat",
                "hist_by_band"]
# Issue 59: each map and the histogram within 1.5x of the floor, exact medians and
# percentiles within 3x, approximate percentiles within 2x.
MAPS_TARGET = {"cell_mean": 1.5, "cell_stats": 1.5, "cell_hot": 1.5, "median_by_lat": 3.0, "p90_per_cell": 3.0,
               "approx_p90_by_lat": 2.0, "hist_by_band": 1.5}


def histogram_by_band(A, lat):
    """The count of each (floor(lat / 10), floor(v)) of cube `A` (time, lat, lon), by numpy."""
    import numpy as np
    band = np.floor(lat / 10)
    b = np.floor(A)
    lo, nb = b.min(), int(b.max() - b.min()) + 1
    key = (band - band.min()).astype(np.int64)[None, :, None] * nb + (b - lo).astype(np.int64)
    counts = np.bincount(key.ravel())
    return {(float(band.min() + k // nb), float(lo + k % nb)): int(n) for k, n in enumerate(counts) if n}


def maps(a, d, driver, tet_sql, floor_bin, tetf, parq):
    """Maps per grid cell over time (`GROUP BY lat, lon`): ours and DataFusion's own plans
    (benches/driver.rs `run`, paired with the floor), DuckDB on the Parquet table, xarray
    and numpy in memory; ours checked against numpy."""
    import duckdb
    import numpy as np
    import xarray as xr

    T, LAT, LON = a.time, a.lat, a.lon
    A = cube(T, LAT, LON)
    sql = {
        "cell_mean": "SELECT lat, lon, avg(v) FROM {t} GROUP BY lat, lon",
        "cell_stats": "SELECT lat, lon, avg(v), stddev(v), max(v) FROM {t} GROUP BY lat, lon",
        "cell_hot": "SELECT lat, lon, count(*) FILTER (WHERE v > 290), min(v) FROM {t} GROUP BY lat, lon",
        "median_by_lat": "SELECT lat, median(v) FROM {t} GROUP BY lat",
        "p90_per_cell": "SELECT lat, lon, percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM {t} GROUP BY lat, lon",
        "approx_p90_by_lat": "SELECT lat, approx_percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM {t} GROUP BY lat",
        "hist_by_band": "SELECT floor(lat / 10) AS band, floor(v) AS bin, count(*) FROM {t} GROUP BY band, bin",
    }
    # DuckDB's names of the same statistics (its approximate quantile is a t-digest).
    duck = sql | {"p90_per_cell": "SELECT lat, lon, quantile_cont(v, 0.9) FROM {t} GROUP BY lat, lon",
                  "approx_p90_by_lat": "SELECT lat, approx_quantile(v, 0.9) FROM {t} GROUP BY lat"}
    res = {}
    env = os.environ | {"TET_FLOOR_BIN": str(floor_bin), "TET_BENCH_QUERIES": ",".join(MAPS_QUERIES),
                        "TET_BENCH_ENGINES": "ours_rust_api,datafusion_over_our_scan,datafusion_parquet"}
    out = subprocess.check_output(driver + ["run", str(tetf), str(parq), str(a.reps)], text=True, env=env)
    for line in out.splitlines():
        r = json.loads(line)
        if "engine" in r:
            res[(r["engine"], r["query"])] = r["median_s"]
    floor = res[("floor_native_c", "full_mean")]
    con = duckdb.connect()
    con.execute("SET threads = %d" % os.cpu_count())
    pt = f"read_parquet('{parq}')"
    for q in MAPS_QUERIES:
        res[("duckdb_parquet", q)] = median_time(lambda: con.execute(duck[q].format(t=pt)).fetchall(), a.reps)
    coords = {"time": np.arange(T), "lat": np.linspace(-90.0, 90.0, LAT), "lon": np.arange(LON) * 360.0 / LON}
    X = xr.DataArray(A, dims=("time", "lat", "lon"), coords=coords)
    xshapes = {
        "cell_mean": lambda: X.mean("time").values,
        "cell_stats": lambda: (X.mean("time").values, X.std("time", ddof=1).values, X.max("time").values),
        "cell_hot": lambda: ((X > 290).sum("time").values, X.min("time").values),
        "median_by_lat": lambda: X.median(("time", "lon")).values,
        "p90_per_cell": lambda: X.quantile(0.9, "time").values,
        "approx_p90_by_lat": lambda: X.quantile(0.9, ("time", "lon")).values,
    }
    nshapes = {
        "cell_mean": lambda: A.mean(axis=0, dtype=np.float64),
        "cell_stats": lambda: (A.mean(axis=0, dtype=np.float64), A.std(axis=0, ddof=1, dtype=np.float64),
                               A.max(axis=0)),
        "cell_hot": lambda: ((A > 290).sum(axis=0), A.min(axis=0)),
        "median_by_lat": lambda: np.median(A, axis=(0, 2)),
        "p90_per_cell": lambda: np.quantile(A, 0.9, axis=0),
        "approx_p90_by_lat": lambda: np.quantile(A, 0.9, axis=(0, 2)),
        "hist_by_band": lambda: histogram_by_band(A, coords["lat"]),
    }
    for q in MAPS_QUERIES:
        if q in xshapes:
            res[("xarray_in_memory", q)] = median_time(xshapes[q], a.reps)
        res[("numpy_in_memory", q)] = median_time(nshapes[q], a.reps)

    # Correctness: ours (tet-sql) against numpy in f64.
    got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                   f"CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{tetf}' "
                                   "OPTIONS ('tet.dataset' 'temp')",
                                   sql["cell_stats"].format(t="t") + " ORDER BY lat, lon"], text=True)
    rows = np.array([[float(x) for x in l.split(",")] for l in got.strip().splitlines()[1:]])
    A64 = A.astype(np.float64)
    for k, want in ((2, A64.mean(axis=0)), (3, A64.std(axis=0, ddof=1)), (4, A64.max(axis=0))):
        assert rows.shape[0] == LAT * LON and np.allclose(rows[:, k], want.reshape(-1), rtol=1e-9), \
            f"cell_stats column {k} differs from numpy"
    # The 90th percentile per cell: numpy's linear quantile in f64; ours interpolates the
    # two f32 ranks in f64 and rounds to f32, as DataFusion does.
    got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                   f"CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{tetf}' "
                                   "OPTIONS ('tet.dataset' 'temp')",
                                   sql["p90_per_cell"].format(t="t") + " ORDER BY lat, lon"], text=True)
    rows = np.array([[float(x) for x in l.split(",")] for l in got.strip().splitlines()[1:]])
    want = np.quantile(A64, 0.9, axis=0).reshape(-1)
    assert rows.shape[0] == LAT * LON and np.allclose(rows[:, 2], want, rtol=1e-6), "p90_per_cell differs from numpy"
    # The approximate 90th percentile by latitude: within the sketch's bound (2^-12 of the
    # value, and f32 rounding) of numpy's exact linear quantile.
    got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                   f"CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{tetf}' "
                                   "OPTIONS ('tet.dataset' 'temp')",
                                   sql["approx_p90_by_lat"].format(t="t") + " ORDER BY lat"], text=True)
    rows = np.array([[float(x) for x in l.split(",")] for l in got.strip().splitlines()[1:]])
    want = np.quantile(A64, 0.9, axis=(0, 2))
    assert rows.shape[0] == LAT and np.all(np.abs(rows[:, 1] - want) <= np.abs(want) * (2.0 ** -12 + 2.0 ** -23)), \
        "approx_p90_by_lat is not within its bound of numpy's quantile"
    # The histogram by latitude band: every (band, bin) count equals numpy's.
    got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                   f"CREATE EXTERNAL TABLE t STORED AS TET LOCATION '{tetf}' "
                                   "OPTIONS ('tet.dataset' 'temp')",
                                   sql["hist_by_band"].format(t="t")], text=True)
    ours = {(float(b), float(k)): int(n) for b, k, n in (l.split(",") for l in got.strip().splitlines()[1:])}
    assert ours == histogram_by_band(A, coords["lat"]), "hist_by_band differs from numpy"

    engines = ["ours_rust_api", "datafusion_over_our_scan", "datafusion_parquet", "duckdb_parquet",
               "xarray_in_memory", "numpy_in_memory"]
    cell = lambda e, q, f: f(res[(e, q)]) if (e, q) in res else "n/a"
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [MAPS_HEADING, "",
             f"`python3 benches/run.py {invocation()}` at {rev or '?'}, {time.strftime('%Y-%m-%d')}: the benchmark "
             f"cube f32 [{T}, {LAT}, {LON}] (one raw chunk per time step), {LAT * LON} groups of {T} values. Native "
             f"floor (benches/floor.c), same run: **{floor:.4f} s**. Median of {a.reps} runs; ours paired with a "
             "floor pass before each run (the median of the per-run ratios). Ours agree with numpy in f64 "
             "(mean, sample standard deviation, max per cell; relative 1e-9; the 90th percentile per cell, relative 1e-6: "
             "ours rounds it to f32 as DataFusion does).", "", "Queries:", ""]
    lines += [f"- `{q}`: `{sql[q].format(t='t')}`" for q in MAPS_QUERIES]
    lines += ["", "| engine | " + " | ".join(MAPS_QUERIES) + " |", "| --- | " + " | ".join("---" for _ in MAPS_QUERIES) + " |"]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda v: f"{v:.4f}") for q in MAPS_QUERIES) + " |")
    lines += ["", "Time / native floor:", "", "| engine | " + " | ".join(MAPS_QUERIES) + " |",
              "| --- | " + " | ".join("---" for _ in MAPS_QUERIES) + " |",
              "| target | " + " | ".join(f"<= {MAPS_TARGET[q]}" for q in MAPS_QUERIES) + " |",
              "| ours_rust_api, paired | " + " | ".join(
                  cell("ours_rust_api_per_paired_floor", q, lambda v: f"**{v:.2f}**") for q in MAPS_QUERIES) + " |"]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda v: f"{v / floor:.2f}") for q in MAPS_QUERIES) + " |")
    lines += ["", "datafusion_over_our_scan: `SET tet.aggregate_pushdown = false`. xarray and numpy work on the "
              "array in memory (numpy's means and deviations in f64; `np.median`, `np.quantile` and xarray's "
              "`median`, `quantile` sort copies; the histogram: `np.floor`, then `np.bincount` of band and bin, "
              "not in xarray). DuckDB: `median`, `quantile_cont`.", ""]
    return lines


ARCHIVE_HEADING = "## Archives (issue 57)"
ARCHIVE_QUERIES = ["full_mean", "by_lat", "by_time", "hour_of_day", "time_slice"]
ARCHIVE_FILES = 16
# Issue 57: the archive of 16 files within 1.1x of the one file.
ARCHIVE_TARGET = 1.1


def start_moto(d):
    """moto's S3 server on a free loopback port (as tests/it/servers.rs starts it): (process,
    endpoint), or (None, why) when moto is missing or does not listen."""
    import socket
    try:
        import moto  # noqa: F401
    except ImportError:
        return None, "moto is not installed (pip install 'moto[server]')"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(d / "moto.log", "w")
    p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    stop_process(p)
    return None, f"moto did not listen on port {port} (see {d / 'moto.log'})"


def stop_process(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def build_floor(floor_bin):
    """The native floor (benches/floor.c, `-O3 -march=native`) at `floor_bin`, unless built."""
    if not floor_bin.exists():
        subprocess.check_call(["cc", "-O3", "-march=native", "-fopenmp", str(ROOT / "benches" / "floor.c"), "-o",
                               str(floor_bin)])


def write_archive(a, ad, bench, subcommand):
    """`archive write` or `write-mixed` of the cube (`--raw`, else made by cube() for the call)."""
    raw = Path(a.raw) if a.raw else ad / "cube.f32"
    if not a.raw:
        cube(a.time, a.lat, a.lon).tofile(raw)
    subprocess.check_call(bench + [subcommand, str(raw), str(ad), str(a.time), str(a.lat), str(a.lon),
                                   str(ARCHIVE_FILES)])
    if not a.raw:
        raw.unlink()


def archive(a, d, bench, floor_bin):
    """Issue 57's rows: the cube split into 16 files along time vs the same cube as one file
    (paired with the native floor), opening and planning 1 000 small local files and 200 objects
    on moto's S3, what a one-file time slice of the archive reads, and the archive's full mean
    with its pages dropped against a sequential read of the same bytes."""
    T, LAT, LON, F = a.time, a.lat, a.lon, ARCHIVE_FILES
    ad = d / "archive"
    one, split, small = ad / "one.tet", ad / f"split{F}", ad / "small1000"
    ad.mkdir(parents=True, exist_ok=True)
    if not one.exists() or len(list(split.glob("*.tet"))) != F:
        write_archive(a, ad, bench, "write")
    if len(list(small.glob("*.tet"))) != 1000:
        subprocess.check_call(bench + ["write-small", str(small), "1000"])
    build_floor(floor_bin)
    files = sorted(split.glob("*.tet"))

    def run(args, env=None):
        out = subprocess.check_output(bench + args, text=True, env=os.environ | (env or {}))
        return [json.loads(l) for l in out.splitlines() if l.startswith("{")]

    def load_pages(state):
        """Drop both tables' pages, then bring them back in: by `read` (as a copy or `cat` leaves
        them) or through the engine's maps (as a first query over cold files leaves them). How
        they came in decides how many page faults a fresh map of them takes (the kernel's
        folios), and the archive's times differ with it (see the reading)."""
        for p in [one, *files]:
            fd = os.open(p, os.O_RDONLY)
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        if state == "read":
            for p in [one, *files]:
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass
        else:
            run(["query", str(one)])
            run(["query", f"{split}/*.tet"])

    def timings(lines):
        return {(r["engine"], r["query"]): r for r in lines if "engine" in r}

    t0 = time.time()
    # 1. 16 files vs one file, `--archive-rounds` processes of `--archive-reps` runs each, with
    # the pages of both brought in by `read` and then through the engine's maps.
    states = {"read": "`read`", "mmap": "the engine's maps"}
    rounds = {}
    for state in states:
        load_pages(state)
        rounds[state] = [run(["pair", str(one), f"{split}/*.tet", str(a.archive_reps)],
                             {"TET_FLOOR_BIN": str(floor_bin)}) for _ in range(a.archive_rounds)]
    load_pages("read")
    # 2. Opening and planning 1 000 small local files, then 200 objects on moto.
    opened_lines = run(["open", f"{small}/*.tet", str(small / "f-0000.tet"), str(a.reps)])
    # The same over the 16 large files, against the one large file.
    big_lines = run(["open", f"{split}/*.tet", str(one), str(a.reps)])
    opened, opened_big = timings(opened_lines), timings(big_lines)
    faults = {(tag, r["minor_faults"]): r for tag, ls in (("small", opened_lines), ("big", big_lines))
              for r in ls if "minor_faults" in r}
    moto, endpoint = start_moto(ad)
    s3, s3_note = {}, ""
    if moto is None:
        s3_note = endpoint
    else:
        try:
            s3 = timings(run(["s3", endpoint, str(small), "200", str(a.reps)]))
        finally:
            stop_process(moto)
    # 4. Cold page cache.
    cold_lines = run(["cold", str(one), str(split), str(a.archive_cold_reps)])
    cold = timings(cold_lines)
    elapsed = time.time() - t0

    pooled = lambda st, e, q: [x for rd in rounds[st] for r in rd
                               if r.get("engine") == e and r.get("query") == q for x in r["all"]]
    per_round = lambda st, e, q: [r["median_s"] for rd in rounds[st] for r in rd
                                  if r.get("engine") == e and r.get("query") == q]
    first = rounds["read"][0]
    info = next(r for r in first if "files" in r and "steps" in r)
    sql = dict((q, s) for q, s in [
        ("full_mean", "SELECT avg(v) FROM {t}"),
        ("by_lat", "SELECT lat, avg(v) FROM {t} GROUP BY lat"),
        ("by_time", "SELECT time, avg(v) FROM {t} GROUP BY time"),
        ("hour_of_day", "SELECT date_part('hour', time) AS h, avg(v) FROM {t} GROUP BY date_part('hour', time)"),
        ("time_slice", "SELECT lat, avg(v) FROM {t} WHERE time >= TIMESTAMP '%s' AND time < TIMESTAMP '%s' GROUP BY lat"
         % tuple(info["slice"])),
    ])
    checks = [r for st in rounds.values() for rd in st for r in rd if "check" in r]
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    mem = subprocess.run(["sh", "-c", "free -g | awk '/Mem:/{print $2}'"], capture_output=True, text=True).stdout.strip()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    q = lambda xs, p: sorted(xs)[round((len(xs) - 1) * p)] if xs else float("nan")
    size = lambda ps: sum(p.stat().st_size for p in ps)
    lines = [ARCHIVE_HEADING, "",
             f"`python3 benches/run.py {invocation()}` on {platform.system()} {platform.machine()}, {os.cpu_count()} cores "
             f"({cpu}), {mem} GiB RAM, {time.strftime('%Y-%m-%d')}, at {rev or '?'}"
             f"{' with uncommitted changes in src/' if dirty else ''}; `benches/archive.rs` ({elapsed:.0f} s for "
             "this section).", "",
             f"The benchmark cube f32 [{T}, {LAT}, {LON}] (one raw chunk per time step, hourly from "
             "2024-01-01) written by `archive write` as one file "
             f"({one.stat().st_size / 2**20:.0f} MiB) and split along time into {F} files of {T // F} steps "
             f"({size(files) / 2**20:.0f} MiB in all), each with its own CF `time` variable "
             "(`hours since <its first step>`; the one file's counts from 2024-01-01). Both tables are opened "
             "with `TetTableProvider::open` (the archive as `split16/*.tet`) in one session, page cache warm: "
             "the pages of both dropped and brought back in by `read` (1 MiB reads, as a copy leaves them), "
             "then again through the engine's maps (a full mean over each in a fresh session, as a first "
             f"query over cold files leaves them). In each state {a.archive_rounds} rounds (processes) of "
             f"{a.archive_reps} runs of each query on each table; every run "
             "follows one pass of the native floor (`benches/floor.c` over the one file's payload, the bytes "
             "both tables read) and the two tables alternate which goes first. "
             f"The answers of both tables agree in every query (largest relative difference "
             f"{max(r['max_rel_diff'] for r in checks):.1e}).", "",
             "Queries (`{t}` = the table):", ""]
    lines += [f"- `{qn}`: `{sql[qn]}`" for qn in ARCHIVE_QUERIES]
    lines += ["", "Seconds and ratios to the floor are medians of all runs of all rounds of a state. `16 / 1` is the "
              "median over runs of "
              "(16 files / its floor pass) / (one file / its floor pass), with its quartiles and each "
              "round's median; `16 / 1 raw` is the median of the unnormalized per-run ratios.", "",
              f"| query | pages in by | one file (s) | {F} files (s) | one file / floor | {F} files / floor | "
              f"{F} / 1 | quartiles | per round | {F} / 1 raw | <= {ARCHIVE_TARGET} | planning: one file, {F} files |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = {}
    for qn in ARCHIVE_QUERIES:
        for st, how in states.items():
            t1, t16 = pooled(st, "one_file", qn), pooled(st, "archive", qn)
            ratio = pooled(st, "archive_per_one_file_paired", qn)
            raw = pooled(st, "archive_per_one_file", qn)
            p1 = statistics.median(pooled(st, "one_file_per_paired_floor", qn))
            p16 = statistics.median(pooled(st, "archive_per_paired_floor", qn))
            med, lo, hi = statistics.median(ratio), q(ratio, 0.25), q(ratio, 0.75)
            verdicts[(st, qn)] = ("yes" if med <= ARCHIVE_TARGET else
                                  "within noise" if lo <= ARCHIVE_TARGET else "no")
            rounds_txt = " / ".join(f"{x:.2f}" for x in per_round(st, "archive_per_one_file_paired", qn))
            lines.append(f"| {qn} | {how} | {statistics.median(t1):.4f} | {statistics.median(t16):.4f} | {p1:.2f} | "
                         f"{p16:.2f} | **{med:.2f}** | {lo:.2f}–{hi:.2f} | {rounds_txt} | "
                         f"{statistics.median(raw):.2f} | {verdicts[(st, qn)]} | "
                         f"{statistics.median(pooled(st, 'one_file_plan', qn)) * 1e3:.2f} ms, "
                         f"{statistics.median(pooled(st, 'archive_plan', qn)) * 1e3:.2f} ms |")
    floor_s = statistics.median(pooled("read", "floor_paired_one_file", "full_mean"))
    lines += ["", f"Paired floor pass: {floor_s:.4f} s (median of the full mean's, pages in by `read`). `yes`: the median ratio is within "
              f"{ARCHIVE_TARGET}; `within noise`: above it but the lower quartile is within. Planning: `ctx.sql` + "
              "`create_physical_plan` alone, median of the same number of runs, back to back.", ""]

    # 3. What the time slice reads.
    lines += ["What the one-file time slice reads (`EXPLAIN ANALYZE` of `time_slice`: our operator's line, "
              "and the summed metrics of our operators; the full mean's bytes for scale):", "", "```"]
    for table in ["archive", "one"]:
        for r in first:
            if r.get("explain_analyze") == "time_slice" and r["table"] == table:
                lines.append(f"{'16 files' if table == 'archive' else 'one file'}: {r['line']}")
    lines.append("```")
    lines += ["", "| table | time_slice bytes_read | chunks_read | full_mean bytes_read | chunks_read |",
              "| --- | --- | --- | --- | --- |"]
    for table in ["one", "archive"]:
        m = {r["metrics"]: r for r in first if r.get("table") == table and "metrics" in r}
        lines.append(f"| {'one file' if table == 'one' else f'{F} files'} | {m['time_slice']['bytes_read']} | "
                     f"{m['time_slice']['chunks_read']} | {m['full_mean']['bytes_read']} | "
                     f"{m['full_mean']['chunks_read']} |")

    # 2. Opening and planning.
    lines += ["", "Opening and planning many files: `SELECT avg(v) FROM tet('<pattern>', 'temp')` in a fresh "
              f"session (first query: lists and opens every file), then again in the same session (warm: lists "
              "again, finds every file in the session's cache), each split into planning (`ctx.sql` + "
              "`create_physical_plan`) and execution; and through `TetTableProvider::open` (then the query, "
              "then a second query over the registered table). Small files: `temp` [24, 8, 16] f32, one chunk, "
              f"{small.joinpath('f-0000.tet').stat().st_size} bytes each, a day each. Median of {a.reps} fresh "
              "sessions after one warm-up (local files: page cache warm; the large files' pages in by `read`).", "",
              "| table | tet() first: plan | exec | total | per file | tet() warm: plan | exec | total | "
              "provider open | open + plan + exec | provider warm query |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ms = lambda res, e: f"{res[(e, 'full_mean')]['median_s'] * 1e3:.1f} ms" if (e, "full_mean") in res else "n/a"
    per_file = lambda res, e, n: (f"{res[(e, 'full_mean')]['median_s'] * 1e3 / n:.2f} ms"
                                  if (e, "full_mean") in res else "n/a")
    for label, res, prefix, n in [("1 000 small local files", opened, "local", 1000),
                                  ("1 small local file (baseline)", opened, "local_one_file", 1),
                                  ("200 small objects on moto S3", s3, "s3", 200),
                                  (f"the {F} files above (508 MiB)", opened_big, "local", F),
                                  ("the one file above (508 MiB)", opened_big, "local_one_file", 1)]:
        lines.append(f"| {label} | " + " | ".join([
            ms(res, f"{prefix}_tet_first_plan"), ms(res, f"{prefix}_tet_first_exec"),
            ms(res, f"{prefix}_tet_first_total"), per_file(res, f"{prefix}_tet_first_total", n),
            ms(res, f"{prefix}_tet_warm_plan"), ms(res, f"{prefix}_tet_warm_exec"),
            ms(res, f"{prefix}_tet_warm_total"), ms(res, f"{prefix}_provider_open"),
            ms(res, f"{prefix}_provider_first_total"), ms(res, f"{prefix}_provider_warm_total")]) + " |")
    if s3_note:
        lines += ["", f"S3: n/a: {s3_note}."]
    fb, fo = faults.get(("big", "local")), faults.get(("big", "local_one_file"))
    if fb and fo:
        lines += ["", f"Minor page faults of this process during execution (medians): the {F} files' first query "
                  f"{fb['first_exec']:.0f}, their warm query {fb['warm_exec']:.0f}; the one file's first "
                  f"{fo['first_exec']:.0f}, warm {fo['warm_exec']:.0f}."]

    # 4. Cold page cache.
    c = lambda e: cold[(e, "full_mean")]
    info_cold = next(r for r in cold_lines if "cold_answers" in r)
    gbs = lambda e: info_cold["archive_bytes"] / c(e)["median_s"] / 1e9
    ratio = c("archive_cold_per_sequential_read_cold")
    left = max(x for e in ("sequential_read_cold", "archive_cold", "archive_open_cold", "one_file_cold")
               for x in c(e)["resident_after_drop"])
    lines += ["", f"Cold page cache: each repetition drops the pages of the files about to be read "
              "(`fdatasync`, then `posix_fadvise(POSIX_FADV_DONTNEED)` on each; at most "
              f"{left:.1%} of their pages were still resident, by `mincore`), then times one of: a sequential "
              f"`read` of the {F} files one after another (1 MiB reads, one thread), the full mean over the "
              f"{F}-file archive in a fresh session (`tet('split16/*.tet', 'temp')`: listing and opening the "
              "files included; its planning part, which opens them, in its own column), the same through "
              "`TetTableProvider::open` (open + plan in that column), and the same over the one file; the four "
              "alternate their order. Right after each, the same again with the pages it "
              "brought in now cached (warm; the queries in a fresh session again). "
              f"{info_cold['archive_bytes'] / 2**20:.0f} MiB; median of {c('archive_cold')['runs']} repetitions.", "",
              "| measurement | cold (s) | cold GB/s | of which planning (s) | warm (s) |",
              "| --- | --- | --- | --- | --- |"]
    for e, label in [("sequential_read", f"sequential read of the {F} files"),
                     ("archive", f"full mean, {F} files, `tet(...)`"),
                     ("archive_open", f"full mean, {F} files, `TetTableProvider::open`"),
                     ("one_file", "full mean, one file, `tet(...)`")]:
        plan = f"{c(e + '_cold_plan')['median_s']:.3f}" if (e + "_cold_plan", "full_mean") in cold else "-"
        lines.append(f"| {label} | {c(e + '_cold')['median_s']:.3f} | {gbs(e + '_cold'):.2f} | {plan} | "
                     f"{c(e + '_warm')['median_s']:.4f} |")
    lines += ["", f"{F} files cold / sequential read cold: **{ratio['median_s']:.2f}** (per-repetition ratios "
              f"{ratio['spread'][0]:.2f}–{ratio['spread'][1]:.2f}); {F} files cold / one file cold (medians): "
              f"{c('archive_cold')['median_s'] / c('one_file_cold')['median_s']:.2f}.", ""]
    lines += [f"Target ({F} files within {ARCHIVE_TARGET}x of one file, paired), pages in by {how}: " +
              ", ".join(f"{qn} {verdicts[(st, qn)]}" for qn in ARCHIVE_QUERIES) + "." for st, how in states.items()]
    lines.append("")
    return lines


MIXED_HEADING = "## Archives stored two ways (issue 57)"


def archive_mixed(a, d, bench, floor_bin):
    """The 16 files of the archive section with every other one declaring a fill value no
    value takes (`archive write-mixed`): the same values in two storage classes, which the
    fold folds one class at a time, against the one file, paired with the native floor."""
    F = ARCHIVE_FILES
    ad = d / "archive"
    one, mixed = ad / "one.tet", ad / f"mixed{F}"
    if not one.exists():
        sys.exit(f"{one} is missing: run --archive first (it writes the one file)")
    ad.mkdir(parents=True, exist_ok=True)
    if len(list(mixed.glob("*.tet"))) != F:
        write_archive(a, ad, bench, "write-mixed")
    build_floor(floor_bin)
    env = os.environ | {"TET_FLOOR_BIN": str(floor_bin)}
    rounds = []
    for _ in range(a.archive_rounds):
        out = subprocess.check_output(bench + ["pair", str(one), f"{mixed}/*.tet", str(a.archive_reps)], text=True,
                                      env=env)
        rounds.append([json.loads(l) for l in out.splitlines() if l.startswith("{")])
    pooled = lambda e, qn: [x for rd in rounds for r in rd if r.get("engine") == e and r.get("query") == qn
                            for x in r["all"]]
    checks = [r for rd in rounds for r in rd if "check" in r]
    q = lambda xs, p: sorted(xs)[round((len(xs) - 1) * p)] if xs else float("nan")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [MIXED_HEADING, "",
             f"`python3 benches/run.py {invocation()}` at {rev or '?'}, {time.strftime('%Y-%m-%d')}: the {F} files of "
             f"the archive section written again by `archive write-mixed`, every other one declaring "
             "`_FillValue = -1e30`, which no value is: the same values stored by two rules, so the fold runs once "
             "per storage class (two `TetAggregateExec`s under one merge). "
             f"{a.archive_rounds} rounds of {a.archive_reps} runs of each query on each table, paired with the "
             "native floor and alternating as in the archive section; pages warm. Answers agree (largest relative "
             f"difference {max(r['max_rel_diff'] for r in checks):.1e}).", "",
             f"| query | one file (s) | {F} files, two classes (s) | {F} files / floor | {F} / 1 | quartiles |",
             "| --- | --- | --- | --- | --- | --- |"]
    for qn in ARCHIVE_QUERIES:
        ratio = pooled("archive_per_one_file_paired", qn)
        lines.append(f"| {qn} | {statistics.median(pooled('one_file', qn)):.4f} | "
                     f"{statistics.median(pooled('archive', qn)):.4f} | "
                     f"{statistics.median(pooled('archive_per_paired_floor', qn)):.2f} | "
                     f"**{statistics.median(ratio):.2f}** | {q(ratio, 0.25):.2f}–{q(ratio, 0.75):.2f} |")
    lines.append("")
    return lines


def archive_bench(a):
    """The command of benches/archive.rs: `--archive-bin`, else built and run by cargo."""
    if a.archive_bin:
        return [a.archive_bin]
    subprocess.check_call(["cargo", "bench", "--no-run", "--all-features", "--bench", "archive"], cwd=ROOT)
    return ["cargo", "bench", "-q", "--all-features", "--bench", "archive", "--"]


def invocation():
    """This script's arguments, without those naming local paths (--out, --archive-bin, --raw)."""
    args, skip = [], False
    for x in sys.argv[1:]:
        if skip:
            skip = False
        elif x in ("--out", "--archive-bin", "--raw"):
            skip = True
        elif not x.startswith(("--out=", "--archive-bin=", "--raw=")):
            args.append(x)
    return " ".join(args)


def replace_section(out, heading, section):
    """Write `section` (lines) into `out` in place of its section `heading` (up to the next
    `## ` heading), or at its end."""
    text = Path(out).read_text() if Path(out).exists() else ""
    body = "\n".join(section).rstrip("\n") + "\n"
    if heading in text:
        before, rest = text.split(heading, 1)
        nxt = re.search(r"^## ", rest, re.M)
        text = before + body + ("\n" + rest[nxt.start():] if nxt else "")
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + body
    Path(out).write_text(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=512)
    ap.add_argument("--lat", type=int, default=361)
    ap.add_argument("--lon", type=int, default=720)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=str(ROOT / "target" / "bench"))
    ap.add_argument("--out", default=str(ROOT / "benches" / "RESULTS.md"))
    ap.add_argument("--only", choices=["multi", "maps"],
                    help="run only the section of two variables, or of maps per cell, and replace it in --out")
    ap.add_argument("--archive", action="store_true",
                    help="run only the section of archives (issue 57) and replace it in --out")
    ap.add_argument("--archive-mixed", action="store_true",
                    help="run only the section of an archive stored two ways (after --archive) and replace it in --out")
    ap.add_argument("--archive-bin", help="a built benches/archive.rs binary to use instead of `cargo bench`")
    ap.add_argument("--archive-reps", type=int, default=15, help="runs of each query per round, archive section")
    ap.add_argument("--archive-rounds", type=int, default=3, help="rounds (processes) of the archive pairs")
    ap.add_argument("--archive-cold-reps", type=int, default=7, help="repetitions of the cold page cache rows")
    ap.add_argument("--raw", help="the cube as raw f32 (as cube() makes it), instead of generating it")
    a = ap.parse_args()
    if a.archive_mixed:
        ensure([("numpy", "numpy")])
        d = Path(a.dir)
        section = archive_mixed(a, d, archive_bench(a), d / "floor")
        replace_section(a.out, MIXED_HEADING, section)
        print("\n".join(section))
        return
    if a.archive:
        ensure([("numpy", "numpy"), ("moto", "moto[server]")])
        d = Path(a.dir)
        d.mkdir(parents=True, exist_ok=True)
        section = archive(a, d, archive_bench(a), d / "floor")
        replace_section(a.out, ARCHIVE_HEADING, section)
        print("\n".join(section))
        return
    ensure([("numpy", "numpy"), ("pyarrow", "pyarrow"), ("duckdb", "duckdb"), ("xarray", "xarray"),
            ("tet", "tet-py==0.8.3")])
    import duckdb
    import xarray as xr
    import numpy as np
    import tet

    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    T, LAT, LON = a.time, a.lat, a.lon
    raw, tetf, parq = d / f"cube_{T}.f32", d / f"cube_{T}.tet", d / f"cube_{T}.parquet"
    tetz = d / f"cube_{T}_zstd.tet"
    # `cargo bench` builds with the dev-dependencies' features, like `cargo test`, so it
    # reuses the test build; it also builds target/release/tet-sql.
    subprocess.check_call(["cargo", "bench", "--no-run", "--all-features", "--bench", "driver"], cwd=ROOT)
    driver = ["cargo", "bench", "-q", "--all-features", "--bench", "driver", "--"]
    tet_sql = ROOT / "target" / "release" / "tet-sql"
    floor_bin = d / "floor"
    subprocess.check_call(["cc", "-O3", "-march=native", "-fopenmp", str(ROOT / "benches" / "floor.c"), "-o",
                           str(floor_bin)])
    if a.only == "multi":
        section = multi(a, d, driver, tet_sql, floor_bin)
        out = Path(a.out).read_text() if Path(a.out).exists() else ""
        keep = out.split(MULTI_HEADING)[0].rstrip("\n")
        Path(a.out).write_text((keep + "\n\n" if keep else "") + "\n".join(section))
        print("\n".join(section))
        return
    if a.only == "maps":
        if not tetf.exists() or not parq.exists():
            arr = cube(T, LAT, LON)
            arr.tofile(raw)
            subprocess.check_call(driver + ["write-tet", str(raw), str(tetf), str(T), str(LAT), str(LON)])
            raw.unlink()
            write_parquet(parq, {"v": arr})
        for p in (tetf, parq):
            with open(p, "rb") as f:
                while f.read(64 << 20):
                    pass
        section = maps(a, d, driver, tet_sql, floor_bin, tetf, parq)
        replace_section(a.out, MAPS_HEADING, section)
        print("\n".join(section))
        return
    arr = cube(T, LAT, LON)
    for path, codec in ((tetf, "raw"), (tetz, "zstd")):
        if not path.exists():
            arr.tofile(raw)
            subprocess.check_call(driver + ["write-tet", str(raw), str(path), str(T), str(LAT), str(LON), codec])
            raw.unlink()
    if not parq.exists():
        write_parquet(parq, {"v": arr})
    # Warm the page cache.
    for p in (tetf, tetz, parq):
        with open(p, "rb") as f:
            while f.read(64 << 20):
                pass
    sl = max(1, T // 10)
    # The same SQL as benches/driver.rs (time is hourly positions here).
    sql = {
        "full_mean": "SELECT avg(v) FROM {t}",
        "by_lat": "SELECT lat, avg(v) FROM {t} GROUP BY lat",
        "by_time": "SELECT time, avg(v) FROM {t} GROUP BY time",
        "by_lon": "SELECT lon, avg(v) FROM {t} GROUP BY lon",
        "by_lat_sliced": "SELECT lat, avg(v) FROM {t} WHERE time < %d GROUP BY lat" % sl,
        "hour_of_day": "SELECT time % 24 AS h, avg(v) FROM {t} GROUP BY time % 24",
        "lat_bands": "SELECT floor(lat / 10) AS band, avg(v), min(v), max(v) FROM {t} GROUP BY 1",
        "area_weighted": "SELECT sum(v * cos(radians(lat))) / sum(cos(radians(lat))) FROM {t}",
        "value_filter": "SELECT lat, count(*) FROM {t} WHERE v > 290 GROUP BY lat",
        "filter_clause": "SELECT count(*) FILTER (WHERE v > 290), avg(v) FROM {t}",
        "affine": "SELECT avg(v - 273.15), max(v * 1.8 - 459.67) FROM {t}",
        "non_affine": "SELECT avg(sqrt(abs(v))) FROM {t}",
    }
    results = {}  # (engine, query) -> seconds

    out = subprocess.check_output(driver + ["run", str(tetf), str(parq), str(a.reps)], text=True,
                                  env=os.environ | {"TET_FLOOR_BIN": str(floor_bin), "TET_SQL_BIN": str(tet_sql),
                                                    "TET_BENCH_QUERIES": ",".join(QUERIES)})
    simd = "?"
    for line in out.splitlines():
        r = json.loads(line)
        if "kernels" in r:
            simd = f"the {r['kernels']} copy"
            continue
        results[(r["engine"], r["query"])] = r["median_s"]

    # The same kernels with another copy forced: the baseline x86-64 one (what run-time
    # dispatch buys) and the AVX-512 one (on CPUs that have it; the default is AVX2).
    for isa in ["portable", "avx512"]:
        out = subprocess.check_output(driver + ["run", str(tetf), str(parq), str(a.reps)], text=True,
                                      env=os.environ | {"TET_FLOOR_BIN": str(floor_bin), "TET_SIMD": isa,
                                                        "TET_BENCH_ENGINES": "ours_rust_api",
                                                        "TET_BENCH_QUERIES": ",".join(QUERIES)})
        for line in out.splitlines():
            r = json.loads(line)
            if r.get("engine") in ("ours_rust_api", "ours_rust_api_per_paired_floor"):
                results[(r["engine"].replace("ours_rust_api", f"ours_rust_api_{isa}"), r["query"])] = r["median_s"]

    def tet_sql_elapsed(s):
        # One session runs the query reps + 1 times; tet-sql's own "Elapsed" per query.
        # The first pays opening and mapping the file; the median of the others is the
        # warm figure.
        out = subprocess.run([str(tet_sql), "--format", "csv", "-c"] + [s] * (a.reps + 1), check=True,
                             capture_output=True, text=True).stdout
        elapsed = [float(x) for x in re.findall(r"Elapsed ([0-9.]+) seconds", out)]
        assert len(elapsed) == a.reps + 1, out
        return statistics.median(elapsed[1:]), elapsed[0]

    for q in QUERIES:
        s = sql[q].format(t=f"tet('{tetf}', 'temp')")
        # The process wall time (with start-up) is kept beside tet-sql's own Elapsed.
        results[("ours_tet_sql", q)], results[("ours_tet_sql_first", q)] = tet_sql_elapsed(s)
        results[("ours_tet_sql_process", q)] = median_time(
            lambda: subprocess.run([str(tet_sql), "-q", "--format", "csv", "-c", s], check=True, capture_output=True), a.reps)

    # zstd chunks: ours (Rust API and tet-sql) and the upstream engine against libzstd
    # decompressing and summing every chunk (benches/floor_zstd.c).
    # libzstd from the sources our build uses (the zstd-sys crate's copy), compiled for this
    # machine, so both sides run the same zstd version; else the system's (libzstd-dev).
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    zlib = sorted(cargo_home.glob("registry/src/*/zstd-sys-*/zstd/lib"))
    floor_zstd_bin = d / "floor_zstd"
    if zlib:
        z = zlib[-1]
        zsrc = [str(p) for p in sorted((z / "common").glob("*.c")) + sorted((z / "decompress").glob("*.[cS]"))]
        zflags, zdesc = [f"-I{z}"] + zsrc, f"libzstd {z.parent.parent.name.split('+')[-1]} from source"
    else:
        if not Path("/usr/include/zstd.h").exists():
            subprocess.check_call(["sh", "-c", "apt-get install -y -q libzstd-dev || "
                                   "(apt-get update -q && apt-get install -y -q libzstd-dev)"])
        zflags, zdesc = ["-lzstd"], "the system's libzstd"
    subprocess.check_call(["cc", "-O3", "-march=native", "-fopenmp", str(ROOT / "benches" / "floor_zstd.c")] + zflags +
                          ["-o", str(floor_zstd_bin)])
    ZQ = ["full_mean", "by_lat", "by_time"]
    zres, zbytes = {}, {}
    out = subprocess.check_output(driver + ["run", str(tetz), str(parq), str(a.reps)], text=True,
                                  env=os.environ | {"TET_FLOOR_ZSTD_BIN": str(floor_zstd_bin),
                                                    "TET_BENCH_ENGINES": "ours_rust_api",
                                                    "TET_BENCH_QUERIES": ",".join(ZQ)})
    for line in out.splitlines():
        r = json.loads(line)
        if "raw_bytes" in r:
            zbytes = r
        elif "engine" in r:
            zres[(r["engine"], r["query"])] = r["median_s"]
    for q in ZQ:
        zres[("ours_tet_sql", q)], _ = tet_sql_elapsed(sql[q].format(t=f"tet('{tetz}', 'temp')"))
    fz = tet.open(str(tetz))
    zres[("upstream_tet_py", "full_mean")] = median_time(lambda: fz.mean("temp"), a.reps)
    zres[("upstream_tet_py", "by_lat")] = median_time(lambda: fz.mean("temp", axes=[0, 2]), a.reps)
    zres[("upstream_tet_py", "by_time")] = median_time(lambda: fz.mean("temp", axes=[1, 2]), a.reps)

    con = duckdb.connect()
    con.execute("SET threads = %d" % os.cpu_count())
    for q in QUERIES:
        s = sql[q].format(t=f"read_parquet('{parq}')")
        results[("duckdb_parquet", q)] = median_time(lambda: con.execute(s).fetchall(), a.reps)

    f = tet.open(str(tetf))
    results[("upstream_tet_py", "full_mean")] = median_time(lambda: f.mean("temp"), a.reps)
    results[("upstream_tet_py", "by_lat")] = median_time(lambda: f.mean("temp", axes=[0, 2]), a.reps)
    results[("upstream_tet_py", "by_time")] = median_time(lambda: f.mean("temp", axes=[1, 2]), a.reps)
    results[("upstream_tet_py", "by_lon")] = median_time(lambda: f.mean("temp", axes=[0, 1]), a.reps)

    results[("numpy_in_memory", "full_mean")] = median_time(lambda: arr.mean(dtype=np.float64), a.reps)
    results[("numpy_in_memory", "by_lat")] = median_time(lambda: arr.mean(axis=(0, 2), dtype=np.float64), a.reps)
    results[("numpy_in_memory", "by_time")] = median_time(lambda: arr.mean(axis=(1, 2), dtype=np.float64), a.reps)
    results[("numpy_in_memory", "by_lon")] = median_time(lambda: arr.mean(axis=(0, 1), dtype=np.float64), a.reps)
    results[("numpy_in_memory", "by_lat_sliced")] = median_time(lambda: arr[:sl].mean(axis=(0, 2), dtype=np.float64), a.reps)

    # xarray as its users write these analyses, on the array in memory.
    lat_vals = np.linspace(-90.0, 90.0, LAT).astype("f4").astype("f8")
    da = xr.DataArray(arr, dims=("time", "lat", "lon"),
                      coords={"time": np.arange(T), "lat": lat_vals, "lon": (np.arange(LON) * 360.0 / LON)})
    xarray_shapes = {
        "full_mean": lambda: float(da.mean()),
        "by_lat": lambda: da.mean(("time", "lon")).values,
        "by_time": lambda: da.mean(("lat", "lon")).values,
        "by_lon": lambda: da.mean(("time", "lat")).values,
        "by_lat_sliced": lambda: da.isel(time=slice(0, sl)).mean(("time", "lon")).values,
        "hour_of_day": lambda: da.groupby((da.time % 24).rename("h")).mean().values,
        "lat_bands": lambda: [g.values for g in (lambda b: (b.mean(), b.min(), b.max()))(
            da.groupby(np.floor(da.lat / 10).rename("band")))],
        "area_weighted": lambda: float(da.weighted(np.cos(np.radians(da.lat))).mean()),
        "value_filter": lambda: (da > 290).sum(("time", "lon")).values,
        "filter_clause": lambda: (int((da > 290).sum()), float(da.mean())),
        "affine": lambda: (float((da - 273.15).mean()), float((da * 1.8 - 459.67).max())),
        "non_affine": lambda: float(np.sqrt(np.abs(da)).mean()),
    }
    for q, fn in xarray_shapes.items():
        results[("xarray_in_memory", q)] = median_time(fn, a.reps)

    # Correctness spot checks: by_lat against numpy, the area-weighted mean against xarray.
    def ours(q, order=""):
        got = subprocess.check_output([str(tet_sql), "-q", "--maxrows", "inf", "--format", "csv", "-c",
                                       sql[q].format(t=f"tet('{tetf}', 'temp')") + order], text=True)
        return np.array([[float(x) for x in l.split(",")] for l in got.strip().splitlines()[1:]])
    assert np.allclose(ours("by_lat", " ORDER BY lat")[:, 1], arr.mean(axis=(0, 2), dtype=np.float64), rtol=1e-9), \
        "by_lat differs from numpy"
    w = np.cos(np.radians(lat_vals))[None, :, None]
    ref = float((arr.astype(np.float64) * w).sum() / (w.sum() * T * LON))
    assert np.isclose(ours("area_weighted")[0, 0], ref, rtol=1e-9), "area_weighted differs from numpy"

    floor = results[("floor_native_c", "full_mean")]
    engines = ["ours_rust_api", "ours_rust_api_avx512", "ours_rust_api_portable", "ours_tet_sql", "ours_tet_sql_first",
               "ours_tet_sql_process", "datafusion_over_our_scan", "datafusion_parquet",
               "duckdb_parquet", "xarray_in_memory", "numpy_in_memory", "upstream_tet_py"]
    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[-1].split("\n", 1)[0].split() \
        if Path("/proc/cpuinfo").exists() else []
    isa_flags = ", ".join(f for f in flags if f.startswith(("avx", "fma", "sse4"))) or "no x86 vector flags listed"
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    mem = subprocess.run(["sh", "-c", "free -g | awk '/Mem:/{print $2}'"], capture_output=True, text=True).stdout.strip()
    cell = lambda e, q, fmt: fmt(results[(e, q)]) if (e, q) in results else "n/a"
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `python3 benches/run.py --time {T} --reps {a.reps}` on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} cores ({cpu}), {mem} GiB RAM. Cube f32 [{T}, {LAT}, {LON}] "
        f"({tetf.stat().st_size / 2**20:.0f} MiB .tet, {parq.stat().st_size / 2**20:.0f} MiB Parquet, long format), "
        f"page cache warm, median of {a.reps} runs (seconds). `by_lat_sliced` = first {sl} time steps.",
        f"Native floor (`benches/floor.c`, `cc -O3 -march=native -fopenmp`, two threads summing every f32 of the "
        f"payload through a pre-faulted mmap, in four 256-bit f64 accumulators with AVX, prefetching 8 KiB ahead), measured in the same run: **{floor:.4f} s**.",
        "",
        "Queries:",
        "",
    ] + [f"- `{q}`: `{sql[q].format(t='t')}`" for q in QUERIES] + [
        "",
        "| engine | " + " | ".join(QUERIES) + " |",
        "| --- | " + " | ".join("---" for _ in QUERIES) + " |",
    ]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda x: f"{x:.4f}") for q in QUERIES) + " |")
    lines += ["", "Time / native floor (1.0 = one pass over the payload; the target is the issue's):", "",
              "| engine | " + " | ".join(QUERIES) + " |", "| --- | " + " | ".join("---" for _ in QUERIES) + " |",
              "| target | " + " | ".join(f"<= {TARGET[q]:.0f}" for q in QUERIES) + " |"]
    for e in engines:
        lines.append(f"| {e} | " + " | ".join(cell(e, q, lambda x: f"{x / floor:.2f}") for q in QUERIES) + " |")
    lines += ["", "Ours / the floor paired with each run: the driver runs one pass of the floor just before each "
              "timed query and reports the median of the per-run ratios, so that a slow or fast spell of the machine "
              "moves both (median seconds of the paired floor passes in the rows `floor_native_c_paired…`). "
              "`ours_tet_sql`: the queries typed into one `tet-sql` session over the file as table `t`, timed by "
              "the shell's own `Elapsed` (millisecond steps), each after a floor pass of its own. "
              "`floor_plus_planning`: after each run of ours another floor pass, then DataFusion's planning "
              "(`ctx.sql` and `create_physical_plan`) of the same query over an empty table of the same schema; "
              "(floor + planning) / floor is what a table provider queried through DataFusion would take if its "
              "planning cost no more than DataFusion's over an empty table and its execution were the floor's "
              "pass (DataFusion plans before it executes, with caches cold after a pass):", "",
              "| engine | " + " | ".join(QUERIES) + " |", "| --- | " + " | ".join("---" for _ in QUERIES) + " |"]
    for floor_row, paired in (("floor_native_c_paired", ["ours_rust_api", "ours_rust_api_avx512",
                                                          "ours_rust_api_portable"]),
                              ("floor_native_c_paired_tet_sql", ["ours_tet_sql"]),
                              ("floor_native_c_paired_bound", ["floor_plus_planning"])):
        lines.append(f"| {floor_row} | " + " | ".join(cell(floor_row, q, lambda x: f"{x:.4f} s")
                                                      for q in QUERIES) + " |")
        for e in paired:
            lines.append(f"| {e} | " + " | ".join(cell(f"{e}_per_paired_floor", q, lambda x: f"{x:.2f}")
                                                 for q in QUERIES) + " |")
    lines += ["", "Speed-up of ours (Rust API) over each peer (peer time / ours; > 1 means ours is faster):", "",
              "| engine | " + " | ".join(QUERIES) + " |", "| --- | " + " | ".join("---" for _ in QUERIES) + " |"]
    for e in engines[1:]:
        lines.append(f"| {e} | " + " | ".join(
            cell(e, q, lambda x, q=q: f"{x / results[('ours_rust_api', q)]:.1f}x") for q in QUERIES) + " |")
    lines += ["", "n/a: the engine has no such shape in this script (numpy: the plain means; the upstream engine: "
              "means over axes). ours_rust_api_avx512, ours_rust_api_portable: the same driver with `TET_SIMD=avx512` "
              "(the kernels' AVX-512 copy, where the CPU has it) and `TET_SIMD=portable` (their "
              f"baseline copy); the default run uses {simd}; the CPU's vector flags: {isa_flags}. ours_tet_sql: tet-sql's own `Elapsed` for a query "
              "repeated in one session (median of all but the first); ours_tet_sql_first: the first, which opens "
              "and maps the file; ours_tet_sql_process: the process wall time of `tet-sql -c` (start-up included). "
              "xarray and numpy work on the "
              "array already in memory; xarray's float32 means accumulate in float32 (numpy's pairwise sum).", ""]
    zfloor = zres[("floor_native_zstd", "full_mean")]
    gbs = lambda x: zbytes["raw_bytes"] / x / 1e9
    zcell = lambda e, q: (f"{zres[(e, q)]:.4f} s, {zres[(e, q)] / zfloor:.2f}x, {gbs(zres[(e, q)]):.1f} GB/s"
                          if (e, q) in zres else "n/a")
    lines += ["## zstd chunks", "",
              f"The same cube with zstd chunks (level 3): {tetz.stat().st_size / 2**20:.0f} MiB, "
              f"{zbytes['stored_bytes'] / 2**20:.0f} MiB of frames decoding to {zbytes['raw_bytes'] / 2**20:.0f} MiB. "
              f"Native floor (`benches/floor_zstd.c` with {zdesc}, `cc -O3 -march=native -fopenmp`: libzstd "
              f"decompresses every chunk into a per-thread buffer and its f32 are summed, two threads), same run: "
              f"**{zfloor:.4f} s** ({gbs(zfloor):.1f} GB/s decoded). Each cell: median seconds, time / zstd floor, "
              "decoded bytes per second.", "",
              "| engine | " + " | ".join(ZQ) + " |", "| --- | " + " | ".join("---" for _ in ZQ) + " |"]
    for e in ["ours_rust_api", "ours_tet_sql", "upstream_tet_py"]:
        lines.append(f"| {e} | " + " | ".join(zcell(e, q) for q in ZQ) + " |")
    lines.append("| ours_rust_api, raw chunks (above) | " + " | ".join(
        f"{results[('ours_rust_api', q)]:.4f} s" for q in ZQ) + " |")
    lines.append("")
    del arr, da
    lines += multi(a, d, driver, tet_sql, floor_bin)
    lines += [""] + archive(a, d, archive_bench(a), floor_bin)
    Path(a.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

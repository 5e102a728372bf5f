#!/usr/bin/env python3
"""Benchmark of the Python package (issue 58): the benchmark cube from a datafusion-python
session, paired with tet-sql in the same run.

Rows, for the same SQL over the same cube (`benches/run.py` writes it: DIR/cube.tet, one
dataset `temp`, and the raw DIR/cube.f32):

  fold path     `datafusion_tet.sql(ctx, q).collect()`: planned by our own session (the
                fold), run inside the host's plan;
  host row path `ctx.sql(q).collect()` over `TetTable`: DataFusion's row aggregate over
                our scan (datafusion-python takes no foreign logical rule);
  tet-sql       its own `Elapsed` of the query repeated in one session;
  xarray-sql    0.6 (its own venv, --xsql-python: it pins DataFusion 54), `from_dataset`
                of the cube in memory, chunked 24 time steps;
  xarray        the DataArray in memory, as its users write each shape.

The fold path and tet-sql are paired: each round times one then the other (the mean of the
middle half of --reps runs each, see `middle_mean`), the ratio per round, and the median of
the rounds' ratios is reported.
Run it with the interpreter of a venv where the package is installed:

  /work/pyenv/bin/python benches/python.py --dir target/bench --tet-sql target/release/tet-sql \
      [--xsql-python /work/pyenv-xsql/bin/python] [--out benches/RESULTS.md]
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))
from run import median_time, run_times  # noqa: E402  (one timing rule for every bench driver)

HEADING = "## Python (issue 58)"
SHAPES = {
    "full_mean": "SELECT avg(v) FROM {t}",
    "by_lat": "SELECT lat, avg(v) FROM {t} GROUP BY lat",
    "by_time": "SELECT time, avg(v) FROM {t} GROUP BY time",
    "hour_of_day": "SELECT time % 24 AS h, avg(v) FROM {t} GROUP BY time % 24",
    "lat_bands": "SELECT floor(lat / 10) AS band, avg(v), min(v), max(v) FROM {t} GROUP BY 1",
    "area_weighted": "SELECT sum(v * cos(radians(lat))) / sum(cos(radians(lat))) FROM {t}",
    "value_filter": "SELECT lat, count(*) FROM {t} WHERE v > 290 GROUP BY lat",
}

# xarray-sql's side, run in its own interpreter: prints one JSON line per shape.
XSQL = r"""
import json, statistics, sys, time
import numpy as np, xarray as xr, xarray_sql
raw, T, LAT, LON, reps = sys.argv[1], *map(int, sys.argv[2:6])
shapes = json.loads(sys.argv[6])
a = np.fromfile(raw, dtype="<f4").reshape(T, LAT, LON)
ds = xr.Dataset({"v": (("time", "lat", "lon"), a)},
                coords={"time": np.arange(T), "lat": np.linspace(-90.0, 90.0, LAT),
                        "lon": np.arange(LON) * 360.0 / LON})
ctx = xarray_sql.XarrayContext()
ctx.from_dataset("t", ds, chunks={"time": 24})
for name, q in shapes.items():
    q = q.format(t="t")
    ctx.sql(q).collect()
    times = []
    for _ in range(reps):
        s = time.perf_counter(); ctx.sql(q).collect(); times.append(time.perf_counter() - s)
    print(json.dumps({"query": name, "median_s": statistics.median(times)}), flush=True)
"""


def middle_mean(times):
    """The mean of the middle half: tet-sql prints its `Elapsed` in whole milliseconds (5-10%
    of these queries), whose median keeps the step; the runs' noise averages it out."""
    times = sorted(times)
    k = len(times) // 4
    return statistics.fmean(times[k:len(times) - k])


def tet_sql_elapsed(tet_sql, q, reps):
    out = subprocess.run([str(tet_sql), "--format", "csv", "-c"] + [q] * (reps + 1), check=True,
                         capture_output=True, text=True).stdout
    return middle_mean([float(v) for v in re.findall(r"Elapsed ([0-9.]+) seconds", out)][1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(ROOT / "target" / "bench"))
    ap.add_argument("--tet-sql", default=str(ROOT / "target" / "release" / "tet-sql"))
    ap.add_argument("--xsql-python", help="an interpreter with xarray-sql 0.6 installed")
    ap.add_argument("--reps", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time", type=int, default=512)
    ap.add_argument("--lat", type=int, default=361)
    ap.add_argument("--lon", type=int, default=720)
    ap.add_argument("--out", help="replace the section of this file (benches/RESULTS.md)")
    a = ap.parse_args()

    import datafusion
    import datafusion_tet
    import numpy as np
    import xarray as xr

    d = Path(a.dir)
    cube, raw = d / "cube.tet", d / "cube.f32"
    T, LAT, LON = a.time, a.lat, a.lon
    tet = f"tet('{cube}', 'temp')"
    ctx = datafusion.SessionContext()
    datafusion_tet.register(ctx)
    ctx.register_table("t", datafusion_tet.TetTable(str(cube), "temp"))

    rows = {}
    for name, q in SHAPES.items():
        fold_q, host_q = q.format(t=tet), q.format(t="t")
        plan = datafusion_tet.explain(fold_q)
        assert "TetAggregateExec" in plan, f"{name}: no fold in\n{plan}"
        ratios, folds, tsqls = [], [], []
        for _ in range(a.rounds):
            f = middle_mean(run_times(lambda: datafusion_tet.sql(ctx, fold_q).collect(), a.reps))
            s = tet_sql_elapsed(a.tet_sql, fold_q, a.reps)
            folds.append(f)
            tsqls.append(s)
            ratios.append(f / s)
        host = median_time(lambda: ctx.sql(host_q).collect(), max(1, a.reps // 2))
        rows[name] = {"fold": statistics.median(folds), "tet_sql": statistics.median(tsqls),
                      "ratio": statistics.median(ratios), "host": host}
        print(name, rows[name], file=sys.stderr, flush=True)

    arr = np.fromfile(raw, dtype="<f4").reshape(T, LAT, LON)
    X = xr.DataArray(arr, dims=("time", "lat", "lon"),
                     coords={"time": np.arange(T), "lat": np.linspace(-90.0, 90.0, LAT),
                             "lon": np.arange(LON) * 360.0 / LON})
    w = np.cos(np.radians(X.lat))
    xshapes = {
        "full_mean": lambda: float(X.mean()),
        "by_lat": lambda: X.mean(("time", "lon")).values,
        "by_time": lambda: X.mean(("lat", "lon")).values,
        "hour_of_day": lambda: X.groupby(X.time % 24).mean(...).values,
        "lat_bands": lambda: [getattr(X.groupby(np.floor(X.lat / 10).rename("band")), f)(...).values
                              for f in ("mean", "min", "max")],
        "area_weighted": lambda: float(X.weighted(w).mean()),
        "value_filter": lambda: (X > 290).sum(("time", "lon")).values,
    }
    for name, fn in xshapes.items():
        rows[name]["xarray"] = median_time(fn, max(1, a.reps // 2))
    if a.xsql_python:
        out = subprocess.check_output([a.xsql_python, "-c", XSQL, str(raw), str(T), str(LAT), str(LON),
                                       str(max(1, a.reps // 2)), json.dumps(SHAPES)], text=True)
        for line in out.splitlines():
            r = json.loads(line)
            rows[r["query"]]["xarray_sql"] = r["median_s"]

    def cell(r, k):
        return f"{r[k]:.4f}" if k in r else "n/a"

    section = [HEADING, "",
               f"`python3 benches/python.py` ({a.rounds} rounds × {a.reps} runs; datafusion {datafusion.__version__}, "
               f"the cube {T}×{LAT}×{LON} f32 in the page cache). Seconds: fold path and tet-sql the mean of the middle half of "
               "each round's runs, the others medians; `fold / tet-sql` is the median of the rounds' paired ratios.", "",
               "| shape | fold path | tet-sql | fold / tet-sql | host row path | xarray-sql 0.6 | xarray |",
               "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in rows.items():
        section.append(f"| {name} | {cell(r, 'fold')} | {cell(r, 'tet_sql')} | {r['ratio']:.2f} | {cell(r, 'host')} "
                       f"| {cell(r, 'xarray_sql')} | {cell(r, 'xarray')} |")
    print("\n".join(section))
    if a.out:
        out = Path(a.out)
        text = out.read_text() if out.exists() else ""
        before, _, after = text.partition(HEADING)
        rest = after.split("\n## ", 1)
        tail = "\n## " + rest[1] if len(rest) > 1 else ""
        out.write_text(before.rstrip("\n") + "\n\n" + "\n".join(section) + "\n" + tail)


if __name__ == "__main__":
    main()

-- The demo: writes data/weather.tet on first run (about 50 MB), then queries it.
-- Run from the repository root: cargo run --release --bin tet-sql -- -f sql/demo.sql
SELECT * FROM tet_demo_file('data/weather.tet');

-- What is in the file.
SELECT name, dtype, shape, chunk_count, dim_names, codecs, bytes_stored FROM tet_datasets('data/weather.tet');

-- The schema of one dataset: one column per axis, then v.
DESCRIBE SELECT * FROM tet('data/weather.tet', 'temp');

-- Mean temperature by latitude band (lat values come from the `lat` coordinate variable).
SELECT lat, avg(v) AS mean_k FROM tet('data/weather.tet', 'temp')
WHERE lat BETWEEN -5 AND 5 GROUP BY lat ORDER BY lat;

-- One time step, one point: reads a single chunk.
SELECT time, lat, lon, v FROM tet('data/weather.tet', 'temp')
WHERE time = TIMESTAMP '2024-01-03T12:00:00' AND lat = 45.0 AND lon = 7.5;

-- Daily cycle: mean by time step over a box.
SELECT time, round(avg(v), 3) AS mean_k FROM tet('data/weather.tet', 'temp')
WHERE lat BETWEEN 40 AND 50 AND lon BETWEEN 0 AND 20 GROUP BY time ORDER BY time LIMIT 8;

-- Fill values are NULL: ocean cells of precip do not count.
SELECT count(*) AS cells, count(v) AS land_cells, round(avg(v), 4) AS mean_mm_h FROM tet('data/weather.tet', 'precip');

-- Zone maps skip chunks whose values cannot match.
SELECT count(*) FROM tet('data/weather.tet', 'temp') WHERE v > 330;

-- Analyses the fold answers in one pass over the payload (see README, "Analyses that run
-- at memory speed"). Run after sql/demo.sql has written data/weather.tet:
--   ./target/release/tet-sql -f sql/analyses.sql
-- Hour-of-day climatology (time is a Timestamp axis).
SELECT extract(hour FROM time) AS hour, avg(v) FROM tet('data/weather.tet', 'temp') GROUP BY 1 ORDER BY 1;
-- Daily means in degrees Celsius.
SELECT date_trunc('day', time) AS day, avg(v - 273.15) AS celsius FROM tet('data/weather.tet', 'temp') GROUP BY 1 ORDER BY 1;
-- 10-degree latitude bands.
SELECT floor(lat / 10) * 10 AS band, avg(v), min(v), max(v) FROM tet('data/weather.tet', 'temp') GROUP BY 1 ORDER BY 1;
-- The area-weighted global mean, and per day over the land cells of a variable with fill
-- values (the weights count where v is not NULL, as xarray's weighted mean does).
SELECT sum(v * cos(radians(lat))) / sum(cos(radians(lat))) AS global_mean FROM tet('data/weather.tet', 'temp');
SELECT date_trunc('day', time) AS day, sum(v * cos(radians(lat))) / sum(cos(radians(lat))) FILTER (WHERE v IS NOT NULL) AS land_mean FROM tet('data/weather.tet', 'precip') GROUP BY 1 ORDER BY 1;
-- Value conditions: in WHERE and as FILTER clauses.
SELECT lat, count(*) AS hot_cells FROM tet('data/weather.tet', 'temp') WHERE v > 300 AND lat BETWEEN -10 AND 10 GROUP BY lat ORDER BY lat;
SELECT count(*) FILTER (WHERE v > 300) AS hot, count(*) FILTER (WHERE v < 260) AS cold, count(*) AS cells FROM tet('data/weather.tet', 'temp');
-- Unit conversions and a key of one axis.
SELECT lon >= 180 AS west, avg(v - 273.15) AS celsius, max(v * 1.8 - 459.67) AS fahrenheit FROM tet('data/weather.tet', 'temp') GROUP BY 1 ORDER BY 1;
-- Precipitation: fill-value cells are NULL and skipped.
SELECT date_trunc('day', time) AS day, count(v) AS land_cells, sum(v) FILTER (WHERE v >= 2) AS heavy FROM tet('data/weather.tet', 'precip') GROUP BY 1 ORDER BY 1;

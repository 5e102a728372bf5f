//! Files in object stores (s3, gs, az, http): range reads pinned to the version opened.
//!
//! Opening costs two requests for typical files: the last [`OPEN_READ`] bytes (which also
//! tell the object's size and ETag) and the first [`OPEN_READ`] bytes (superblock,
//! directory and, usually, the whole chunk index). Stores without suffix ranges (Azure)
//! need a HEAD first. A region that does not fit (a large
//! index, a metadata spill) costs one more request each. Every later read carries
//! `If-Match` with the ETag seen at open (`If-Unmodified-Since` when there is none, or it
//! is weak) and checks the size and ETag of the answer, so an object replaced mid-query
//! is an error, never a mix of two versions. No answer's body is kept past the bytes
//! asked for.

use crate::format::{FormatError, ReadAt};
use bytes::Bytes;
use datafusion::object_store::path::Path;
use datafusion::object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt};
use futures::{StreamExt, TryStreamExt};
use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Bytes read from each end of the object when opening it.
pub const OPEN_READ: u64 = 64 * 1024;

/// The largest metadata region (index, spill, coordinate variable) fetched on demand.
const MAX_METADATA_FETCH: u64 = 1 << 30;

/// Servers that ignore `Range` (answering 200 with the whole object) are read whole at open
/// up to this size, and refused above it: 8 MiB.
pub const MAX_WHOLE_READ: u64 = 8 << 20;

/// How many on-demand fetches one metadata parse may trigger before giving up.
const MAX_METADATA_ROUNDS: usize = 16;

/// Requests and bytes fetched from one object, over its whole life in the session.
#[derive(Debug, Default)]
pub struct FetchCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl FetchCounters {
    /// GET requests sent (HEAD requests included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    /// Body bytes received.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub(crate) fn add(&self, requests: u64, bytes: u64) {
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// One object in a store, as it was when opened.
#[derive(Debug)]
pub struct RemoteFile {
    url: String,
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The object's metadata when opened: its size, its ETag and its modification time
    /// (the version when there is no ETag).
    opened: ObjectMeta,
    /// True when the server ignored `Range` and the whole object was read at open: every
    /// read is then served from that copy.
    whole: bool,
    /// Metadata bytes fetched so far, sorted by offset (pieces may overlap).
    pieces: RwLock<Vec<(u64, Bytes)>>,
    counters: Arc<FetchCounters>,
}

impl RemoteFile {
    /// Open `path` in `store` (reading both ends of the object). `url` is used in messages.
    pub async fn open(url: &str, store: Arc<dyn ObjectStore>, path: Path) -> Result<RemoteFile, FormatError> {
        let counters = Arc::new(FetchCounters::default());
        let whole = || async {
            let res = store.get(&path).await.map_err(|e| fetch_err("reading the object", e))?;
            read_response(res, "reading the object", MAX_WHOLE_READ).await
        };
        let suffix = GetOptions {
            range: Some(GetRange::Suffix(OPEN_READ)),
            ..Default::default()
        };
        // Set when the server ignores Range and the object is read whole.
        let mut whole_copy = false;
        let (meta, tail) = match store.get_opts(&path, suffix).await {
            Ok(res) => {
                let out = read_response(res, "reading the end of the object", OPEN_READ).await?;
                counters.add(1, out.1.1.len() as u64);
                out
            }
            // Servers that ignore `Range` answer 200 with the whole body, which object_store
            // refuses: read a small object whole instead, refuse a large one.
            Err(e) if ignores_range(&e) => {
                let meta = Self::head(&store, &path).await?;
                if meta.size > MAX_WHOLE_READ {
                    return Err(FormatError::invalid(
                        "object store",
                        "Range",
                        format!(
                            "the server ignores Range requests (it answered a range with the whole object), and the \
                             object is {} bytes: objects of up to {MAX_WHOLE_READ} bytes are read whole from such \
                             servers, larger ones need a server that answers ranges",
                            meta.size
                        ),
                    ));
                }
                let out = whole().await?;
                counters.add(3, out.1.1.len() as u64);
                whole_copy = true;
                out
            }
            // Azure has no suffix ranges: learn the size first, then read the end.
            Err(datafusion::object_store::Error::NotSupported { .. }) => {
                let meta = Self::head(&store, &path).await?;
                let start = meta.size.saturating_sub(OPEN_READ);
                let out = if start == 0 {
                    whole().await?
                } else {
                    let what = "reading the end of the object";
                    let opts = GetOptions {
                        range: Some(GetRange::Bounded(start..meta.size)),
                        if_match: strong(&meta.e_tag),
                        if_unmodified_since: strong(&meta.e_tag).is_none().then_some(meta.last_modified),
                        ..Default::default()
                    };
                    let res = store.get_opts(&path, opts).await.map_err(|e| fetch_err(what, e))?;
                    (meta, read_response(res, what, OPEN_READ).await?.1)
                };
                counters.add(2, out.1.1.len() as u64);
                out
            }
            Err(e) => return Err(fetch_err("opening the object", e)),
        };
        let file = RemoteFile {
            url: url.to_owned(),
            store,
            path,
            opened: meta.clone(),
            whole: whole_copy,
            pieces: RwLock::new(vec![]),
            counters,
        };
        if tail.0 as usize + tail.1.len() != meta.size as usize {
            return Err(FormatError::Changed {
                detail: format!(
                    "the first answer held bytes {}..{} of a {}-byte object",
                    tail.0,
                    tail.0 as usize + tail.1.len(),
                    meta.size
                ),
            });
        }
        file.insert(tail.0, tail.1);
        if tail.0 > 0 {
            let head = file.get(0..tail.0.min(OPEN_READ)).await?;
            file.insert(0, head);
        }
        Ok(file)
    }

    /// The current size and ETag of the object (one HEAD request).
    pub async fn head(store: &Arc<dyn ObjectStore>, path: &Path) -> Result<ObjectMeta, FormatError> {
        store
            .head(path)
            .await
            .map_err(|e| fetch_err("reading the object's metadata", e))
    }

    /// True when `meta` describes the object as it was opened: same size and ETag, and,
    /// for a store without ETags, the same modification time.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        let o = &self.opened;
        // ETags compared without their quotes: some servers quote them in one answer and
        // not in another (fake-gcs-server's listings leave them bare).
        let bare = |t: &Option<String>| t.as_deref().map(|t| t.trim_matches('"').to_owned());
        meta.size == o.size
            && bare(&meta.e_tag) == bare(&o.e_tag)
            && (o.e_tag.is_some() || meta.last_modified == o.last_modified)
    }

    /// The object's modification time when opened, in nanoseconds since 1970.
    pub fn modified_ns(&self) -> Option<i64> {
        self.opened.last_modified.timestamp_nanos_opt()
    }

    /// The object's size when opened.
    pub fn size(&self) -> u64 {
        self.opened.size
    }

    /// The object's ETag when opened, if the store reports one.
    pub fn e_tag(&self) -> Option<&str> {
        self.opened.e_tag.as_deref()
    }

    /// The URL given at open.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests and bytes fetched so far (open, metadata and payloads).
    pub fn counters(&self) -> &Arc<FetchCounters> {
        &self.counters
    }

    /// Fetch bytes `range` of the version opened (one request; none when the whole object
    /// was read at open). The request is conditional on the ETag seen at open, or without
    /// one on the modification time.
    pub async fn get(&self, range: Range<u64>) -> Result<Bytes, FormatError> {
        let what = || format!("reading bytes {}..{}", range.start, range.end);
        if self.whole
            && let Some(b) = self.cached(range.start, range.end.saturating_sub(range.start))
        {
            return Ok(b);
        }
        // A weak ETag never matches in `If-Match` (RFC 9110 §13.1.1): the version is then
        // pinned by `If-Unmodified-Since`, and by the ETag each answer carries, compared
        // below as for strong ones.
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: strong(&self.opened.e_tag),
            if_unmodified_since: strong(&self.opened.e_tag)
                .is_none()
                .then_some(self.opened.last_modified),
            ..Default::default()
        };
        let res = match self.store.get_opts(&self.path, opts).await {
            Ok(r) => r,
            Err(datafusion::object_store::Error::Precondition { .. }) => {
                return Err(FormatError::Changed {
                    detail: match &self.opened.e_tag {
                        Some(e) => format!("its ETag is no longer {e}"),
                        None => format!("it was modified after {}", self.opened.last_modified),
                    },
                });
            }
            Err(e) => return Err(fetch_err(&what(), e)),
        };
        if !self.matches(&res.meta) {
            return Err(FormatError::Changed {
                detail: format!(
                    "opened with {} bytes and ETag {}, now {} bytes and ETag {}",
                    self.size(),
                    self.e_tag().unwrap_or("-"),
                    res.meta.size,
                    res.meta.e_tag.as_deref().unwrap_or("-")
                ),
            });
        }
        let (_, (_, body)) = read_response(res, &what(), range.end - range.start).await?;
        self.counters.add(1, body.len() as u64);
        if body.len() as u64 != range.end - range.start {
            return Err(FormatError::Truncated {
                region: "object body",
                offset: range.start,
                need: range.end - range.start,
                file_len: self.size(),
            });
        }
        Ok(body)
    }

    /// Metadata bytes fetched and kept so far.
    pub fn fetched_bytes(&self) -> u64 {
        let pieces = self.pieces.read().unwrap_or_else(|p| p.into_inner());
        pieces.iter().map(|(_, b)| b.len() as u64).sum()
    }

    fn insert(&self, offset: u64, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let mut pieces = self.pieces.write().unwrap_or_else(|p| p.into_inner());
        let at = pieces.partition_point(|(o, _)| *o < offset);
        pieces.insert(at, (offset, bytes));
    }

    /// The metadata bytes `offset .. offset + len`, if already fetched.
    fn cached(&self, offset: u64, len: u64) -> Option<Bytes> {
        let pieces = self.pieces.read().unwrap_or_else(|p| p.into_inner());
        let end = offset.checked_add(len)?;
        pieces.iter().find_map(|(o, b)| {
            let piece_end = *o + b.len() as u64;
            (*o <= offset && end <= piece_end).then(|| b.slice((offset - o) as usize..(end - o) as usize))
        })
    }

    /// Fetch the metadata `spans` not fetched yet: joined when closer than [`OPEN_READ`],
    /// requests of at most `MAX_METADATA_FETCH` bytes, eight at a time.
    pub async fn prefetch(&self, spans: &[Range<u64>]) -> Result<(), FormatError> {
        let missing: Vec<Range<u64>> = spans
            .iter()
            .filter(|s| s.end > s.start && self.cached(s.start, s.end - s.start).is_none())
            .cloned()
            .collect();
        let (requests, _) = super::fetch::coalesce(&missing, OPEN_READ, MAX_METADATA_FETCH);
        let bodies: Vec<(u64, Bytes)> = futures::stream::iter(
            requests
                .into_iter()
                .map(|r| async move { self.get(r.clone()).await.map(|b| (r.start, b)) }),
        )
        .buffered(8)
        .try_collect()
        .await?;
        for (offset, body) in bodies {
            self.insert(offset, body);
        }
        Ok(())
    }

    /// Run the synchronous parse `f` over the metadata bytes, fetching whatever range it
    /// asks for that is not there yet, and retrying (each retry adds one request).
    pub async fn resolve<T>(&self, f: impl Fn(&dyn ReadAt) -> Result<T, FormatError>) -> Result<T, FormatError> {
        for _ in 0..MAX_METADATA_ROUNDS {
            let view = MetadataView {
                file: self,
                miss: RefCell::new(None),
            };
            let out = f(&view);
            let miss = view.miss.take();
            match (out, miss) {
                (Ok(v), _) => return Ok(v),
                (Err(_), Some(range)) => {
                    let len = range.end - range.start;
                    if len > MAX_METADATA_FETCH {
                        return Err(FormatError::invalid(
                            "metadata",
                            "length",
                            format!("{len} bytes at offset {} is more than this reader fetches", range.start),
                        ));
                    }
                    // Read at least OPEN_READ, but never the whole object in one range.
                    let end = range.end.max(range.start + OPEN_READ).min(self.size());
                    let end = if range.start == 0 && end == self.size() {
                        range.end
                    } else {
                        end
                    };
                    let bytes = self.get(range.start..end).await?;
                    self.insert(range.start, bytes);
                }
                (Err(e), None) => return Err(e),
            }
        }
        Err(FormatError::invalid(
            "metadata",
            "regions",
            format!("still incomplete after {MAX_METADATA_ROUNDS} fetches"),
        ))
    }
}

impl ReadAt for RemoteFile {
    fn len(&self) -> u64 {
        self.size()
    }
    /// Reads metadata already fetched (by [`RemoteFile::resolve`]); anything else is an
    /// error, since a synchronous caller cannot wait for the network.
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, FormatError> {
        match self.cached(offset, len) {
            Some(b) => Ok(Cow::Owned(b.to_vec())),
            None => Err(FormatError::invalid(
                "metadata",
                "bytes",
                format!(
                    "{offset}..{} were not fetched when the file was opened",
                    offset.saturating_add(len)
                ),
            )),
        }
    }
}

/// A [`ReadAt`] over the fetched metadata that records the first range it lacks.
struct MetadataView<'a> {
    file: &'a RemoteFile,
    miss: RefCell<Option<Range<u64>>>,
}

impl ReadAt for MetadataView<'_> {
    fn len(&self) -> u64 {
        self.file.size()
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, FormatError> {
        if let Some(b) = self.file.cached(offset, len) {
            return Ok(Cow::Owned(b.to_vec()));
        }
        let end = offset.saturating_add(len);
        self.miss.borrow_mut().get_or_insert(offset..end);
        Err(FormatError::invalid(
            "metadata",
            "bytes",
            format!("{offset}..{end} not fetched yet"),
        ))
    }
}

/// The metadata, first offset and body of a GET answer (errors reading the body say
/// `what`), of at most `most` bytes: the body is counted as it streams in, so a server
/// that sends more than it was asked for (one that ignores `Range`, or lies about the
/// size) is an error when it passes `most`, not a buffer as large as what it sends.
async fn read_response(res: GetResult, what: &str, most: u64) -> Result<(ObjectMeta, (u64, Bytes)), FormatError> {
    let meta = res.meta.clone();
    let start = res.range.start;
    let too_long = |n: u64| {
        FormatError::invalid(
            "object store",
            "body",
            format!("{what}: the server sent {n} bytes or more where at most {most} were asked for"),
        )
    };
    let claimed = res.range.end.saturating_sub(res.range.start);
    if claimed > most {
        return Err(too_long(claimed));
    }
    let mut stream = res.into_stream();
    let mut parts: Vec<Bytes> = Vec::new();
    let mut total = 0u64;
    while let Some(part) = stream.next().await {
        let part = part.map_err(|e| fetch_err(what, e))?;
        total += part.len() as u64;
        if total > most {
            return Err(too_long(total));
        }
        parts.push(part);
    }
    let body = match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().unwrap_or_default(),
        _ => {
            let mut joined = Vec::with_capacity(total as usize);
            for p in &parts {
                joined.extend_from_slice(p);
            }
            Bytes::from(joined)
        }
    };
    Ok((meta, (start, body)))
}

/// `e_tag` when it is a strong ETag: a weak one (`W/"…"`) cannot be sent in `If-Match`.
fn strong(e_tag: &Option<String>) -> Option<String> {
    e_tag.clone().filter(|e| !e.starts_with("W/"))
}

/// Whether `e` is object_store's answer to a server that ignored a `Range` header (status
/// 200 with the whole body).
fn ignores_range(e: &datafusion::object_store::Error) -> bool {
    let m = e.to_string();
    m.contains("non-partial") || m.contains("Range request not supported")
}

fn fetch_err(what: &str, e: datafusion::object_store::Error) -> FormatError {
    FormatError::Fetch {
        what: what.to_owned(),
        source: Box::new(e),
    }
}

//! Where a file's bytes come from, and opening a file into a shareable [`TetSource`].
//!
//! Owns: resolving a user-given location to bytes — local paths and `file://` URLs are
//! memory-mapped, `s3://`, `gs://`, `az://`, `http(s)://` URLs are read by range through
//! the session's object store registry — and handing out payload spans as `bytes::Bytes`
//! (zero-copy over the mmap); and listing the files a glob or folder location names
//! ([`parse_pattern`], [`list`]). Must not parse the format itself (that is `format`) nor
//! know about queries.

mod allowed;
mod fetch;
mod listing;
mod local;
mod mapped;
#[cfg(feature = "cloud")]
mod registry;
mod remote;
mod source_cache;

pub use allowed::AllowedLocations;
pub use fetch::{FetchOptions, coalesce, windows};
pub use listing::{ArchivePattern, Listed, list, list_blocking, parse_pattern};
pub use local::{LocalFile, LocalPin};
pub use mapped::Mapped;
#[cfg(feature = "cloud")]
pub use registry::EnvObjectStoreRegistry;
pub use remote::{FetchCounters, OPEN_READ, RemoteFile};
pub use source_cache::{DEFAULT_CACHE_BYTES, SourceCache};

use crate::format::{FormatError, ReadAt, TetFile};
use bytes::Bytes;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::object_store::path::Path;
use futures::{StreamExt, TryStreamExt};
use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// Where the bytes of a [`TetSource`] live.
#[derive(Debug)]
enum Backing {
    Local(LocalFile),
    Remote(RemoteFile),
}

/// An opened, validated `.tet` file: its location, its bytes and its parsed [`TetFile`].
pub struct TetSource {
    /// The location as the user wrote it (for messages).
    pub location: String,
    /// The absolute path or URL the bytes come from.
    pub resolved: String,
    backing: Backing,
    /// The parsed, validated file.
    pub file: Arc<TetFile>,
}

impl fmt::Debug for TetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TetSource")
            .field("location", &self.location)
            .field("file_len", &self.file.file_len)
            .finish()
    }
}

/// The bytes of some spans, and what reading them cost.
#[derive(Debug, Default)]
pub struct Fetched {
    /// One `Bytes` per requested span, in request order.
    pub spans: Vec<Bytes>,
    /// Requests sent (0 for local files).
    pub requests: u64,
    /// Bytes received, coalescing gaps included (0 for local files).
    pub bytes_fetched: u64,
}

/// Which version of a file a plan was made for: its length, its modification time and,
/// for object stores, the ETag it was opened with. Plans shipped to other processes
/// (Ballista) carry it, and the file reopened there must match.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceVersion {
    /// File length in bytes.
    pub len: u64,
    /// The object's ETag (`None` for local files and stores without ETags).
    pub e_tag: Option<String>,
    /// Modification time in nanoseconds since 1970 (a local file's mtime, an object's
    /// last-modified), when known.
    #[serde(default)]
    pub modified_ns: Option<i64>,
}

/// `N bytes (ETag e) modified at T ns`, the parts that are known.
impl std::fmt::Display for SourceVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.len)?;
        if let Some(e) = &self.e_tag {
            write!(f, " (ETag {e})")?;
        }
        if let Some(t) = self.modified_ns {
            write!(f, " modified at {t} ns")?;
        }
        Ok(())
    }
}

/// The URL of `location` when it names an object store rather than a local file.
pub fn remote_url(location: &str) -> Result<Option<url::Url>, FormatError> {
    if location.starts_with("file://") || !location.contains("://") {
        return Ok(None);
    }
    let url = url::Url::parse(location)
        .map_err(|e| FormatError::invalid("location", "URL", format!("{location:?} does not parse: {e}")))?;
    Ok(Some(url))
}

impl TetSource {
    /// Open and validate the local file at `location` (a path, relative to the current
    /// directory, or a `file://` URL). Object store URLs need a session: use
    /// [`TetSource::open_in`].
    pub fn open(location: &str) -> Result<Arc<TetSource>, FormatError> {
        if remote_url(location)?.is_some() {
            return Err(FormatError::invalid(
                "location",
                "scheme",
                "object store URLs are opened through a session (TetSource::open_in, tet(), STORED AS TET)",
            )
            .in_file(location));
        }
        let path = local_path(location).map_err(|e| e.in_file(location))?;
        let resolved = path.display().to_string();
        let bytes = LocalFile::open(&path).map_err(|e| e.in_file(location))?;
        let parsed = TetFile::open(&bytes).and_then(|f| bytes.check_intact(false).map(|()| f));
        let parsed = parsed.map_err(|e| e.in_file(location))?;
        Ok(Arc::new(TetSource {
            location: location.to_owned(),
            resolved,
            backing: Backing::Local(bytes),
            file: Arc::new(parsed),
        }))
    }

    /// [`TetSource::open`] through `cache` (synchronous: a local file needs no network): a
    /// file opened before is reused while its length, modification time and inode are
    /// unchanged (one `stat`), and reopened otherwise.
    pub fn open_local(cache: Option<&SourceCache>, location: &str) -> Result<Arc<TetSource>, FormatError> {
        let Some(cache) = cache else {
            return TetSource::open(location);
        };
        let path = local_path(location).map_err(|e| e.in_file(location))?;
        let key = format!("file://{}", path.display());
        if let Some(hit) = cache.get(&key) {
            let now = LocalPin::of_path(&path).map_err(|e| e.in_file(location))?;
            // A map that faulted (its file truncated under it) is never reused, whatever
            // the file looks like now.
            if let Backing::Local(l) = &hit.backing
                && *l.pin() == now
                && l.check_intact(false).is_ok()
            {
                return Ok(hit);
            }
            cache.remove(&key);
        }
        let source = TetSource::open(location)?;
        cache.insert(&key, source.clone());
        Ok(source)
    }

    /// Open `location`: a local path (memory-mapped), or an object store URL read by range
    /// through the store `runtime` has registered for it. With a `cache`, a URL opened
    /// before is revalidated with one HEAD request and its parsed file reused when the size
    /// and ETag are unchanged (and dropped otherwise); a local file opened before is reused
    /// while its length, modification time and inode are unchanged.
    pub async fn open_in(
        runtime: &RuntimeEnv,
        cache: Option<&SourceCache>,
        location: &str,
    ) -> Result<Arc<TetSource>, FormatError> {
        Self::open_listed(runtime, cache, location, None).await
    }

    /// [`TetSource::open_in`] for a file just listed: `listed` (its size and ETag as the
    /// listing gave them) revalidates a cached source in place of the HEAD request, so
    /// reopening an archive of N cached files costs its listing alone.
    pub async fn open_listed(
        runtime: &RuntimeEnv,
        cache: Option<&SourceCache>,
        location: &str,
        listed: Option<&object_store::ObjectMeta>,
    ) -> Result<Arc<TetSource>, FormatError> {
        let Some(url) = remote_url(location)? else {
            return TetSource::open_local(cache, location);
        };
        let store = runtime.object_store_registry.get_store(&url).map_err(|e| {
            FormatError::invalid(
                "location",
                "object store",
                format!(
                    "none is registered for {}://{}: register one with SessionContext::register_object_store, \
                     or use EnvObjectStoreRegistry / tet-sql, which build them from the environment ({e})",
                    url.scheme(),
                    url.host_str().unwrap_or("")
                ),
            )
            .in_file(location)
        })?;
        let path = Path::from_url_path(url.path())
            .map_err(|e| FormatError::invalid("location", "path", e.to_string()).in_file(location))?;
        if let Some(cache) = cache
            && let Some(hit) = cache.get(url.as_str())
        {
            let meta = match listed {
                Some(m) => m.clone(),
                None => RemoteFile::head(&store, &path).await.map_err(|e| e.in_file(location))?,
            };
            if let Backing::Remote(r) = &hit.backing
                && r.matches(&meta)
            {
                r.counters().add(1, 0);
                return Ok(hit);
            }
            cache.remove(url.as_str());
        }
        let file = RemoteFile::open(url.as_str(), store, path)
            .await
            .map_err(|e| e.in_file(location))?;
        let parsed = file
            .resolve(|r| TetFile::open(r))
            .await
            .map_err(|e| e.in_file(location))?;
        let source = Arc::new(TetSource {
            location: location.to_owned(),
            resolved: url.to_string(),
            backing: Backing::Remote(file),
            file: Arc::new(parsed),
        });
        if let Some(cache) = cache {
            cache.insert(url.as_str(), source.clone());
        }
        Ok(source)
    }

    /// The version of the file this source reads.
    pub fn version(&self) -> SourceVersion {
        SourceVersion {
            len: self.file.file_len,
            e_tag: match &self.backing {
                Backing::Remote(r) => r.e_tag().map(str::to_owned),
                Backing::Local(_) => None,
            },
            modified_ns: match &self.backing {
                Backing::Remote(r) => r.modified_ns(),
                Backing::Local(l) => l.pin().modified_ns(),
            },
        }
    }

    /// `Ok` when this source reads `want`; otherwise the "changed" error, naming the file.
    pub fn check_version(&self, want: &SourceVersion) -> Result<(), FormatError> {
        let have = self.version();
        if have == *want {
            return Ok(());
        }
        Err(FormatError::Changed {
            detail: format!("the plan was made for {want}, the file now has {have}"),
        }
        .in_file(&self.location))
    }

    /// Memory this source holds beyond its bytes' mapping: the parsed catalog (chunk rows,
    /// lookup tables, zone maps: approximate) and, for object stores, the metadata bytes
    /// fetched. The weight of an entry of the [`SourceCache`].
    pub fn held_bytes(&self) -> u64 {
        let f = &self.file;
        let rows = f.chunks.len() as u64 * std::mem::size_of::<crate::format::ChunkEntry>() as u64;
        let lookups: u64 = f
            .datasets
            .iter()
            .map(|d| 4 * d.chunk_rows.len() as u64 + d.zones.as_ref().map_or(0, |z| 64 * z.len() as u64))
            .sum();
        let fetched = match &self.backing {
            Backing::Remote(r) => r.fetched_bytes(),
            Backing::Local(_) => 0,
        };
        rows + lookups + fetched
    }

    /// `Ok` while every byte read from this source so far was the file's: for a local file,
    /// no read past the end of a file truncated under its map and, with `check_path`
    /// (one `stat`), no rewrite in place of the file mapped. Readers call it after using
    /// bytes they were handed, before answering from them. Object stores pin each read
    /// to the version opened, so there is nothing to look at.
    pub fn check_intact(&self, check_path: bool) -> Result<(), FormatError> {
        match &self.backing {
            Backing::Local(l) => l.check_intact(check_path).map_err(|e| e.in_file(&self.location)),
            Backing::Remote(_) => Ok(()),
        }
    }

    /// True when the bytes come from an object store.
    pub fn is_remote(&self) -> bool {
        matches!(self.backing, Backing::Remote(_))
    }

    /// Requests and bytes fetched from the object store so far (`None` for local files).
    pub fn fetch_counters(&self) -> Option<&Arc<FetchCounters>> {
        match &self.backing {
            Backing::Remote(r) => Some(r.counters()),
            Backing::Local(_) => None,
        }
    }

    /// Run the synchronous reader `f` over the file's bytes; for object stores, fetch the
    /// metadata it asks for (e.g. a coordinate variable) and retry until it has them.
    pub async fn resolve<T>(&self, f: impl Fn(&dyn ReadAt) -> Result<T, FormatError>) -> Result<T, FormatError> {
        match &self.backing {
            Backing::Local(l) => f(l).and_then(|v| l.check_intact(false).map(|()| v)),
            Backing::Remote(r) => r.resolve(f).await,
        }
        .map_err(|e| e.in_file(&self.location))
    }

    /// Object stores: fetch the metadata `spans` (e.g. every chunk of a coordinate
    /// variable) that are not fetched yet, coalesced into few requests, for later
    /// [`TetSource::resolve`] calls. Nothing to do for local files.
    pub async fn prefetch(&self, spans: &[Range<u64>]) -> Result<(), FormatError> {
        match &self.backing {
            Backing::Local(_) => Ok(()),
            Backing::Remote(r) => r.prefetch(spans).await.map_err(|e| e.in_file(&self.location)),
        }
    }

    /// The stored bytes of `spans`: slices of the mmap for local files; for object stores,
    /// coalesced range requests (see [`FetchOptions`]), at most `opts.concurrency` at once.
    pub async fn fetch(&self, spans: &[Range<u64>], opts: &FetchOptions) -> Result<Fetched, FormatError> {
        let remote = match &self.backing {
            Backing::Local(l) => {
                let spans = spans
                    .iter()
                    .map(|s| l.span(s.start, s.end - s.start))
                    .collect::<Result<_, _>>()
                    .map_err(|e| e.in_file(&self.location))?;
                return Ok(Fetched {
                    spans,
                    ..Default::default()
                });
            }
            Backing::Remote(r) => r,
        };
        let (requests, owner) = coalesce(spans, opts.coalesce_gap, opts.max_request);
        let bodies: Vec<Bytes> = futures::stream::iter(requests.iter().cloned().map(|r| remote.get(r)))
            .buffered(opts.concurrency.max(1))
            .try_collect()
            .await
            .map_err(|e| e.in_file(&self.location))?;
        let out = spans
            .iter()
            .zip(&owner)
            .map(|(s, &k)| {
                let base = requests[k].start;
                bodies[k].slice((s.start - base) as usize..(s.end - base) as usize)
            })
            .collect();
        Ok(Fetched {
            spans: out,
            requests: requests.len() as u64,
            bytes_fetched: bodies.iter().map(|b| b.len() as u64).sum(),
        })
    }
}

impl ReadAt for TetSource {
    fn len(&self) -> u64 {
        match &self.backing {
            Backing::Local(l) => l.len(),
            Backing::Remote(r) => r.len(),
        }
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, FormatError> {
        match &self.backing {
            Backing::Local(l) => l.read_at(offset, len),
            Backing::Remote(r) => r.read_at(offset, len),
        }
    }
}

/// Resolve a local location to an absolute path.
fn local_path(location: &str) -> Result<std::path::PathBuf, FormatError> {
    let raw = location.strip_prefix("file://").unwrap_or(location);
    if raw.is_empty() {
        return Err(FormatError::invalid("location", "path", "is empty"));
    }
    Ok(std::path::absolute(raw)?)
}

/// Format errors surface in DataFusion as external errors carrying the message (which
/// names the file, the region and the field).
impl From<FormatError> for datafusion::error::DataFusionError {
    fn from(e: FormatError) -> Self {
        datafusion::error::DataFusionError::External(Box::new(e))
    }
}

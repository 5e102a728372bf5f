//! The per-session cache of opened files.

use super::TetSource;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Default of [`SourceCache::max_bytes`]: 256 MiB of parsed catalogs and fetched metadata.
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// Opened files by URL (`file://` + absolute path for local ones), so repeated queries
/// reuse the parsed file, its mapping and the metadata bytes already fetched. A remote
/// entry is only used after a HEAD request confirms the object still has the size and
/// ETag (or, without one, modification time) it was opened with, a local one after a
/// `stat` confirms its length, modification time and inode
/// ([`LocalPin`](super::LocalPin)); otherwise it is dropped and the file reopened.
///
/// Bounded: entries are weighed by [`TetSource::held_bytes`] (the parsed catalog and, for
/// object stores, the metadata bytes fetched; a local file's mapping is not memory the
/// process holds) and the least recently used are dropped once the total passes
/// [`SourceCache::max_bytes`] (session option `tet.cache_max_bytes`, applied by the
/// session's opens through [`SourceCache::set_max_bytes`]). A dropped file is simply
/// reopened by the next query that names it; plans and tables already holding it keep it
/// alive.
///
/// [`crate::register`] installs one per session as a `SessionConfig` extension.
#[derive(Debug)]
pub struct SourceCache {
    max_bytes: AtomicU64,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Per URL: the source, its weight and when it was last used.
    map: HashMap<String, (Arc<TetSource>, u64, u64)>,
    /// Sum of the weights.
    total: u64,
    /// Use counter (the "time" of last use).
    clock: u64,
}

impl Default for SourceCache {
    fn default() -> Self {
        SourceCache::with_max_bytes(DEFAULT_CACHE_BYTES)
    }
}

impl SourceCache {
    /// A cache that holds at most `max_bytes` (by [`TetSource::held_bytes`]; the most
    /// recent entry is kept even when it alone is larger).
    pub fn with_max_bytes(max_bytes: u64) -> Self {
        SourceCache {
            max_bytes: AtomicU64::new(max_bytes),
            entries: Mutex::default(),
        }
    }

    /// The bound on the cached bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.load(Ordering::Relaxed)
    }

    /// Change the bound; entries past a lower one are dropped, least recently used first.
    pub fn set_max_bytes(&self, max_bytes: u64) {
        if self.max_bytes.swap(max_bytes, Ordering::Relaxed) > max_bytes {
            Self::evict(&mut self.lock(), max_bytes, None);
        }
    }

    /// Bytes held by the cached entries.
    pub fn held_bytes(&self) -> u64 {
        self.lock().total
    }

    /// The source opened for `url`, if any (not yet revalidated); marks it used.
    pub fn get(&self, url: &str) -> Option<Arc<TetSource>> {
        let mut e = self.lock();
        e.clock += 1;
        let now = e.clock;
        e.map.get_mut(url).map(|(s, _, used)| {
            *used = now;
            s.clone()
        })
    }

    /// Remember `source` as the current version of `url`, then drop the least recently
    /// used other entries while the cache holds more than its bound.
    pub fn insert(&self, url: &str, source: Arc<TetSource>) {
        let weight = source.held_bytes();
        let mut e = self.lock();
        e.clock += 1;
        let now = e.clock;
        if let Some((_, old, _)) = e.map.insert(url.to_owned(), (source, weight, now)) {
            e.total -= old;
        }
        e.total += weight;
        Self::evict(&mut e, self.max_bytes(), Some(url));
    }

    /// Drop the least recently used entries but `keep` while they weigh more than `max`.
    fn evict(e: &mut Entries, max: u64, keep: Option<&str>) {
        while e.total > max {
            let Some(oldest) = e
                .map
                .iter()
                .filter(|(k, _)| Some(k.as_str()) != keep)
                .min_by_key(|(_, (_, _, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, w, _)) = e.map.remove(&oldest) {
                e.total -= w;
            }
        }
    }

    /// Forget `url`.
    pub fn remove(&self, url: &str) {
        let mut e = self.lock();
        if let Some((_, w, _)) = e.map.remove(url) {
            e.total -= w;
        }
    }

    /// Number of cached files.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DType, DatasetSpec, TetWriter};

    #[test]
    fn least_recently_used_entries_go_first_once_over_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, chunks: u64| {
            let data = vec![1u8; chunks as usize];
            let mut w = TetWriter::new();
            w.dataset(DatasetSpec::new("v", DType::U8, &[chunks], &[1], &data))
                .unwrap();
            let path = dir.path().join(name);
            w.write_path(&path).unwrap();
            TetSource::open(&path.display().to_string()).unwrap()
        };
        let (a, b, c) = (open("a.tet", 100), open("b.tet", 100), open("c.tet", 100));
        let w = a.held_bytes();
        assert!(w >= 100 * 104, "a catalog of 100 chunks weighs {w}");
        assert_eq!(b.held_bytes(), w);
        // Room for two.
        let cache = SourceCache::with_max_bytes(2 * w + w / 2);
        cache.insert("a", a.clone());
        cache.insert("b", b);
        assert!(cache.get("a").is_some()); // a is now more recent than b
        cache.insert("c", c);
        assert_eq!(cache.len(), 2);
        assert!(cache.get("b").is_none(), "the least recently used entry goes");
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        assert_eq!(cache.held_bytes(), 2 * w);
        // Replacing an entry does not count it twice; removing frees it.
        cache.insert("a", a);
        assert_eq!(cache.held_bytes(), 2 * w);
        cache.remove("a");
        assert_eq!((cache.len(), cache.held_bytes()), (1, w));
        // Lowering the bound drops the least recently used at once; zero empties it.
        cache.insert("b", open("e.tet", 100));
        assert!(cache.get("c").is_some()); // order of use: b, c
        cache.set_max_bytes(w + w / 2);
        assert_eq!((cache.max_bytes(), cache.len()), (w + w / 2, 1));
        assert!(cache.get("c").is_some());
        cache.set_max_bytes(0);
        assert!(cache.is_empty() && cache.held_bytes() == 0);
        // One entry larger than the bound stays (the caller is using it).
        let tiny = SourceCache::with_max_bytes(1);
        tiny.insert("c", open("d.tet", 10));
        assert_eq!(tiny.len(), 1);
    }
}

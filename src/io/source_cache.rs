//! The per-session cache of opened files.

use super::TetSource;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Opened files by URL (`file://` + absolute path for local ones), so repeated queries
/// reuse the parsed file, its mapping and the metadata bytes already fetched. A remote
/// entry is only used after a HEAD request confirms the object still has the size and
/// ETag it was opened with, a local one after a `stat` confirms its length, modification
/// time and inode ([`LocalPin`](super::LocalPin)); otherwise it is dropped and the file
/// reopened. The cache is not bounded yet: it holds every file a session opened.
///
/// [`crate::register`] installs one per session as a `SessionConfig` extension.
#[derive(Debug, Default)]
pub struct SourceCache {
    entries: Mutex<HashMap<String, Arc<TetSource>>>,
}

impl SourceCache {
    /// The source opened for `url`, if any (not yet revalidated).
    pub fn get(&self, url: &str) -> Option<Arc<TetSource>> {
        self.lock().get(url).cloned()
    }

    /// Remember `source` as the current version of `url`.
    pub fn insert(&self, url: &str, source: Arc<TetSource>) {
        self.lock().insert(url.to_owned(), source);
    }

    /// Forget `url`.
    pub fn remove(&self, url: &str) {
        self.lock().remove(url);
    }

    /// Number of cached files.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TetSource>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

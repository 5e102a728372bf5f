//! [`AllowedLocations`]: which files a process opens for plans made elsewhere.

use super::{local_path, remote_url};
use crate::format::FormatError;
use std::fmt;
use std::path::PathBuf;

/// Local directories and object store URL prefixes that a process may open on behalf of
/// plans it receives (a Ballista executor started with `--tet-allow-location`). Plans
/// name files by absolute path or URL; without a restriction an executor opens whatever
/// a plan names, with one it opens only:
/// - local files whose canonical path (symbolic links and `..` resolved) lies under the
///   canonical path of an allowed directory; they are opened by that canonical path;
/// - URLs with an allowed prefix's scheme, user, host and port, whose path is the
///   prefix's path or continues it after a `/`, and has no `.` or `..` segment (also
///   percent-encoded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedLocations {
    roots: Vec<PathBuf>,
    prefixes: Vec<url::Url>,
}

impl AllowedLocations {
    /// From directories (which must exist) and URL prefixes (`s3://bucket/data/`).
    pub fn new<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Result<Self, FormatError> {
        let mut out = AllowedLocations::default();
        for item in items {
            let item = item.as_ref();
            match remote_url(item)? {
                Some(url) => out.prefixes.push(url),
                None => {
                    let path = local_path(item).map_err(|e| e.in_file(item))?;
                    let root = std::fs::canonicalize(&path).map_err(|e| {
                        FormatError::invalid("allowed location", "directory", e.to_string()).in_file(item)
                    })?;
                    if !root.is_dir() {
                        return Err(
                            FormatError::invalid("allowed location", "directory", "is not a directory").in_file(item),
                        );
                    }
                    out.roots.push(root);
                }
            }
        }
        Ok(out)
    }

    /// `location` as it is to be opened (a local file by its canonical path) when it is
    /// allowed; `None` when it is not (or a local file that does not exist).
    pub fn permit(&self, location: &str) -> Option<String> {
        match remote_url(location).ok()? {
            Some(url) => self
                .prefixes
                .iter()
                .any(|p| url_under(&url, p))
                .then(|| location.to_owned()),
            None => {
                let canonical = std::fs::canonicalize(local_path(location).ok()?).ok()?;
                self.roots
                    .iter()
                    .any(|r| canonical.starts_with(r))
                    .then(|| canonical.display().to_string())
            }
        }
    }
}

impl fmt::Display for AllowedLocations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roots = self.roots.iter().map(|r| r.display().to_string());
        let all: Vec<String> = roots.chain(self.prefixes.iter().map(|p| p.to_string())).collect();
        if all.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", all.join(", "))
        }
    }
}

fn url_under(url: &url::Url, prefix: &url::Url) -> bool {
    let dot = |s: &str| {
        let s = s.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    };
    let base = prefix.path().trim_end_matches('/');
    let path = url.path();
    url.scheme() == prefix.scheme()
        && url.username() == prefix.username()
        && url.host_str() == prefix.host_str()
        && url.port_or_known_default() == prefix.port_or_known_default()
        && !path.split('/').any(dot)
        && (path == base || path.strip_prefix(base).is_some_and(|rest| rest.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_under_the_allowed_roots_and_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let (ok, other) = (dir.path().join("ok"), dir.path().join("other"));
        std::fs::create_dir_all(ok.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        for p in [ok.join("a.tet"), ok.join("sub/b.tet"), other.join("c.tet")] {
            std::fs::write(p, b"x").unwrap();
        }
        // A link inside the root to a file outside, and a sibling sharing the root's prefix.
        std::os::unix::fs::symlink(other.join("c.tet"), ok.join("link.tet")).unwrap();
        std::fs::create_dir_all(dir.path().join("ok2")).unwrap();
        std::fs::write(dir.path().join("ok2/d.tet"), b"x").unwrap();
        let allowed = AllowedLocations::new([ok.display().to_string(), "s3://bucket/data/".into()]).unwrap();
        let canonical = |p: PathBuf| std::fs::canonicalize(p).unwrap().display().to_string();
        let d = dir.path().display();
        for (location, expect) in [
            (format!("{d}/ok/a.tet"), Some(canonical(ok.join("a.tet")))),
            (
                format!("file://{d}/ok/sub/b.tet"),
                Some(canonical(ok.join("sub/b.tet"))),
            ),
            (format!("{d}/ok/sub/../a.tet"), Some(canonical(ok.join("a.tet")))),
            (format!("{d}/ok/../other/c.tet"), None),
            (format!("{d}/ok/link.tet"), None),
            (format!("{d}/ok2/d.tet"), None),
            (format!("{d}/ok/missing.tet"), None),
            (format!("{d}/other/c.tet"), None),
        ] {
            assert_eq!(allowed.permit(&location), expect, "{location}");
        }
        for (url, ok) in [
            ("s3://bucket/data/x.tet", true),
            ("s3://bucket/data/deep/x.tet", true),
            ("s3://bucket/data", true),
            ("s3://bucket/database/x.tet", false),
            ("s3://bucket/other/x.tet", false),
            ("s3://bucket/data/../other/x.tet", false),
            ("s3://bucket/data/%2E%2e/other/x.tet", false),
            ("s3://bucket2/data/x.tet", false),
            ("s3://user@bucket/data/x.tet", false),
            ("gs://bucket/data/x.tet", false),
            ("http://bucket/data/x.tet", false),
        ] {
            assert_eq!(allowed.permit(url).is_some(), ok, "{url}");
        }
        // Ports: the known default equals no port.
        let http = AllowedLocations::new(["http://127.0.0.1/files/"]).unwrap();
        assert!(http.permit("http://127.0.0.1:80/files/a.tet").is_some());
        assert!(http.permit("http://127.0.0.1:8080/files/a.tet").is_none());
        // Nothing allowed, and roots that are not directories.
        assert!(AllowedLocations::default().permit(&format!("{d}/ok/a.tet")).is_none());
        assert!(AllowedLocations::new([ok.join("a.tet").display().to_string()]).is_err());
        assert!(AllowedLocations::new([format!("{d}/none")]).is_err());
        assert_eq!(
            allowed.to_string(),
            format!("{}, s3://bucket/data/", canonical(ok.clone()))
        );
    }
}

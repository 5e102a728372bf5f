//! A table location that names several `.tet` files — a glob or a folder — turned into the
//! sorted list of those files, through the session's object store registry.
//!
//! DataFusion's [`ListingTableUrl`] parses the location, but its `list_all_files` is not
//! used: it goes through the runtime's list-files cache (infinite TTL in DataFusion 55, so a
//! new file would never be seen), its glob lets `*` cross `/` (or, with
//! `listing_table_ignore_subdirectory`, matches the first segment only, so `**` never
//! reaches a subfolder), and it always lists recursively. Here `*` stops at `/`, `**`
//! crosses it, and a one-level pattern asks the store for one level only.

use crate::format::FormatError;
use datafusion::common::{DataFusionError, Result, plan_datafusion_err, plan_err};
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use std::collections::VecDeque;
use url::Url;

/// The characters that make a location a glob (as in [`ListingTableUrl::parse`]).
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

/// `*`, `?` and `[...]` stop at `/`; only `**` crosses it (as in a shell).
const MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A location that names several files: a glob (`data/*.tet`, `s3://b/era5/2024-*.tet`,
/// `**` for any depth of subfolders) or a folder — a local path or URL ending in `/`, or
/// an existing local directory.
///
/// A glob keeps the names it matches; when its last segment names no extension (no `.`,
/// e.g. `2024-*` or `**`), only names ending in `.tet` among them. A folder keeps the
/// names ending in `.tet`.
#[derive(Debug, Clone)]
pub struct ArchivePattern {
    text: String,
    url: ListingTableUrl,
    local: bool,
}

/// One file a pattern names.
#[derive(Debug, Clone)]
pub struct Listed {
    /// What [`TetSource::open_in`](super::TetSource::open_in) takes: an absolute path for a
    /// local file, the full URL (`s3://bucket/key`) otherwise.
    pub location: String,
    /// The object as listed (size, modification time, ETag).
    pub meta: ObjectMeta,
}

/// `s` split after the last `/` before its first glob character at or after byte `from`;
/// `None` without one.
fn split_glob(s: &str, from: usize) -> Option<(&str, &str)> {
    let first = s[from..].find(GLOB_CHARS)? + from;
    Some(s.split_at(s[..first].rfind('/').map_or(0, |i| i + 1)))
}

/// The pattern `s` names, or `None` when it names one file (which opens as before).
///
/// Local paths (and `file://` URLs, whose rest is a path as for `TetSource`) resolve
/// against the current directory. In URLs only the path is searched for glob characters
/// (an IPv6 host has `[`); in `http(s)` URLs `?` starts a query, and a URL with one is
/// never a pattern (a presigned URL names one object).
pub fn parse_pattern(s: &str) -> Result<Option<ArchivePattern>> {
    let local = s.starts_with("file://") || !s.contains("://");
    let found = if local {
        let raw = s.strip_prefix("file://").unwrap_or(s);
        let folder = raw.ends_with('/') || (!raw.is_empty() && std::path::Path::new(raw).is_dir());
        match split_glob(raw, 0) {
            Some((base, glob)) => Some((local_dir(s, base)?, Some(glob))),
            None if folder => Some((local_dir(s, raw)?, None)),
            None => None,
        }
    } else {
        let after = s.find("://").map_or(0, |i| i + 3);
        let path = s[after..].find('/').map_or(s.len(), |i| after + i);
        let http = s[..after].eq_ignore_ascii_case("http://") || s[..after].eq_ignore_ascii_case("https://");
        let base_url = |base: &str| Url::parse(base).map_err(|e| plan_datafusion_err!("{s}: {e}"));
        match split_glob(s, path) {
            _ if http && s.contains(['?', '#']) => None,
            Some((base, glob)) => Some((base_url(base)?, Some(glob))),
            None if s.len() > path && s.ends_with('/') => Some((base_url(s)?, None)),
            None => None,
        }
    };
    let Some((url, glob)) = found else {
        return Ok(None);
    };
    let glob = glob
        .map(|g| Pattern::new(g).map_err(|e| plan_datafusion_err!("{s}: the glob {g:?}: {e}")))
        .transpose()?;
    let url = ListingTableUrl::try_new(url, glob).map_err(|e| plan_datafusion_err!("{s}: {e}"))?;
    Ok(Some(ArchivePattern {
        text: s.to_owned(),
        url,
        local,
    }))
}

/// The `file://` URL of the local directory `base` (`.` when empty).
fn local_dir(s: &str, base: &str) -> Result<Url> {
    let dir =
        std::path::absolute(if base.is_empty() { "." } else { base }).map_err(|e| plan_datafusion_err!("{s}: {e}"))?;
    // from_directory_path keeps `.` and `..` segments; parsing the text resolves them.
    Url::from_directory_path(&dir)
        .ok()
        .and_then(|u| Url::parse(u.as_str()).ok())
        .ok_or_else(|| plan_datafusion_err!("{s}: {} is not an absolute path", dir.display()))
}

impl std::fmt::Display for ArchivePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl ArchivePattern {
    /// The location as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The folder listed and the glob.
    pub fn url(&self) -> &ListingTableUrl {
        &self.url
    }

    /// The glob, `None` for a folder.
    pub fn glob(&self) -> Option<&Pattern> {
        self.url.get_glob().as_ref()
    }

    /// True for local files (listed through the `file://` store).
    pub fn is_local(&self) -> bool {
        self.local
    }

    fn is_http(&self) -> bool {
        matches!(self.url.scheme(), "http" | "https")
    }

    /// How many levels below the folder can hold a match (`None`: any).
    fn max_depth(&self, recurse_folders: bool) -> Option<usize> {
        match self.glob().map(Pattern::as_str) {
            None => (!recurse_folders).then_some(1),
            Some(g) if g.contains("**") => None,
            Some(g) => Some(g.split('/').count()),
        }
    }

    /// Whether the object at `location` is one of the files named.
    fn keeps(&self, location: &Path) -> bool {
        let Some(rel) = self.url.strip_prefix(location).map(|s| s.collect::<Vec<_>>()) else {
            return false;
        };
        let Some(name) = rel.last() else {
            return false;
        };
        let tet = name.ends_with(".tet");
        match self.glob() {
            None => tet,
            Some(g) => {
                let names_extension = g.as_str().rsplit('/').next().is_some_and(|l| l.contains('.'));
                (tet || names_extension) && g.matches_with(&rel.join("/"), MATCH)
            }
        }
    }

    /// The folder listed, as a user would write it (for messages).
    fn folder(&self) -> String {
        let url = self.url.get_url();
        match url.to_file_path() {
            Ok(p) if self.local => p.display().to_string(),
            _ => url.to_string(),
        }
    }

    /// What [`Listed::location`] holds for the object at `path`.
    fn location_of(&self, path: &Path) -> Result<String> {
        let mut url = AsRef::<Url>::as_ref(&self.url.object_store()).clone();
        // Segment by segment, so `#`, `?` or `%` in a name are escaped in the URL.
        url.path_segments_mut()
            .map_err(|()| plan_datafusion_err!("{}: {} cannot hold a path", self.text, self.url.object_store()))?
            .pop_if_empty()
            .extend(path.parts());
        if !self.local {
            return Ok(url.to_string());
        }
        url.to_file_path()
            .map(|p| p.display().to_string())
            .map_err(|()| plan_datafusion_err!("{}: {url} is not a local path", self.text))
    }

    /// A listing error of the store, naming the pattern.
    fn store_error(&self, e: object_store::Error) -> DataFusionError {
        let text = e.to_string();
        let refused = [
            "405 Method Not Allowed",
            "501 Not Implemented",
            "Error decoding PROPFIND response",
        ];
        if self.is_http() && refused.iter().any(|r| text.contains(r)) {
            return plan_datafusion_err!(
                "{}: this http server does not list files (WebDAV PROPFIND); name the files one by one ({text})",
                self.text
            );
        }
        let what = format!("{}: listing {}", self.text, self.folder());
        FormatError::Fetch {
            what,
            source: Box::new(e),
        }
        .into()
    }
}

/// The matches found so far, and how many objects were looked at.
struct Found<'a> {
    p: &'a ArchivePattern,
    max_files: u64,
    seen: u64,
    metas: Vec<ObjectMeta>,
}

impl Found<'_> {
    fn offer(&mut self, meta: ObjectMeta) -> Result<()> {
        self.seen += 1;
        if !self.p.keeps(&meta.location) {
            return Ok(());
        }
        self.metas.push(meta);
        if self.metas.len() as u64 > self.max_files {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}: matches more than tet.max_files = {} files; raise it with SET tet.max_files = <n> if this is intended",
                self.p.text, self.max_files
            )));
        }
        Ok(())
    }
}

/// The files `p` names, sorted by location: at most `max_files`, at least one (both are
/// errors otherwise). A folder's subfolders are listed when `recurse_folders` (pass the
/// negation of `datafusion.execution.listing_table_ignore_subdirectory`); a glob's depth
/// is its own. Nothing is cached: each call lists again.
///
/// Local folders are listed with `spawn_blocking` when called in a tokio runtime (any
/// flavour) and inline otherwise; synchronous callers use [`list_blocking`].
pub async fn list(
    runtime: &RuntimeEnv,
    p: &ArchivePattern,
    recurse_folders: bool,
    max_files: u64,
) -> Result<Vec<Listed>> {
    let store = runtime.object_store(p.url.object_store()).map_err(|e| {
        plan_datafusion_err!(
            "{p}: no object store is registered for {}: register one with SessionContext::register_object_store \
             or use EnvObjectStoreRegistry ({e})",
            p.url.object_store()
        )
    })?;
    let mut found = Found {
        p,
        max_files,
        seen: 0,
        metas: Vec::new(),
    };
    let prefix = Some(p.url.prefix().clone()).filter(|x| !x.as_ref().is_empty());
    let depth = p.max_depth(recurse_folders);
    // WebDAV servers often refuse `Depth: infinity` (nginx's dav-ext, Apache by default):
    // over http, walk one level at a time.
    if depth == Some(1) || p.is_http() {
        walk(store.as_ref(), prefix, depth, &mut found).await?;
    } else {
        let mut objects = store.list(prefix.as_ref());
        while let Some(meta) = objects.try_next().await.map_err(|e| p.store_error(e))? {
            found.offer(meta)?;
        }
    }
    if found.metas.is_empty() {
        return plan_err!(
            "{p}: matches no .tet file (listed {}: {} objects, none matched)",
            p.folder(),
            found.seen
        );
    }
    let mut out = found
        .metas
        .into_iter()
        .map(|meta| {
            Ok(Listed {
                location: p.location_of(&meta.location)?,
                meta,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    out.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(out)
}

/// List `prefix` one level at a time down to `max_depth` levels (`None`: all).
async fn walk(
    store: &dyn ObjectStore,
    prefix: Option<Path>,
    max_depth: Option<usize>,
    found: &mut Found<'_>,
) -> Result<()> {
    let mut todo = VecDeque::from([(prefix, 1)]);
    while let Some((dir, depth)) = todo.pop_front() {
        let level = store
            .list_with_delimiter(dir.as_ref())
            .await
            .map_err(|e| found.p.store_error(e))?;
        for meta in level.objects {
            found.offer(meta)?;
        }
        if max_depth.is_none_or(|m| depth < m) {
            todo.extend(level.common_prefixes.into_iter().map(|d| (Some(d), depth + 1)));
        }
    }
    Ok(())
}

/// [`list`] for synchronous callers, local patterns only: it runs on a thread of its own
/// with no tokio context, where the local store walks the folder inline, so it works
/// whatever runtime (or none) the caller is in. Object store patterns need [`list`] on
/// a tokio runtime.
pub fn list_blocking(
    runtime: &RuntimeEnv,
    p: &ArchivePattern,
    recurse_folders: bool,
    max_files: u64,
) -> Result<Vec<Listed>> {
    if !p.local {
        return plan_err!("{p}: an object store pattern is listed asynchronously (io::list)");
    }
    std::thread::scope(|s| {
        s.spawn(|| futures::executor::block_on(list(runtime, p, recurse_folders, max_files)))
            .join()
            .unwrap_or_else(|_| plan_err!("{p}: the listing thread panicked"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};
    use std::sync::Arc;

    /// A temporary folder holding `files` (each one byte).
    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        dir
    }

    /// The files `pattern` names, as paths relative to `dir`.
    async fn names(dir: &tempfile::TempDir, pattern: &str, recurse: bool) -> Result<Vec<String>> {
        let p = parse_pattern(&format!("{}/{pattern}", dir.path().display()))?.expect("a pattern");
        let root = format!("{}/", dir.path().display());
        let listed = list(&RuntimeEnv::default(), &p, recurse, 100).await?;
        Ok(listed.into_iter().map(|l| l.location.replace(&root, "")).collect())
    }

    const FILES: [&str; 7] = [
        "a1.tet",
        "a2.tet",
        "b1.tet",
        "a1.txt",
        "sub/a3.tet",
        "sub/deep/a4.tet",
        "sub/n.txt",
    ];

    #[test]
    fn parse_tells_patterns_from_single_files() {
        let dir = tree(&["d/x.tet"]);
        let d = dir.path().display();
        for one in [
            format!("{d}/d/x.tet"),
            format!("{d}/missing.tet"),
            "s3://bucket/era5/x.tet".into(),
            "s3://bucket".into(),
            "http://[::1]:8080/x.tet".into(),
            "https://h/d/*.tet?X-Amz-Signature=1".into(),
            String::new(),
        ] {
            assert!(parse_pattern(&one).unwrap().is_none(), "{one}");
        }
        let p = parse_pattern("s3://bucket/era5/2024-*/x.tet").unwrap().unwrap();
        assert_eq!(
            (p.url().prefix().as_ref(), p.glob().unwrap().as_str()),
            ("era5", "2024-*/x.tet")
        );
        let p = parse_pattern(&format!("{d}/d")).unwrap().unwrap();
        assert!(p.glob().is_none() && p.url().as_str().ends_with("/d/"));
        for folder in [
            "s3://bucket/era5/",
            "s3://bucket/",
            "http://h:80/d/",
            &format!("file://{d}/d/"),
        ] {
            assert!(parse_pattern(folder).unwrap().unwrap().glob().is_none(), "{folder}");
        }
        let e = parse_pattern("s3://bucket/a/***.tet").unwrap_err().to_string();
        assert!(e.contains("s3://bucket/a/***.tet"), "{e}");
    }

    #[tokio::test]
    async fn star_question_mark_and_class_match_one_level() {
        let dir = tree(&FILES);
        assert_eq!(
            names(&dir, "*.tet", false).await.unwrap(),
            ["a1.tet", "a2.tet", "b1.tet"]
        );
        assert_eq!(names(&dir, "a?.tet", false).await.unwrap(), ["a1.tet", "a2.tet"]);
        assert_eq!(names(&dir, "[ab]1.tet", false).await.unwrap(), ["a1.tet", "b1.tet"]);
        assert_eq!(names(&dir, "a1.*", false).await.unwrap(), ["a1.tet", "a1.txt"]);
        assert_eq!(names(&dir, "a*", false).await.unwrap(), ["a1.tet", "a2.tet"]);
    }

    #[tokio::test]
    async fn star_stops_at_slash_and_double_star_crosses_it() {
        let dir = tree(&FILES);
        assert_eq!(names(&dir, "*/*.tet", true).await.unwrap(), ["sub/a3.tet"]);
        let all = ["a1.tet", "a2.tet", "b1.tet", "sub/a3.tet", "sub/deep/a4.tet"];
        assert_eq!(names(&dir, "**/*.tet", false).await.unwrap(), all);
        assert_eq!(
            names(&dir, "sub/**", false).await.unwrap(),
            ["sub/a3.tet", "sub/deep/a4.tet"]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn folders_with_and_without_subfolders() {
        let dir = tree(&FILES);
        let all = ["a1.tet", "a2.tet", "b1.tet", "sub/a3.tet", "sub/deep/a4.tet"];
        for folder in ["", "."] {
            assert_eq!(
                names(&dir, folder, false).await.unwrap(),
                ["a1.tet", "a2.tet", "b1.tet"]
            );
            assert_eq!(names(&dir, folder, true).await.unwrap(), all);
        }
        assert_eq!(names(&dir, "sub/", false).await.unwrap(), ["sub/a3.tet"]);
        assert_eq!(
            names(&dir, "sub", true).await.unwrap(),
            ["sub/a3.tet", "sub/deep/a4.tet"]
        );
    }

    #[tokio::test]
    async fn each_listing_sees_the_files_there_now() {
        let dir = tree(&["a.tet"]);
        assert_eq!(names(&dir, "*.tet", false).await.unwrap(), ["a.tet"]);
        std::fs::write(dir.path().join("b.tet"), b"x").unwrap();
        assert_eq!(names(&dir, "*.tet", false).await.unwrap(), ["a.tet", "b.tet"]);
        assert_eq!(names(&dir, "", true).await.unwrap(), ["a.tet", "b.tet"]);
    }

    #[tokio::test]
    async fn no_match_and_too_many_matches_are_errors_naming_the_pattern() {
        let dir = tree(&FILES);
        let e = names(&dir, "z*.tet", false).await.unwrap_err().to_string();
        let d = dir.path().display();
        let want = format!("{d}/z*.tet: matches no .tet file (listed {d}/: 4 objects, none matched)");
        assert!(e.contains(&want), "{e}");
        let p = parse_pattern(&format!("{}/*.tet", dir.path().display()))
            .unwrap()
            .unwrap();
        let rt = RuntimeEnv::default();
        assert_eq!(list(&rt, &p, false, 3).await.unwrap().len(), 3);
        let e = list(&rt, &p, false, 2).await.unwrap_err();
        assert!(matches!(e, DataFusionError::ResourcesExhausted(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains(&format!(
                "{p}: matches more than tet.max_files = 2 files; raise it with SET tet.max_files"
            )),
            "{e}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_current_directory() {
        let dir = tree(&["x/a.tet", "x/b.tet"]);
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count() - 1);
        let rel = format!(
            "{up}{}/x/*.tet",
            dir.path().display().to_string().trim_start_matches('/')
        );
        let p = parse_pattern(&rel).unwrap().unwrap();
        let listed = list_blocking(&RuntimeEnv::default(), &p, false, 10).unwrap();
        let x = dir.path().join("x");
        let want = [x.join("a.tet"), x.join("b.tet")].map(|p| p.display().to_string());
        assert_eq!(listed.iter().map(|l| l.location.as_str()).collect::<Vec<_>>(), want);
    }

    #[tokio::test]
    async fn list_blocking_works_inside_a_current_thread_runtime() {
        let dir = tree(&FILES);
        let p = parse_pattern(&format!("{}/**/a*.tet", dir.path().display()))
            .unwrap()
            .unwrap();
        assert_eq!(list_blocking(&RuntimeEnv::default(), &p, false, 10).unwrap().len(), 4);
        let s3 = parse_pattern("s3://bucket/*.tet").unwrap().unwrap();
        assert!(list_blocking(&RuntimeEnv::default(), &s3, false, 10).is_err());
    }

    /// A runtime with an in-memory `s3://bucket` holding `keys`.
    async fn bucket(keys: &[&str]) -> (RuntimeEnv, Arc<InMemory>) {
        let store = Arc::new(InMemory::new());
        for k in keys {
            store
                .put(&Path::parse(*k).unwrap(), PutPayload::from_static(b"xy"))
                .await
                .unwrap();
        }
        let rt = RuntimeEnv::default();
        rt.register_object_store(&Url::parse("s3://bucket").unwrap(), store.clone());
        (rt, store)
    }

    #[tokio::test]
    async fn object_store_globs_and_folders() {
        let keys = [
            "era5/2024-01.tet",
            "era5/2024-02.tet",
            "era5/2023-12.tet",
            "era5/x/2024-03.tet",
            "era5/2024-04 #4.tet",
        ];
        let (rt, _) = bucket(&keys).await;
        let locations = |pattern: &'static str, recurse| {
            let rt = &rt;
            async move {
                let p = parse_pattern(pattern)?.expect("a pattern");
                let listed = list(rt, &p, recurse, 10).await?;
                Ok::<_, DataFusionError>(listed.into_iter().map(|l| l.location).collect::<Vec<_>>())
            }
        };
        let jan_feb = ["s3://bucket/era5/2024-01.tet", "s3://bucket/era5/2024-02.tet"];
        assert_eq!(locations("s3://bucket/era5/2024-0?.tet", false).await.unwrap(), jan_feb);
        let deep = locations("s3://bucket/**/2024-*", false).await.unwrap();
        assert_eq!(deep.len(), 4, "{deep:?}");
        assert_eq!(deep[2], "s3://bucket/era5/2024-04%20%234.tet");
        assert_eq!(locations("s3://bucket/era5/", false).await.unwrap().len(), 4);
        assert_eq!(locations("s3://bucket/era5/", true).await.unwrap().len(), 5);
        let e = locations("s3://bucket/none/", true).await.unwrap_err().to_string();
        assert!(
            e.contains("s3://bucket/none/: matches no .tet file (listed s3://bucket/none/: 0 objects"),
            "{e}"
        );
        // The location opens the object listed.
        let p = parse_pattern("s3://bucket/era5/*4.tet").unwrap().unwrap();
        let listed = list(&rt, &p, false, 10).await.unwrap();
        let url = Url::parse(&listed[0].location).unwrap();
        assert_eq!(Path::from_url_path(url.path()).unwrap(), listed[0].meta.location);
        let e = locations("s3://other/*.tet", false).await.unwrap_err().to_string();
        assert!(
            e.starts_with("Error during planning: s3://other/*.tet: no object store"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn walking_level_by_level_finds_what_a_recursive_listing_finds() {
        let keys = ["d/a.tet", "d/s/b.tet", "d/s/t/c.tet", "d/u/d.tet", "e/f.tet"];
        let (_, store) = bucket(&keys).await;
        let p = parse_pattern("s3://bucket/d/**/*.tet").unwrap().unwrap();
        for depth in [None, Some(2)] {
            let mut found = Found {
                p: &p,
                max_files: 10,
                seen: 0,
                metas: Vec::new(),
            };
            walk(store.as_ref(), Some(Path::from("d")), depth, &mut found)
                .await
                .unwrap();
            let mut got: Vec<_> = found.metas.iter().map(|m| m.location.to_string()).collect();
            got.sort();
            match depth {
                None => assert_eq!(got, ["d/a.tet", "d/s/b.tet", "d/s/t/c.tet", "d/u/d.tet"]),
                Some(_) => assert_eq!(got, ["d/a.tet", "d/s/b.tet", "d/u/d.tet"]),
            }
        }
    }

    #[cfg(feature = "cloud")]
    #[tokio::test]
    async fn an_http_server_that_refuses_propfind_is_named() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                // Read the whole request first: closing with unread bytes would reset the connection.
                let (mut req, mut buf) = (Vec::new(), [0u8; 1024]);
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                let _ = conn
                    .write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        let base = format!("http://127.0.0.1:{port}");
        let store = object_store::http::HttpBuilder::new()
            .with_url(&base)
            .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
            .build()
            .unwrap();
        let rt = RuntimeEnv::default();
        rt.register_object_store(&Url::parse(&base).unwrap(), Arc::new(store));
        let p = parse_pattern(&format!("{base}/d/*.tet")).unwrap().unwrap();
        let e = list(&rt, &p, false, 10).await.unwrap_err().to_string();
        assert!(
            e.contains(&format!("{p}: this http server does not list files (WebDAV PROPFIND)")),
            "{e}"
        );
    }
}

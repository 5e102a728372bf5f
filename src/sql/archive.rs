//! Opening what a table names: one file, or an archive (a glob, a folder, a bucket
//! prefix) listed through the session's object store registry, its files opened a
//! bounded number at a time and combined along one axis ([`crate::plan::combine`]).

use super::session_options::TetConfig;
use crate::io::{Listed, TetSource, list, list_blocking, parse_pattern, remote_url};
use crate::plan::{Limits, TableModel, combine};
use datafusion::catalog::Session;
use datafusion::common::{Result, plan_err};
use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionConfig;
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;

/// The table `location` names, of the datasets `names` (none: the file's only dataset):
/// one file's table, or an archive's. `concat_axis` forces the concatenation axis
/// (else the session's `tet.concat_axis`, else the one axis whose coordinates differ
/// between files).
pub async fn open_table(
    config: &SessionConfig,
    runtime: &RuntimeEnv,
    location: &str,
    names: &[&str],
    concat_axis: Option<&str>,
) -> Result<TableModel> {
    let options = TetConfig::of(config);
    let limits = options.limits();
    let Some(files) = list_files(config, runtime, location).await? else {
        let source = open_source_with(config, runtime, location).await?;
        return one_file(source, names, limits).await;
    };
    let members: Vec<TableModel> = open_sources(config, runtime, files)
        .and_then(|source| one_file(source, names, limits))
        .try_collect()
        .await?;
    combine(location, members, concat_axis.or(options.concat_axis()))
}

/// The files an archive's `location` names, in path order; `None` when it names one file.
async fn list_files(config: &SessionConfig, runtime: &RuntimeEnv, location: &str) -> Result<Option<Vec<Listed>>> {
    let Some(pattern) = parse_pattern(location)? else {
        return Ok(None);
    };
    let max_files = TetConfig::of(config).max_files;
    Ok(Some(list(runtime, &pattern, recurse_folders(config), max_files).await?))
}

/// `files` opened `tet.open_concurrency` at a time, in the order given (so the error
/// reported is the first file's that fails); a file cached in the session is revalidated
/// by what its listing said of it.
fn open_sources<'a>(
    config: &'a SessionConfig,
    runtime: &'a RuntimeEnv,
    files: Vec<Listed>,
) -> impl futures::Stream<Item = Result<Arc<TetSource>>> + 'a {
    let at_once = TetConfig::of(config).open_concurrency.max(1);
    let cache = TetConfig::source_cache(config);
    futures::stream::iter(files)
        .map(move |f| {
            let cache = cache.clone();
            async move { Ok(TetSource::open_listed(runtime, cache.as_deref(), &f.location, Some(&f.meta)).await?) }
        })
        .buffered(at_once)
}

/// Every file `location` names (one, or an archive's in path order), opened, from
/// synchronous planning code (table functions): local files and local patterns here,
/// object stores by waiting on the session's stores (which needs a multi-threaded
/// runtime, see [`block_on`]). The flag tells an archive.
pub fn open_sources_blocking(
    session: &dyn Session,
    function: &str,
    location: &str,
) -> Result<(Vec<Arc<TetSource>>, bool)> {
    let (config, runtime) = (session.config(), session.runtime_env());
    if remote_url(location)?.is_some() {
        return block_on(function, async {
            match list_files(config, runtime, location).await? {
                None => Ok((vec![open_source_with(config, runtime, location).await?], false)),
                Some(files) => Ok((open_sources(config, runtime, files).try_collect().await?, true)),
            }
        });
    }
    let cache = TetConfig::source_cache(config);
    let open = |path: &str| TetSource::open_local(cache.as_deref(), path).map_err(DataFusionError::from);
    let Some(pattern) = parse_pattern(location)? else {
        return Ok((vec![open(location)?], false));
    };
    let max_files = TetConfig::of(config).max_files;
    let files = list_blocking(runtime, &pattern, recurse_folders(config), max_files)?;
    let sources = files.iter().map(|f| open(&f.location)).collect::<Result<Vec<_>>>()?;
    Ok((sources, true))
}

/// [`open_table`] from synchronous planning code (see [`open_sources_blocking`]).
pub fn open_table_blocking(
    session: &dyn Session,
    function: &str,
    location: &str,
    names: &[&str],
) -> Result<TableModel> {
    let options = TetConfig::of(session.config());
    if remote_url(location)?.is_some() {
        let (config, runtime) = (session.config(), session.runtime_env());
        return block_on(function, open_table(config, runtime, location, names, None));
    }
    let (sources, archive) = open_sources_blocking(session, function, location)?;
    let mut members = sources
        .into_iter()
        .map(|source| match names {
            [] => TableModel::from_source(source, None, options.limits()),
            [name] => TableModel::from_source(source, Some(name), options.limits()),
            _ => TableModel::from_datasets(source, names, options.limits()),
        })
        .collect::<Result<Vec<_>>>()?;
    match archive {
        true => combine(location, members, options.concat_axis()),
        false => members
            .pop()
            .ok_or_else(|| DataFusionError::Internal(format!("{location}: not opened"))),
    }
}

/// The table of one opened file.
async fn one_file(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<TableModel> {
    match names {
        [] => TableModel::for_source(source, None, limits).await,
        [name] => TableModel::for_source(source, Some(name), limits).await,
        _ => TableModel::for_datasets(source, names, limits).await,
    }
}

/// Whether a folder's subfolders are read: DataFusion's rule for `LOCATION 'dir/'`
/// (`datafusion.execution.listing_table_ignore_subdirectory`, on by default); `**`
/// recurses whatever it says.
fn recurse_folders(config: &SessionConfig) -> bool {
    !config.options().execution.listing_table_ignore_subdirectory
}

/// Open `location` for `session`: its object store registry and, when [`crate::register`]
/// installed one, its [`SourceCache`](crate::io::SourceCache).
pub async fn open_source(session: &dyn Session, location: &str) -> Result<Arc<TetSource>> {
    open_source_with(session.config(), session.runtime_env(), location).await
}

/// [`open_source`] from a session's parts.
pub async fn open_source_with(config: &SessionConfig, runtime: &RuntimeEnv, location: &str) -> Result<Arc<TetSource>> {
    let cache = TetConfig::source_cache(config);
    Ok(TetSource::open_in(runtime, cache.as_deref(), location).await?)
}

/// Run `fut` from synchronous planning code (table functions are synchronous in
/// DataFusion 55): on a multi-threaded tokio runtime the worker steps aside while it waits.
pub(crate) fn block_on<T>(what: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| h.block_on(fut)),
        _ => plan_err!(
            "{what} reads an object store while planning, which needs a multi-threaded tokio runtime; \
             use CREATE EXTERNAL TABLE ... STORED AS TET or TetTableProvider::open instead"
        ),
    }
}

//! Distributed SQL on Apache Ballista (feature `ballista`).
//!
//! The same queries as a local [`SessionContext`] with [`crate::register`], run by a
//! Ballista cluster: the client plans (the aggregate pushdown is a logical rewrite, so it
//! survives), the scheduler reopens each file to split it into chunk tasks, executors read
//! only the chunks of their tasks. Every process must reach the files by the same
//! location: a path on a shared file system, or an object store URL (stores come from the
//! environment, as in `tet-sql`; see [`crate::io::EnvObjectStoreRegistry`]).
//!
//! ```no_run
//! # async fn demo() -> datafusion::error::Result<()> {
//! // tet-ballista-scheduler --bind-port 50050 and some tet-ballista-executor are running.
//! let ctx = datafusion_tet::ballista::session("df://localhost:50050").await?;
//! ctx.sql("SELECT lat, avg(v) FROM tet('/shared/weather.tet', 'temp') GROUP BY lat")
//!     .await?
//!     .show()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Pieces: [`TetLogicalExtensionCodec`] / [`TetPhysicalExtensionCodec`] carry our tables and plans;
//! [`session_config`] and [`session_state`] build the sessions of all three roles;
//! [`scheduler_config`] and [`executor_config`] wire them into Ballista's scheduler and
//! executor (the `tet-ballista-scheduler` and `tet-ballista-executor` binaries);
//! [`allow_executor_locations`] / [`allow_scheduler_locations`] restrict the files they
//! open (`--tet-allow-location`).

mod wire;

pub use wire::{
    AccessNode, AggSpecNode, AggregateNode, AggregateTableNode, AggregationNode, AxisRanges, FileRef, MAGIC,
    MetadataNode, ScanNode, TetLogicalExtensionCodec, TetNode, TetPhysicalExtensionCodec, WIRE_VERSION, decode_node,
    node,
};

use crate::io::{AllowedLocations, EnvObjectStoreRegistry, SourceCache};
use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::ExecutorProcessConfig;
use ballista_scheduler::config::SchedulerConfig;
use datafusion::common::Result;
use datafusion::execution::SessionState;
use datafusion::execution::object_store::DefaultObjectStoreRegistry;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::{Arc, LazyLock};

/// One object store registry and one source cache per process, shared by all sessions
/// (Ballista builds a session per job and per task).
static REGISTRY: LazyLock<Arc<EnvObjectStoreRegistry>> =
    LazyLock::new(|| Arc::new(EnvObjectStoreRegistry::new(Arc::new(DefaultObjectStoreRegistry::new()))));
static SOURCES: LazyLock<Arc<SourceCache>> = LazyLock::new(|| Arc::new(SourceCache::default()));

/// Ballista's session configuration with our codecs, the `tet.*` options and the
/// process's [`SourceCache`].
pub fn session_config() -> SessionConfig {
    with_codecs(SessionConfig::new_with_ballista())
}

fn with_codecs(config: SessionConfig) -> SessionConfig {
    let mut config = config
        .with_ballista_logical_extension_codec(Arc::new(TetLogicalExtensionCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(TetPhysicalExtensionCodec::default()))
        .with_extension(SOURCES.clone());
    crate::with_tet_options(&mut config);
    // Executors run a stage's partitions apart: the pushdown's scan emits partial states
    // per partition and a merge stage combines them.
    if let Some(tet) = config.options_mut().extensions.get_mut::<crate::sql::TetConfig>() {
        tet.merge_in_scan = false;
    }
    config
}

/// A runtime whose object stores come from the environment (`AWS_*`, `GOOGLE_*`,
/// `AZURE_*`), with spill files under `temp_dir` when given.
pub fn runtime_env(temp_dir: Option<&str>) -> Result<Arc<RuntimeEnv>> {
    let mut rt = RuntimeEnvBuilder::new().with_object_store_registry(REGISTRY.clone());
    if let Some(dir) = temp_dir {
        rt = rt.with_temp_file_path(dir);
    }
    rt.build_arc()
}

/// Ballista's default session for `config`, with [`crate::register_state`] applied and
/// object stores from the environment: the session builder of our scheduler, and the
/// client's starting point.
pub fn session_state(config: SessionConfig) -> Result<SessionState> {
    let state = ballista_core::utils::default_session_builder(with_codecs(config))?;
    let state = SessionStateBuilder::new_from_existing(state)
        .with_runtime_env(runtime_env(None)?)
        .build();
    Ok(crate::register_state(state))
}

/// A client session that sends every query to the Ballista scheduler at `url`
/// (`df://host:port`).
pub async fn session(url: &str) -> Result<SessionContext> {
    connect(session_state(session_config())?, url).await
}

/// Turn an existing session (its options, object stores and registrations are kept)
/// into a client of the scheduler at `url`. [`crate::register`] may be applied before or
/// after.
pub async fn connect(state: SessionState, url: &str) -> Result<SessionContext> {
    let config = with_codecs(state.config().clone());
    let state = SessionStateBuilder::new_from_existing(state)
        .with_config(config)
        .build();
    SessionContext::remote_with_state(url, state).await
}

/// An in-process scheduler and executor (Ballista's standalone mode) with our session
/// setup: the distributed code path without processes, for tests and trials.
pub async fn standalone() -> Result<SessionContext> {
    SessionContext::standalone_with_state(session_state(session_config())?).await
}

/// `config` with our codecs and session setup: what `tet-ballista-scheduler` runs.
pub fn scheduler_config(config: SchedulerConfig) -> SchedulerConfig {
    let mut config = config
        .with_override_config_producer(Arc::new(session_config))
        .with_override_session_builder(Arc::new(session_state));
    config.override_logical_codec = Some(Arc::new(TetLogicalExtensionCodec::default()));
    config.override_physical_codec = Some(Arc::new(TetPhysicalExtensionCodec::default()));
    config
}

/// `config` with our codecs, session options, merge functions and object stores: what
/// `tet-ballista-executor` runs. Spill files go to the executor's work directory.
pub fn executor_config(mut config: ExecutorProcessConfig) -> ExecutorProcessConfig {
    let work_dir = config.work_dir.clone();
    config.override_config_producer = Some(Arc::new(session_config));
    config.override_runtime_producer = Some(Arc::new(move |_: &SessionConfig| runtime_env(work_dir.as_deref())));
    config.override_logical_codec = Some(Arc::new(TetLogicalExtensionCodec::default()));
    config.override_physical_codec = Some(Arc::new(TetPhysicalExtensionCodec::default()));
    let mut functions = BallistaFunctionRegistry::default();
    for f in crate::sql::merge_functions() {
        functions.aggregate_functions.insert(f.name().to_owned(), Arc::new(f));
    }
    config.override_function_registry = Some(Arc::new(functions));
    config
}

/// The flag of our cluster binaries that restricts the files a process opens for plans:
/// `--tet-allow-location DIR_OR_URL_PREFIX`, repeatable, added to Ballista's `command`.
pub fn with_allow_location_flag(command: clap::Command) -> clap::Command {
    command.arg(
        clap::Arg::new(ALLOW_LOCATION)
            .long(ALLOW_LOCATION)
            .value_name("DIR_OR_URL_PREFIX")
            .action(clap::ArgAction::Append)
            .help(
                "Open only files under this directory or URL prefix (repeatable); plans naming \
                 other files fail. Default: no restriction",
            ),
    )
}

/// What `--tet-allow-location` gave (`None` when it was not given), taken out of `matches`.
pub fn allowed_locations(matches: &mut clap::ArgMatches) -> Result<Option<AllowedLocations>> {
    let given: Vec<String> = matches
        .remove_many(ALLOW_LOCATION)
        .map(Iterator::collect)
        .unwrap_or_default();
    if given.is_empty() {
        return Ok(None);
    }
    let allowed = AllowedLocations::new(&given)
        .map_err(|e| datafusion::error::DataFusionError::Configuration(format!("--{ALLOW_LOCATION}: {e}")))?;
    Ok(Some(allowed))
}

const ALLOW_LOCATION: &str = "tet-allow-location";

/// The session configuration of a process that opens only what `allowed` permits.
fn restricted_config(allowed: &Arc<AllowedLocations>) -> SessionConfig {
    session_config().with_extension(allowed.clone())
}

/// `config` (from [`executor_config`]) opening only the files `allowed` permits: tasks
/// whose plans name any other location are refused ("a plan names a file outside the
/// locations this process allows", in the executor's log; Ballista reports the job as
/// rejected). Off by default: an executor opens whatever location a plan names, with its
/// own permissions.
pub fn allow_executor_locations(mut config: ExecutorProcessConfig, allowed: AllowedLocations) -> ExecutorProcessConfig {
    let allowed = Arc::new(allowed);
    config.override_config_producer = Some(Arc::new(move || restricted_config(&allowed)));
    config
}

/// `config` (from [`scheduler_config`]) planning only over files `allowed` permits: a
/// query naming another location fails with that message to the client.
pub fn allow_scheduler_locations(config: SchedulerConfig, allowed: AllowedLocations) -> SchedulerConfig {
    let allowed = Arc::new(allowed);
    config.with_override_config_producer(Arc::new(move || restricted_config(&allowed)))
}

/// Logging for the cluster binaries, as Ballista's stock binaries do it: `RUST_LOG` or
/// `default_filter` (their `--log-level-setting`), to stdout or to files named `prefix*`
/// under `log_dir`, rotated by `rotation`.
pub fn init_logging(
    default_filter: &str,
    log_dir: Option<&str>,
    prefix: &str,
    rotation: ballista_core::config::LogRotationPolicy,
    thread_info: bool,
) {
    use ballista_core::config::LogRotationPolicy as P;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::new(std::env::var(EnvFilter::DEFAULT_ENV).unwrap_or_else(|_| default_filter.to_owned()));
    let fmt = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_thread_names(thread_info)
        .with_thread_ids(thread_info)
        .with_env_filter(filter);
    match log_dir {
        Some(dir) => {
            let appender = match rotation {
                P::Minutely => tracing_appender::rolling::minutely(dir, prefix),
                P::Hourly => tracing_appender::rolling::hourly(dir, prefix),
                P::Daily => tracing_appender::rolling::daily(dir, prefix),
                P::Never => tracing_appender::rolling::never(dir, prefix),
            };
            fmt.with_writer(appender).init();
        }
        None => fmt.with_writer(std::io::stdout).init(),
    }
}

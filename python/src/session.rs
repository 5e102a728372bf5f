//! The process side of the bindings: one tokio runtime, one runtime environment (object
//! stores built from the environment, as tet-sql's), one cache of opened files, and the
//! sessions our code plans and scans in, made from the host session's options.
//!
//! The host (datafusion-python) hands us its session through the FFI as a copy of its
//! options: no object stores, no extensions of ours. So every call into this crate's
//! tables, functions and factory runs in a [`SessionState`] built here: the host's
//! `datafusion.*` options, the `tet.*` options (the host's, when it holds them as an FFI
//! extension, see [`tet_options_capsule`](crate::TetOptions), then the table's own), our
//! runtime environment and our [`SourceCache`].

use datafusion::common::config::{ConfigExtension, ExtensionOptions};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_ffi::config::extension_options::FFI_ExtensionOptions;
use datafusion_tet::io::{EnvObjectStoreRegistry, SourceCache};
use datafusion_tet::sql::TetConfig;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, LazyLock};
use tokio::runtime::{Handle, Runtime};

/// The runtime our plans run on (the FFI enters it around every call into a plan).
static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("datafusion-tet")
        .enable_all()
        .build()
        .expect("a tokio runtime")
});

/// Object stores from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, http), built on
/// first use of each bucket, as in tet-sql.
static RUNTIME_ENV: LazyLock<Arc<RuntimeEnv>> = LazyLock::new(|| {
    RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(EnvObjectStoreRegistry::default()))
        .build_arc()
        .expect("a runtime environment")
});

/// Files opened in this process, shared by every session of it.
static SOURCE_CACHE: LazyLock<Arc<SourceCache>> = LazyLock::new(|| Arc::new(SourceCache::default()));

/// A handle of our runtime, for the FFI wrappers.
pub fn handle() -> Handle {
    RUNTIME.handle().clone()
}

/// Run `fut` to completion from synchronous code (a Python call, a table function).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    match Handle::try_current() {
        Ok(h) => tokio::task::block_in_place(|| h.block_on(fut)),
        Err(_) => RUNTIME.block_on(fut),
    }
}

/// Run `fut` on our runtime and wait for it from any executor (the host's): our code
/// finds our runtime (tokio of this library is not the host's), and a panic becomes an
/// error instead of unwinding through the FFI.
pub async fn on_runtime<T: Send + 'static>(fut: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
    match RUNTIME.spawn(fut).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => Err(DataFusionError::Execution(format!(
            "datafusion-tet panicked: {}",
            panic_text(e.into_panic())
        ))),
        Err(e) => Err(DataFusionError::Execution(format!("datafusion-tet task failed: {e}"))),
    }
}

/// Call `f`, making a panic an error (nothing may unwind into the host).
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(DataFusionError::Execution(format!(
            "datafusion-tet panicked in {what}: {}",
            panic_text(p)
        ))),
    }
}

/// The message of a panic payload.
pub fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_else(|| "(no message)".into()),
    }
}

/// `tet.*` options given as `(key, value)`, the key with or without its `tet.` prefix.
pub type TetOverrides = Vec<(String, String)>;

/// The `tet.*` options of a host session: its own [`TetConfig`] when it is one of ours,
/// else the `tet.*` entries of its FFI extension options (a host made with
/// `SessionConfig().with_extension(TetOptions())`), else the defaults; then `overrides`.
/// An unknown key or a bad value is an error, not a silent default.
pub fn tet_config(host: Option<&SessionConfig>, overrides: &[(String, String)]) -> Result<TetConfig> {
    let mut config = TetConfig::default();
    if let Some(host) = host {
        let options = host.options();
        if let Some(own) = options.extensions.get::<TetConfig>() {
            config = own.clone();
        } else if let Some(ffi) = options.extensions.get::<FFI_ExtensionOptions>() {
            for entry in ffi.entries() {
                let Some(value) = entry.value else { continue };
                let key = entry.key.strip_prefix("datafusion_ffi.").unwrap_or(&entry.key);
                if let Some(key) = key.strip_prefix("tet.") {
                    ExtensionOptions::set(&mut config, key, &value)?;
                }
            }
        }
    }
    for (key, value) in overrides {
        let key = key.strip_prefix("tet.").unwrap_or(key);
        ExtensionOptions::set(&mut config, key, value)
            .map_err(|e| DataFusionError::Configuration(format!("option tet.{key} = {value:?}: {e}")))?;
    }
    Ok(config)
}

/// The session our code runs in for a host session (`None`: a Python call outside any
/// session): the host's `datafusion.*` options, the `tet.*` options of [`tet_config`],
/// DataFusion's default functions, our object stores and our cache of opened files.
pub fn local_state(host: Option<&SessionConfig>, overrides: &[(String, String)]) -> Result<SessionState> {
    let tet = tet_config(host, overrides)?;
    let mut config = match host {
        Some(h) => SessionConfig::from(h.options().as_ref().clone()),
        None => SessionConfig::new(),
    };
    config.options_mut().extensions.insert(tet);
    let config = config.with_extension(SOURCE_CACHE.clone());
    Ok(SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(RUNTIME_ENV.clone())
        .with_default_features()
        .build())
}

/// A context of this crate's own (its rules, its fold, its functions) for planning SQL,
/// from [`local_state`].
pub fn local_context(host: Option<&SessionConfig>, overrides: &[(String, String)]) -> Result<SessionContext> {
    let ctx = SessionContext::new_with_state(local_state(host, overrides)?);
    datafusion_tet::register(&ctx);
    Ok(ctx)
}

/// The keys a [`TetConfig`] takes (for messages and the Python side).
pub fn tet_option_keys() -> Vec<String> {
    TetConfig::default()
        .entries()
        .into_iter()
        .map(|e| format!("{}.{}", TetConfig::PREFIX, e.key.trim_start_matches("tet.")))
        .collect()
}

/// Enter our runtime on this thread unless some runtime of ours is current (synchronous
/// code of ours that waits on object stores finds it).
pub fn handle_enter() -> Option<tokio::runtime::EnterGuard<'static>> {
    match Handle::try_current() {
        Ok(_) => None,
        Err(_) => Some(RUNTIME.enter()),
    }
}

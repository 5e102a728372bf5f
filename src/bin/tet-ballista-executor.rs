//! `tet-ballista-executor`: Ballista 55's executor with the `.tet` codecs, merge
//! functions and object stores from the environment. Flags are those of Ballista's
//! `ballista-executor` (`--scheduler-host`, `--scheduler-port`, `--bind-host`,
//! `--bind-port`, `--bind-grpc-port`, `--work-dir`, `--concurrent-tasks`, ...; see
//! `--help`), plus `--tet-allow-location DIR_OR_URL_PREFIX` (repeatable): open only files
//! under these directories or URL prefixes, whatever a plan names (see
//! `datafusion_tet::io::AllowedLocations`; default: no restriction).

use ballista_core::error::BallistaError;
use ballista_executor::config::Config;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::health::spawn_health_server;
use clap::{CommandFactory, FromArgMatches};
use std::net::SocketAddr;
use std::sync::Arc;

// Ballista's own executor binary's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ballista_core::error::Result<()> {
    let mut matches = datafusion_tet::ballista::with_allow_location_flag(Config::command()).get_matches();
    let allowed = datafusion_tet::ballista::allowed_locations(&mut matches)?;
    let opt = Config::from_arg_matches(&matches).map_err(|e| BallistaError::General(e.to_string()))?;
    let health_addr = format!("{}:{}", opt.bind_host, opt.bind_health_port);
    let config: ExecutorProcessConfig = opt.try_into()?;
    let mut config = datafusion_tet::ballista::executor_config(config);
    if let Some(allowed) = allowed {
        config = datafusion_tet::ballista::allow_executor_locations(config, allowed);
    }
    datafusion_tet::ballista::init_logging(
        &config.special_mod_log_level,
        config.log_dir.as_deref(),
        &config.log_file_name_prefix(),
        config.log_rotation_policy,
        config.print_thread_info,
    );
    let health_addr: SocketAddr = health_addr
        .parse()
        .map_err(|e| BallistaError::General(format!("--bind-host/--bind-health-port: {e}")))?;
    // Liveness and readiness probes, as the stock binary serves them.
    let (stop_health, stopped) = tokio::sync::oneshot::channel();
    let health = spawn_health_server(health_addr, config.health.clone(), stopped);
    let result = start_executor_process(Arc::new(config)).await;
    let _ = stop_health.send(());
    if let Err(e) = health.await {
        eprintln!("health server: {e}");
    }
    result
}

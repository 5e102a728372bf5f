//! `tet-ballista-scheduler`: Ballista 55's scheduler with the `.tet` codecs and session
//! setup (`tet()`, `STORED AS TET`, the aggregate pushdown, object stores from the
//! environment). Flags are those of Ballista's `ballista-scheduler` (`--bind-host`,
//! `--bind-port`, ...; see `--help`), plus `--tet-allow-location DIR_OR_URL_PREFIX`
//! (repeatable): plan only over files under these directories or URL prefixes (see
//! `datafusion_tet::io::AllowedLocations`; default: no restriction).

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{Config, SchedulerConfig};
use ballista_scheduler::scheduler_process::start_server;
use clap::{CommandFactory, FromArgMatches};
use std::net::SocketAddr;
use std::sync::Arc;

fn main() -> ballista_core::error::Result<()> {
    // Ballista's stock scheduler runs its planner on threads with 32 MiB stacks.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build()?;
    runtime.block_on(run())
}

async fn run() -> ballista_core::error::Result<()> {
    let mut matches = datafusion_tet::ballista::with_allow_location_flag(Config::command()).get_matches();
    let allowed = datafusion_tet::ballista::allowed_locations(&mut matches)?;
    let opt = Config::from_arg_matches(&matches)
        .map_err(|e| ballista_core::error::BallistaError::Configuration(e.to_string()))?;
    datafusion_tet::ballista::init_logging(
        &opt.log_level_setting,
        opt.log_dir.as_deref(),
        &format!("scheduler_{}_{}_{}", opt.namespace, opt.external_host, opt.bind_port),
        opt.log_rotation_policy,
        opt.print_thread_info,
    );
    let addr: SocketAddr = format!("{}:{}", opt.bind_host, opt.bind_port)
        .parse()
        .map_err(|e| ballista_core::error::BallistaError::Configuration(format!("--bind-host/--bind-port: {e}")))?;
    let config: SchedulerConfig = opt.try_into()?;
    let mut config = datafusion_tet::ballista::scheduler_config(config);
    if let Some(allowed) = allowed {
        config = datafusion_tet::ballista::allow_scheduler_locations(config, allowed);
    }
    let cluster = BallistaCluster::new_from_config(&config).await?;
    start_server(cluster, addr, Arc::new(config)).await
}

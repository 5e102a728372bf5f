//! `tet-sql`: datafusion-cli 55 with the `.tet` registrations (`tet()`, `tet_datasets()`,
//! `tet_chunks()`, `STORED AS TET`) and `tet_demo_file(path)`, which writes the demo file.
//!
//! Flags are datafusion-cli's: `-c`, `-f`, `-r`, `-p`, `-b`, `-m`, `-d`, `--format`, `-q`,
//! `--maxrows`, `--color`, `--mem-pool-type`, `--top-memory-consumers`,
//! `--object-store-profiling`; with the `ballista` feature, `--ballista df://HOST:PORT`
//! sends every query to a Ballista cluster.

#[path = "tet-sql/demo.rs"]
mod demo;

use clap::Parser;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionConfig;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, GreedyMemoryPool, MemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::ExplainFormat;
use datafusion::prelude::SessionContext;
use datafusion_cli::catalog::DynamicObjectStoreCatalog;
use datafusion_cli::object_storage::instrumented::{InstrumentedObjectStoreMode, InstrumentedObjectStoreRegistry};
use datafusion_cli::pool_type::PoolType;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};
use datafusion_cli::{DATAFUSION_CLI_VERSION, exec};
use std::num::NonZeroUsize;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

// datafusion-cli's allocator: planning allocates many small objects per query, which
// glibc's malloc served measurably slower (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[clap(
    name = "tet-sql",
    version,
    about = "SQL over .tet files (datafusion-cli with .tet support)"
)]
struct Args {
    #[clap(
        short = 'p',
        long,
        help = "Path to your data, default to current directory",
        value_parser(valid_dir)
    )]
    data_path: Option<String>,
    #[clap(
        short = 'b',
        long,
        help = "The batch size of each query, or use DataFusion default",
        value_parser(batch_size)
    )]
    batch_size: Option<usize>,
    #[clap(short = 'c', long, num_args = 0.., help = "Execute the given command string(s), then exit", value_parser(non_empty))]
    command: Vec<String>,
    #[clap(
        short = 'm',
        long,
        help = "The memory pool limitation (e.g. '10g'), default to None (no limit)",
        value_parser(byte_size)
    )]
    memory_limit: Option<usize>,
    #[clap(short, long, num_args = 0.., help = "Execute commands from file(s), then exit", value_parser(valid_file))]
    file: Vec<String>,
    #[clap(short = 'r', long, num_args = 0.., help = "Run the provided files on startup instead of ~/.datafusionrc", value_parser(valid_file), conflicts_with = "file")]
    rc: Option<Vec<String>>,
    #[clap(long, value_enum, default_value_t = PrintFormat::Automatic)]
    format: PrintFormat,
    #[clap(short, long, help = "Reduce printing other than the results and work quietly")]
    quiet: bool,
    #[clap(long, help = "Specify the memory pool type 'greedy' or 'fair'", default_value_t = PoolType::Greedy)]
    mem_pool_type: PoolType,
    #[clap(
        long,
        help = "The number of top memory consumers to display when query fails due to memory exhaustion",
        default_value = "3"
    )]
    top_memory_consumers: usize,
    #[clap(
        long,
        help = "The max number of rows to display for 'Table' format\n[possible values: numbers(0/10/...), inf(no limit)]",
        default_value = "40"
    )]
    maxrows: MaxRows,
    #[clap(long, help = "Enables console syntax highlighting")]
    color: bool,
    #[clap(
        short = 'd',
        long,
        help = "Available disk space for spilling queries (e.g. '10g')",
        value_parser(byte_size)
    )]
    disk_limit: Option<usize>,
    #[clap(long, help = "Default object_store_profiling mode: disabled, summary, trace", default_value_t = InstrumentedObjectStoreMode::Disabled)]
    object_store_profiling: InstrumentedObjectStoreMode,
    #[cfg(feature = "ballista")]
    #[clap(
        long,
        value_name = "df://HOST:PORT",
        help = "Run every query on the Ballista cluster whose scheduler (tet-ballista-scheduler) listens there"
    )]
    ballista: Option<String>,
}

fn valid_file(p: &str) -> Result<String, String> {
    if Path::new(p).is_file() {
        Ok(p.to_string())
    } else {
        Err(format!("Invalid file '{p}'"))
    }
}
fn valid_dir(p: &str) -> Result<String, String> {
    if Path::new(p).is_dir() {
        Ok(p.to_string())
    } else {
        Err(format!("Invalid data directory '{p}'"))
    }
}
fn batch_size(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("Invalid batch size '{s}'")),
    }
}
fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("-c flag expects only non empty commands".into())
    } else {
        Ok(s.to_string())
    }
}
fn byte_size(s: &str) -> Result<usize, String> {
    let lower = s.to_lowercase();
    let digits = lower.chars().take_while(|c| c.is_ascii_digit()).count();
    let (num, unit) = lower.split_at(digits);
    let n: usize = num.parse().map_err(|_| format!("Invalid size '{s}'"))?;
    let mult: usize = match unit {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        _ => return Err(format!("Invalid size '{s}'")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let args = Args::parse();
    if !args.quiet {
        println!(
            "tet-sql {} (DataFusion CLI v{DATAFUSION_CLI_VERSION})",
            env!("CARGO_PKG_VERSION")
        );
    }
    if let Some(p) = &args.data_path {
        std::env::set_current_dir(p)?;
    }
    let mut config = ConfigOptions::from_env()?;
    if let Some(b) = args.batch_size {
        config.execution.batch_size = datafusion::common::config::ConfigNonZeroUsize::try_new(b)?;
    }
    if std::env::var_os("DATAFUSION_EXPLAIN_FORMAT").is_none() {
        config.explain.format = ExplainFormat::Tree;
    }
    if std::env::var_os("DATAFUSION_FORMAT_NULL").is_none() {
        config.format.null = String::from("NULL");
    }
    let session_config = SessionConfig::from(config).with_information_schema(true);

    let mut rt = RuntimeEnvBuilder::new();
    if let Some(limit) = args.memory_limit {
        let pool: Arc<dyn MemoryPool> = match (args.mem_pool_type.clone(), NonZeroUsize::new(args.top_memory_consumers))
        {
            (PoolType::Fair, None) => Arc::new(FairSpillPool::new(limit)),
            (PoolType::Fair, Some(n)) => Arc::new(TrackConsumersPool::new(FairSpillPool::new(limit), n)),
            (PoolType::Greedy, None) => Arc::new(GreedyMemoryPool::new(limit)),
            (PoolType::Greedy, Some(n)) => Arc::new(TrackConsumersPool::new(GreedyMemoryPool::new(limit), n)),
        };
        rt = rt.with_memory_pool(pool);
    }
    if let Some(limit) = args.disk_limit {
        let dm = DiskManagerBuilder::default()
            .with_mode(DiskManagerMode::OsTmpDirectory)
            .with_max_temp_directory_size(limit as u64);
        rt = rt.with_disk_manager_builder(dm);
    }
    let registry = Arc::new(InstrumentedObjectStoreRegistry::new().with_profile_mode(args.object_store_profiling));
    // Stores nobody registered (e.g. the URL inside `tet('s3://…')`) come from the environment.
    rt = rt.with_object_store_registry(Arc::new(datafusion_tet::io::EnvObjectStoreRegistry::new(
        registry.clone(),
    )));
    let ctx = SessionContext::new_with_config_rt(session_config, rt.build_arc()?).enable_url_table();
    #[cfg(feature = "ballista")]
    let ctx = match &args.ballista {
        Some(url) => datafusion_tet::ballista::connect(ctx.state(), url).await?,
        None => ctx,
    };
    ctx.refresh_catalogs().await?;
    ctx.register_catalog_list(Arc::new(DynamicObjectStoreCatalog::new(
        ctx.state().catalog_list().clone(),
        ctx.state_weak_ref(),
    )));
    datafusion_tet::register(&ctx);
    ctx.register_udtf("tet_demo_file", Arc::new(demo::DemoFileFunction));

    let mut print_options = PrintOptions {
        format: args.format,
        quiet: args.quiet,
        maxrows: args.maxrows,
        color: args.color,
        instrumented_registry: registry,
    };
    let rc = match args.rc {
        Some(f) => f,
        None => std::env::home_dir()
            .map(|h| h.join(".datafusionrc"))
            .filter(|p| p.exists())
            .map(|p| vec![p.display().to_string()])
            .unwrap_or_default(),
    };
    if args.command.is_empty() && args.file.is_empty() {
        if !rc.is_empty() {
            exec::exec_from_files(&ctx, rc, &print_options).await?;
        }
        return exec::exec_from_repl(&ctx, &mut print_options)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)));
    }
    if !args.file.is_empty() {
        exec::exec_from_files(&ctx, args.file, &print_options).await?;
    }
    if !args.command.is_empty() {
        exec::exec_from_commands(&ctx, args.command, &print_options).await?;
    }
    Ok(())
}

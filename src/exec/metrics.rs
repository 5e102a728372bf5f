//! The metrics of each node, one struct per node, built on DataFusion's
//! [`BaselineMetrics`] (`output_rows`, `elapsed_compute`) plus ours. `EXPLAIN ANALYZE`
//! sums them over partitions; plan-level counts are recorded by partition 0 alone.

use crate::plan::PruningCounts;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use std::time::Instant;

/// Adds the time from its start to its drop to every timer of `timers`, reading the clock
/// once at each end (one [`Time::timer`] per timer reads it twice per timer; the folds
/// stop it once per chunk).
#[derive(Debug)]
pub struct Stopwatch<'a> {
    timers: &'a [Time],
    start: Instant,
}

impl<'a> Stopwatch<'a> {
    /// Start timing into `timers`.
    pub fn start(timers: &'a [Time]) -> Self {
        Stopwatch {
            timers,
            start: Instant::now(),
        }
    }
}

impl Drop for Stopwatch<'_> {
    fn drop(&mut self) {
        let elapsed = self.start.elapsed();
        for t in self.timers {
            t.add_duration(elapsed);
        }
    }
}

/// Object store traffic of one partition (`requests`, `bytes_fetched`); only nodes over
/// object store files have it.
#[derive(Debug, Clone)]
pub struct FetchMetrics {
    requests: Count,
    bytes_fetched: Count,
}

impl FetchMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        FetchMetrics {
            requests: MetricBuilder::new(set).counter("requests", partition),
            bytes_fetched: MetricBuilder::new(set).counter("bytes_fetched", partition),
        }
    }

    /// Count `requests` requests that brought `bytes` bytes.
    pub fn record(&self, requests: u64, bytes: u64) {
        self.requests.add(requests as usize);
        self.bytes_fetched.add(bytes as usize);
    }
}

/// Chunks and bytes read by one partition.
#[derive(Debug, Clone)]
pub struct ReadMetrics {
    /// Chunks whose payload was read.
    pub chunks_read: Count,
    /// Stored bytes of those chunks.
    pub bytes_read: Count,
    /// Object store traffic (object store files only).
    pub fetch: Option<FetchMetrics>,
}

impl ReadMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize, pruning: &PruningCounts, remote: bool) -> Self {
        // Plan-level figures, once (EXPLAIN ANALYZE sums partitions).
        let total = MetricBuilder::new(set).counter("chunks_total", partition);
        let pruned = MetricBuilder::new(set).counter("chunks_pruned_by_zone", partition);
        if partition == 0 {
            total.add(pruning.chunks_total as usize);
            pruned.add(pruning.pruned_by_zone as usize);
        }
        ReadMetrics {
            chunks_read: MetricBuilder::new(set).counter("chunks_read", partition),
            bytes_read: MetricBuilder::new(set).counter("bytes_read", partition),
            fetch: remote.then(|| FetchMetrics::new(set, partition)),
        }
    }

    /// One chunk of `stored` bytes read.
    pub fn chunk(&self, stored: u64) {
        self.chunks_read.add(1);
        self.bytes_read.add(stored as usize);
    }
}

/// Metrics of one partition of `TetScanExec`.
#[derive(Debug)]
pub struct ScanMetrics {
    pub baseline: BaselineMetrics,
    pub read: ReadMetrics,
    /// Rows emitted (the same figure as `output_rows`, kept under its earlier name).
    pub rows_emitted: Count,
    /// Time decoding payloads into value columns.
    pub decode_time: Time,
}

impl ScanMetrics {
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize, pruning: &PruningCounts, remote: bool) -> Self {
        ScanMetrics {
            baseline: BaselineMetrics::new(set, partition),
            read: ReadMetrics::new(set, partition, pruning, remote),
            rows_emitted: MetricBuilder::new(set).counter("rows_emitted", partition),
            decode_time: MetricBuilder::new(set).subset_time("decode_time", partition),
        }
    }
}

/// Metrics of one partition of `TetAggregateExec`.
#[derive(Debug)]
pub struct AggregateMetrics {
    pub baseline: BaselineMetrics,
    pub read: ReadMetrics,
    /// What decoding and folding a chunk adds to ([`Stopwatch`]): the node's `fold_time`
    /// and the baseline's `elapsed_compute`.
    pub fold_timers: [Time; 2],
}

impl AggregateMetrics {
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize, pruning: &PruningCounts, remote: bool) -> Self {
        let baseline = BaselineMetrics::new(set, partition);
        let fold_time = MetricBuilder::new(set).subset_time("fold_time", partition);
        AggregateMetrics {
            fold_timers: [fold_time, baseline.elapsed_compute().clone()],
            read: ReadMetrics::new(set, partition, pruning, remote),
            baseline,
        }
    }
}

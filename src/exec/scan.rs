//! [`TetScanExec`]: emits the selected cells of a dataset as Arrow batches.
//!
//! Each output partition walks its own list of chunk tasks (chunk-aligned, balanced by
//! bytes at plan time). Per chunk: the stored span is taken from the source (a zero-copy
//! slice of the mmap for local files), zstd chunks are decoded, the selected sub-box
//! becomes the value column (the whole tile is shared with Arrow when fully selected and
//! raw), and axis columns are computed from positions. Batches hold at most `batch_size`
//! rows; a pushed limit stops each partition early. When `v` is not projected no payload
//! is touched.

use super::ChunkFeed;
use super::Payload;
use super::cells::{axis_positions, value_array};
use crate::format::codec;
use crate::io::TetSource;
use crate::plan::{AxisSelection, ChunkTask};
use crate::sql::axes::Axis;
use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::fmt;
use std::sync::Arc;

/// What the planner decided, kept for display and statistics.
#[derive(Debug, Clone)]
pub struct ScanSummary {
    /// Chunks in the dataset.
    pub chunks_total: u64,
    /// Chunks left after zone-map pruning.
    pub chunks_selected: u64,
    /// Chunks skipped because their zone maps rule out every pushed value predicate.
    pub chunks_pruned_by_zone: u64,
    /// Per-axis selection, e.g. `time: 1/100`.
    pub selection: Vec<String>,
    /// Per axis, the selected positions the chunk tasks were cut from.
    pub axis_selection: Vec<AxisSelection>,
    /// Whether a value predicate was pushed (then statistics are inexact).
    pub value_filters: bool,
    /// Statistics reported to DataFusion.
    pub statistics: Statistics,
}

/// Scans the selected cells of one dataset.
#[derive(Debug)]
pub struct TetScanExec {
    source: Arc<TetSource>,
    dataset: usize,
    axes: Arc<Vec<Axis>>,
    /// Indices into the table schema (axes then `v`).
    projection: Vec<usize>,
    schema: SchemaRef,
    feed: ChunkFeed,
    limit: Option<usize>,
    summary: Arc<ScanSummary>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetScanExec {
    /// Build a scan. `projection` indexes the table schema (axes, then `v`); `schema` is
    /// the projected schema; `feed` says which chunks each partition reads.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: Arc<TetSource>,
        dataset: usize,
        axes: Arc<Vec<Axis>>,
        projection: Vec<usize>,
        schema: SchemaRef,
        feed: ChunkFeed,
        limit: Option<usize>,
        summary: ScanSummary,
    ) -> Self {
        TetScanExec {
            cache: Arc::new(Self::properties_for(&schema, &feed)),
            source,
            dataset,
            axes,
            projection,
            schema,
            feed,
            limit,
            summary: Arc::new(summary),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn properties_for(schema: &SchemaRef, feed: &ChunkFeed) -> PlanProperties {
        feed.properties(schema, EmissionType::Incremental)
    }

    /// The same scan over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetScanExec {
            source: self.source.clone(),
            dataset: self.dataset,
            axes: self.axes.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
            cache: Arc::new(Self::properties_for(&self.schema, &feed)),
            feed,
            limit: self.limit,
            summary: self.summary.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The planner's summary.
    pub fn summary(&self) -> &ScanSummary {
        &self.summary
    }

    /// The chunks read, and which partition reads which.
    pub fn feed(&self) -> &ChunkFeed {
        &self.feed
    }

    /// Indices into the table schema (axes, then `v`) of the emitted columns.
    pub fn projection(&self) -> &[usize] {
        &self.projection
    }

    /// Rows each partition stops after, when a limit was pushed.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The file scanned.
    pub fn source(&self) -> &Arc<TetSource> {
        &self.source
    }

    /// The dataset (directory position).
    pub fn dataset(&self) -> usize {
        self.dataset
    }

    fn describe(&self) -> String {
        let ds = &self.source.catalog.datasets[self.dataset];
        let cols: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        let mut s = format!(
            "file={}, dataset={}, projection=[{}], chunks={}/{}",
            self.source.location,
            ds.name(),
            cols.join(", "),
            self.summary.chunks_selected,
            self.summary.chunks_total
        );
        if !self.summary.selection.is_empty() {
            s.push_str(&format!(", selection=[{}]", self.summary.selection.join(", ")));
        }
        if self.summary.chunks_pruned_by_zone > 0 {
            s.push_str(&format!(", pruned_by_zone={}", self.summary.chunks_pruned_by_zone));
        }
        if let Some(l) = self.limit {
            s.push_str(&format!(", limit={l}"));
        }
        s
    }
}

impl DisplayAs for TetScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(f, "TetScanExec: {}", self.describe()),
            DisplayFormatType::TreeRender => {
                let ds = &self.source.catalog.datasets[self.dataset];
                writeln!(f, "file={}", self.source.location)?;
                writeln!(f, "dataset={}", ds.name())?;
                writeln!(
                    f,
                    "chunks={}/{}",
                    self.summary.chunks_selected, self.summary.chunks_total
                )?;
                for s in &self.summary.selection {
                    writeln!(f, "{s}")?;
                }
                if let Some(l) = self.limit {
                    writeln!(f, "limit={l}")?;
                }
                Ok(())
            }
        }
    }
}

impl ExecutionPlan for TetScanExec {
    chunk_plan_methods!("TetScanExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let m = &self.metrics;
        let metrics = ScanMetrics {
            chunks_read: MetricBuilder::new(m).counter("chunks_read", partition),
            bytes_read: MetricBuilder::new(m).counter("bytes_read", partition),
            rows_emitted: MetricBuilder::new(m).counter("rows_emitted", partition),
            decode_time: MetricBuilder::new(m).subset_time("decode_time", partition),
        };
        // Plan-level figures, once (EXPLAIN ANALYZE sums partitions).
        let total = MetricBuilder::new(m).counter("chunks_total", partition);
        let pruned = MetricBuilder::new(m).counter("chunks_pruned_by_zone", partition);
        if partition == 0 {
            total.add(self.summary.chunks_total as usize);
            pruned.add(self.summary.chunks_pruned_by_zone as usize);
        }
        let n = self.source.catalog.datasets[self.dataset].ndim();
        let payloads = super::feed_payloads(
            self.feed.clone(),
            partition,
            context.clone(),
            "TetScanExec",
            self.source.clone(),
            self.dataset,
            self.projection.contains(&n),
            self.source.is_remote().then(|| super::FetchMetrics::new(m, partition)),
        );
        let reader = PartitionReader {
            source: self.source.clone(),
            dataset: self.dataset,
            axes: self.axes.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
            batch_size: context.session_config().batch_size().max(1),
            remaining: self.limit.unwrap_or(usize::MAX),
            pending: std::collections::VecDeque::new(),
            metrics,
            failed: false,
        };
        let stream = futures::stream::unfold((payloads, reader), |(mut payloads, mut reader)| async move {
            let item = reader.next_batch(&mut payloads).await?;
            Some((item, (payloads, reader)))
        })
        .boxed();
        let adapter = RecordBatchStreamAdapter::new(self.schema.clone(), stream);
        Ok(Box::pin(datafusion::physical_plan::coop::cooperative(adapter)))
    }

    fn statistics_from_inputs(&self, _input: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        if args.partition().is_some() {
            return Ok(Arc::new(Statistics::new_unknown(&self.schema)));
        }
        let mut s = self.summary.statistics.clone();
        if self.limit.is_some() {
            s = s.to_inexact();
        }
        Ok(Arc::new(s))
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }
}

struct ScanMetrics {
    chunks_read: Count,
    bytes_read: Count,
    rows_emitted: Count,
    decode_time: Time,
}

/// The state of one partition: turns payloads into batches.
struct PartitionReader {
    source: Arc<TetSource>,
    dataset: usize,
    axes: Arc<Vec<Axis>>,
    projection: Vec<usize>,
    schema: SchemaRef,
    batch_size: usize,
    remaining: usize,
    pending: std::collections::VecDeque<RecordBatch>,
    metrics: ScanMetrics,
    failed: bool,
}

impl PartitionReader {
    /// The next batch, pulling payloads as needed; `None` at the end, after an error, or
    /// once the limit is reached.
    async fn next_batch(&mut self, payloads: &mut BoxStream<'static, Result<Payload>>) -> Option<Result<RecordBatch>> {
        loop {
            if self.failed || self.remaining == 0 {
                return None;
            }
            if let Some(b) = self.pending.pop_front() {
                let b = if b.num_rows() > self.remaining {
                    b.slice(0, self.remaining)
                } else {
                    b
                };
                self.remaining -= b.num_rows();
                self.metrics.rows_emitted.add(b.num_rows());
                return Some(Ok(b));
            }
            let next = payloads.next().await?;
            if let Err(e) = next.and_then(|(task, stored)| self.read_chunk(&task, stored)) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

impl PartitionReader {
    fn read_chunk(&mut self, task: &ChunkTask, stored: Option<Bytes>) -> Result<()> {
        let file = &self.source.catalog;
        let ds = &file.datasets[self.dataset];
        let n = ds.ndim();
        // Only as many cells as the limit still needs are materialised.
        let rows = (task.cells as usize).min(self.remaining);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.projection.len());
        let tile_start = task.tile_start(&ds.record.chunk_shape);
        for &c in &self.projection {
            if c < n {
                let pos = axis_positions(task, &tile_start, c);
                columns.push(self.axes[c].take(&pos[..rows])?);
            } else {
                let (row, entry) = file.chunk(ds, task.linear);
                let Some(stored) = stored.clone() else {
                    return internal_err!("TetScanExec: no payload fetched for chunk {}", task.linear);
                };
                self.metrics.chunks_read.add(1);
                self.metrics.bytes_read.add(entry.stored_byte_len as usize);
                let _timer = self.metrics.decode_time.timer();
                let tile = match entry.codec {
                    crate::format::Codec::Raw => Buffer::from(stored),
                    crate::format::Codec::Zstd => {
                        let mut out = Vec::new();
                        codec::precheck(row, entry, &stored)
                            .and_then(|_| {
                                out.resize(entry.raw_byte_len as usize, 0);
                                codec::decode_into(row, entry, &stored, &mut out)
                            })
                            .map_err(|e| DataFusionError::External(Box::new(e.in_file(&self.source.location))))?;
                        Buffer::from_vec(out)
                    }
                };
                let fill = ds.fill_value_le();
                let v = value_array(ds.dtype(), tile, task, fill.as_deref());
                columns.push(v.slice(0, rows));
            }
        }
        let mut offset = 0;
        while offset < rows {
            let len = self.batch_size.min(rows - offset);
            let cols = columns.iter().map(|c| c.slice(offset, len)).collect();
            let batch = RecordBatch::try_new_with_options(
                self.schema.clone(),
                cols,
                &RecordBatchOptions::new().with_row_count(Some(len)),
            )?;
            self.pending.push_back(batch);
            offset += len;
        }
        Ok(())
    }
}

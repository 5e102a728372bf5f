//! [`TetScanExec`]: emits the selected cells of a table (one dataset, or several on one
//! grid) as Arrow batches.
//!
//! Each output partition walks its own list of chunk tasks (chunk-aligned, balanced by
//! bytes at plan time). Per chunk: the stored span is taken from the source (a zero-copy
//! slice of the mmap for local files), zstd chunks are decoded, the selected sub-box
//! is cut into slabs of at most `batch_size` cells ([`ChunkTask::slabs`]), and each slab,
//! when asked for, becomes one batch: the value column (a slice of the tile, shared with
//! Arrow, when the slab is contiguous and the chunk raw) and axis columns computed from
//! positions. Work and memory follow the rows pulled: a `LIMIT 1` makes one batch of a
//! tile of any size. A pushed limit stops each partition early. Only the projected value
//! columns' payloads are read; with none, no payload is touched.

use crate::exec::feed::payload::{Payload, PayloadMetrics, PayloadRead, feed_payloads};
use crate::exec::feed::{ChunkFeed, chunk_node_methods};
use crate::exec::metrics::ScanMetrics;
use crate::exec::tile::{axis_positions, value_array};
use crate::io::FetchOptions;
use crate::plan::{ChunkTask, Slabs, TableModel, ordered_axes};
use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::buffer::Buffer;
use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::fmt;
use std::sync::Arc;

/// Scans the selected cells of one dataset.
#[derive(Debug)]
pub struct TetScanExec {
    table: Arc<TableModel>,
    /// Indices into the table schema (axes then `v`).
    projection: Vec<usize>,
    schema: SchemaRef,
    feed: ChunkFeed,
    limit: Option<usize>,
    fetch: FetchOptions,
    /// Statistics of the projected columns over the selection.
    statistics: Arc<Statistics>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetScanExec {
    /// Scan `projection` (indices into the table schema: axes, then `v`) of the cells
    /// `feed` plans, each partition stopping after `limit` rows; object store payloads
    /// are read as `fetch` says.
    pub fn try_new(
        table: Arc<TableModel>,
        feed: ChunkFeed,
        projection: Vec<usize>,
        limit: Option<usize>,
        fetch: FetchOptions,
    ) -> Result<Self> {
        let columns = table.schema.fields().len();
        if let Some(&bad) = projection.iter().find(|&&i| i >= columns) {
            return internal_err!("TetScanExec: column {bad} of a {columns}-column table");
        }
        let schema = Arc::new(table.schema.project(&projection)?);
        let access = &feed.access;
        let statistics = table
            .statistics(&access.selection, !access.value_filters)?
            .project(Some(&projection));
        Ok(TetScanExec {
            cache: Arc::new(Self::properties_for(&table, &projection, &schema, &feed)),
            table,
            projection,
            schema,
            feed,
            limit,
            fetch,
            statistics: Arc::new(statistics),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The feed's properties, with the order of each projected axis column that every
    /// partition emits in order ([`ordered_axes`]).
    fn properties_for(
        table: &TableModel,
        projection: &[usize],
        schema: &SchemaRef,
        feed: &ChunkFeed,
    ) -> PlanProperties {
        let properties = feed.properties(schema, EmissionType::Incremental);
        // Columns 0..axes.len() are the axes, in order.
        let axes: Vec<usize> = projection.iter().copied().filter(|&c| c < table.axes.len()).collect();
        if axes.is_empty() {
            return properties;
        }
        let Some(partitions) = feed.partition_tasks() else {
            return properties;
        };
        let orderings = ordered_axes(table, &axes, &partitions)
            .into_iter()
            .filter_map(|(axis, descending)| {
                let at = projection.iter().position(|&c| c == axis)?;
                let column = Arc::new(Column::new(schema.field(at).name(), at));
                let options = SortOptions::new(descending, descending);
                Some([PhysicalSortExpr::new(column, options)])
            });
        let mut equivalences = properties.equivalence_properties().clone();
        equivalences.add_orderings(orderings);
        properties.with_eq_properties(equivalences)
    }

    /// The same scan over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetScanExec {
            table: self.table.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
            cache: Arc::new(Self::properties_for(&self.table, &self.projection, &self.schema, &feed)),
            feed,
            limit: self.limit,
            fetch: self.fetch,
            statistics: self.statistics.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table scanned.
    pub fn table(&self) -> &Arc<TableModel> {
        &self.table
    }

    /// The access plan, and which partition reads which chunks.
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

    /// Per-axis selections that are not the whole axis, e.g. `time: 1/100`.
    fn selection_text(&self) -> Vec<String> {
        self.table
            .axes
            .iter()
            .zip(&self.feed.access.selection)
            .filter(|(_, s)| !s.is_all())
            .map(|(a, s)| format!("{}: {}/{}", a.name, s.count(), a.extent))
            .collect()
    }

    fn describe(&self) -> String {
        let cols: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        let pruning = &self.feed.access.pruning;
        let mut s = format!(
            "file={}, {}, projection=[{}], chunks={}/{}{}",
            self.table.location(),
            self.table.datasets_text(),
            cols.join(", "),
            self.feed.len(),
            pruning.chunks_total,
            self.feed.access.files_text(&self.table)
        );
        let selection = self.selection_text();
        if !selection.is_empty() {
            s.push_str(&format!(", selection=[{}]", selection.join(", ")));
        }
        if pruning.pruned_by_zone > 0 {
            s.push_str(&format!(", pruned_by_zone={}", pruning.pruned_by_zone));
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
                writeln!(f, "file={}", self.table.location())?;
                writeln!(f, "{}", self.table.datasets_text())?;
                writeln!(
                    f,
                    "chunks={}/{}",
                    self.feed.len(),
                    self.feed.access.pruning.chunks_total
                )?;
                for s in self.selection_text() {
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
    chunk_node_methods!("TetScanExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let table = &self.table;
        let metrics = ScanMetrics::new(&self.metrics, partition, &self.feed.access.pruning, table.is_remote());
        let columns: Vec<usize> = self
            .projection
            .iter()
            .filter_map(|&c| table.value_at(c).map(|(k, _)| k))
            .collect();
        let payloads = feed_payloads(
            self.feed.clone(),
            partition,
            context.clone(),
            "TetScanExec",
            PayloadRead {
                table: table.clone(),
                columns,
                fetch: self.fetch,
                metrics: PayloadMetrics {
                    read: metrics.read.clone(),
                    decode: vec![metrics.decode_time.clone()],
                },
            },
        );
        let reader = PartitionReader {
            table: table.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
            batch_size: context.session_config().batch_size().max(1),
            remaining: self.limit.unwrap_or(usize::MAX),
            current: None,
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
        if self.limit.is_some() {
            return Ok(Arc::new(self.statistics.as_ref().clone().to_inexact()));
        }
        Ok(self.statistics.clone())
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }
}

/// The state of one partition: turns payloads into batches.
struct PartitionReader {
    table: Arc<TableModel>,
    projection: Vec<usize>,
    schema: SchemaRef,
    batch_size: usize,
    remaining: usize,
    /// The chunk being emitted: its slabs still to come, decoded tiles (per value column)
    /// and global start.
    current: Option<(Slabs, Vec<Option<Buffer>>, Vec<u64>)>,
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
            if let Some((slabs, tile, tile_start)) = &mut self.current {
                let Some(slab) = slabs.next() else {
                    self.current = None;
                    continue;
                };
                let elapsed = self.metrics.baseline.elapsed_compute().clone();
                let _timer = elapsed.timer();
                let rows = usize::try_from(slab.cells).unwrap_or(usize::MAX).min(self.remaining);
                if rows == 0 {
                    continue;
                }
                let batch = batch_of(
                    &self.table,
                    &self.projection,
                    &self.schema,
                    &slab,
                    tile,
                    tile_start,
                    rows,
                );
                if batch.is_err() {
                    self.failed = true;
                }
                self.remaining -= rows;
                self.metrics.rows_emitted.add(rows);
                self.metrics.baseline.record_output(rows);
                return Some(batch);
            }
            let elapsed = self.metrics.baseline.elapsed_compute().clone();
            match payloads.next().await? {
                Ok((task, tiles)) => {
                    let _timer = elapsed.timer();
                    let tile_start = self.table.tile_start(&task);
                    self.current = Some((task.slabs(self.batch_size as u64), tiles, tile_start));
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// The first `rows` cells of `slab` as a batch of `schema` (the columns `projection` of
/// `table`); `tiles` are the decoded tiles of the projected value columns.
fn batch_of(
    table: &TableModel,
    projection: &[usize],
    schema: &SchemaRef,
    slab: &ChunkTask,
    tiles: &[Option<Buffer>],
    tile_start: &[u64],
    rows: usize,
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(projection.len());
    for &c in projection {
        match table.value_at(c) {
            None => {
                let pos = axis_positions(slab, tile_start, c, rows);
                columns.push(table.axes[c].take(&pos)?);
            }
            Some((k, value)) => {
                let Some(Some(tile)) = tiles.get(k) else {
                    return internal_err!(
                        "TetScanExec: no tile decoded for task {} of {}",
                        slab.id,
                        value.describe()
                    );
                };
                // Each file of an archive whose files store the column differently
                // decodes it by its own rule, cast to the archive's type.
                let own = match table.is_uniform() {
                    true => value,
                    false => &table.file_of(slab).values[k],
                };
                let mut v = value_array(own, tile.clone(), &slab.part(k));
                let ty = table.schema.field(c).data_type();
                if v.data_type() != ty {
                    v = arrow::compute::cast(&v, ty)?;
                }
                columns.push(v.slice(0, rows));
            }
        }
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

//! [`TetAggregateExec`]: grouped aggregation folded straight from payload bytes.
//!
//! Each partition of the feed folds the selected cells of its chunks into dense
//! accumulators indexed by the group keys (`walk::GroupIndex`: one id per distinct key tuple of
//! each grouped axis). What the node emits is its [`AggregateOutput`]:
//! - `States`: each partition is an output partition and emits one row per group it
//!   touched: the group's keys, then the partial states of each aggregate (see
//!   [`Aggregation::state_columns`]). A merge aggregate above (built by the logical rewrite
//!   in `sql`) combines partitions.
//! - `Values`: one output partition runs every partition as a task of its own over one
//!   group index of the whole selection, merges their accumulators in partition order and
//!   emits one row per group with each aggregate's value, finished from the merged states.
//!
//! Aggregates share accumulators by input (`fold_plan::Input`): the stored values of the tile,
//! optionally kept by ranges of stored values ([`ValueRanges`](crate::plan::ValueRanges): `WHERE`/`FILTER`
//! comparisons of value columns with constants), fold in the
//! vectorized kernels, and their states are mapped at emit (packing, affine inputs such as
//! `v * 1.8 + 32`); any other input or filter is an expression evaluated over each tile's
//! cells slab by slab (`tile::TileExprs`, `evaluated`) and folded from the resulting arrays.
//!
//! A map of many cells over an outer axis (`GROUP BY lat, lon` over time) folds block of
//! cells by block of cells over a batch of tiles (`per_cell`), so that each group's slots
//! are swept once per batch rather than once per time step.

use crate::exec::feed::{ChunkFeed, chunk_node_methods};
use crate::io::FetchOptions;
use crate::plan::{AggFunc, AggInput, AggregateOutput, Aggregation, TableModel, ValueKey};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, ReplaceChildrenOptions,
};
use futures::StreamExt;
use std::fmt;
use std::sync::Arc;

mod cell_kernels;
mod cell_walk;
mod emit;
mod evaluated;
mod fold_plan;
mod job;
mod order_values;
mod partition_fold;
mod per_cell;
mod stored;
mod task_fold;
mod value_keys;
mod weighted;

use fold_plan::FoldPlan;
use job::FoldJob;
pub(crate) use order_values::order_program;

/// Grouped aggregation over the selected chunks of a table (one dataset, or several on
/// one grid).
#[derive(Debug)]
pub struct TetAggregateExec {
    table: Arc<TableModel>,
    aggregation: Aggregation,
    feed: ChunkFeed,
    fetch: FetchOptions,
    output: AggregateOutput,
    schema: SchemaRef,
    fold: Arc<FoldPlan>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetAggregateExec {
    /// Fold `aggregation` over the cells `feed` plans, emitting `output`; object store
    /// payloads are read as `fetch` says. The aggregation must fit the table
    /// ([`Aggregation::check`]), and for [`AggregateOutput::Values`] one output
    /// ([`Aggregation::fits_one_output`]).
    pub fn try_new(
        table: Arc<TableModel>,
        aggregation: Aggregation,
        feed: ChunkFeed,
        fetch: FetchOptions,
        output: AggregateOutput,
    ) -> Result<Self> {
        if let Err(e) = aggregation.check(&table) {
            return internal_err!("TetAggregateExec over {}: {e}", table.location());
        }
        if !table.is_uniform() {
            return internal_err!(
                "TetAggregateExec over {}: its files store a value column differently",
                table.location()
            );
        }
        if output == AggregateOutput::Values && !aggregation.fits_one_output(&table) {
            return internal_err!(
                "TetAggregateExec over {}: {} group slots do not fit one output",
                table.location(),
                aggregation.dense_groups(&table)
            );
        }
        let schema = aggregation.schema(output);
        let fold = Arc::new(FoldPlan::new(&table, &aggregation)?);
        Ok(TetAggregateExec {
            cache: Arc::new(Self::properties_for(&schema, &feed, output)),
            fold,
            table,
            aggregation,
            feed,
            fetch,
            output,
            schema,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    fn properties_for(schema: &SchemaRef, feed: &ChunkFeed, output: AggregateOutput) -> PlanProperties {
        let properties = feed.properties(schema, EmissionType::Final);
        match output {
            AggregateOutput::States => properties,
            AggregateOutput::Values => properties.with_partitioning(Partitioning::UnknownPartitioning(1)),
        }
    }

    /// The same aggregation over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetAggregateExec {
            table: self.table.clone(),
            aggregation: self.aggregation.clone(),
            fetch: self.fetch,
            output: self.output,
            schema: self.schema.clone(),
            fold: self.fold.clone(),
            cache: Arc::new(Self::properties_for(&self.schema, &feed, self.output)),
            feed,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// What is aggregated.
    pub fn aggregation(&self) -> &Aggregation {
        &self.aggregation
    }

    /// The table folded.
    pub fn table(&self) -> &Arc<TableModel> {
        &self.table
    }

    /// The access plan, and which partition folds which chunks.
    pub fn feed(&self) -> &ChunkFeed {
        &self.feed
    }

    /// What the node emits.
    pub fn output(&self) -> AggregateOutput {
        self.output
    }

    fn describe(&self) -> (String, String) {
        let axes = &self.table.axes;
        let groups: Vec<String> = self
            .aggregation
            .groups
            .iter()
            .map(|k| match &k.expr {
                None => axes[k.axis].name.clone(),
                Some(e) => e.to_string(),
            })
            .collect::<Vec<_>>();
        let groups = self.aggregation.in_key_order(groups, ValueKey::sql);
        let v_type = self.table.value_type();
        let mut aggs: Vec<String> = self
            .aggregation
            .aggs
            .iter()
            .map(|a| {
                let arg = match (&a.input, a.func) {
                    (_, AggFunc::CountStar) => "count(*)".to_string(),
                    (AggInput::Value { affine: None }, f) if a.input_type == v_type => format!("{}(v)", f.name()),
                    (AggInput::Value { affine: None }, f) => format!("{}(v AS {})", f.name(), a.input_type),
                    (AggInput::Value { affine: Some(m) }, f) => {
                        // `+ 0.0` shows the offset -0.0 of a map without one as 0.
                        format!("{}(v * {} + {})", f.name(), m.scale, m.offset + 0.0)
                    }
                    (AggInput::Expr(e), f) => match a.percentile {
                        Some(p) => format!("{}({e}, {p})", f.name()),
                        None => format!("{}({e})", f.name()),
                    },
                    (AggInput::Pair(x, y), f) => format!("{}({x}, {y})", f.name()),
                };
                match &a.filter {
                    Some(p) => format!("{arg} FILTER (WHERE {p})"),
                    None => arg,
                }
            })
            .collect();
        if let Some(p) = &self.aggregation.filter {
            aggs.push(format!("where {p}"));
        }
        (groups.join(", "), aggs.join(", "))
    }
}

impl DisplayAs for TetAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let (g, a) = self.describe();
        let location = self.table.location();
        let (chunks, total) = (self.feed.len(), self.feed.access.pruning.chunks_total);
        let output = match self.output {
            AggregateOutput::States => "states",
            AggregateOutput::Values => "values",
        };
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "TetAggregateExec: file={location}, {}, group_by=[{g}], aggr=[{a}], chunks={chunks}/{total}{}, output={output}",
                self.table.datasets_text(),
                self.feed.access.files_text(&self.table),
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={location}")?;
                writeln!(f, "{}", self.table.datasets_text())?;
                writeln!(f, "group_by=[{g}]")?;
                writeln!(f, "aggr=[{a}]")?;
                writeln!(f, "chunks={chunks}/{total}")?;
                writeln!(f, "output={output}")
            }
        }
    }
}

impl ExecutionPlan for TetAggregateExec {
    chunk_node_methods!("TetAggregateExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let job = FoldJob {
            table: self.table.clone(),
            aggregation: self.aggregation.clone(),
            fold: self.fold.clone(),
            feed: self.feed.clone(),
            fetch: self.fetch,
            metrics: self.metrics.clone(),
        };
        let schema = self.schema.clone();
        let stream = match self.output {
            AggregateOutput::States if self.aggregation.has_order_statistics() => {
                return internal_err!("TetAggregateExec: order statistics fold only into values, not partial states");
            }
            AggregateOutput::States => futures::stream::once(Box::pin(async move {
                // Group keys and weights over the stretch this partition's chunks cover: a
                // partition of a fold split along its grouped axes holds only its own groups.
                let tasks = job
                    .feed
                    .tasks_of(partition, context.clone(), "TetAggregateExec")
                    .await?;
                let selection = job.feed.access.covered(&job.table, &tasks);
                let groups = Arc::new(job.groups(&selection)?);
                let folded = job.fold_partition(partition, tasks, &groups, context).await?;
                let _t = folded.metrics.baseline.elapsed_compute().timer();
                let touched = job.emit().touched(&folded.accs, false);
                let batch = job.emit().states(
                    &folded.accs,
                    &folded.pairs,
                    (&groups.index, folded.keyed.as_ref()),
                    &touched,
                )?;
                folded.metrics.baseline.record_output(batch.num_rows());
                Ok(batch)
            }))
            .boxed(),
            AggregateOutput::Values if partition == 0 => {
                futures::stream::once(Box::pin(async move { job.fold_all(context, schema).await })).boxed()
            }
            AggregateOutput::Values => {
                return internal_err!("TetAggregateExec has one output partition, asked for {partition}");
            }
        };
        let adapter = RecordBatchStreamAdapter::new(self.schema.clone(), stream);
        Ok(Box::pin(datafusion::physical_plan::coop::cooperative(adapter)))
    }
}

//! [`TetAggregateExec`]: grouped aggregation folded straight from payload bytes.
//!
//! Each output partition folds the selected sub-boxes of its chunks into dense
//! accumulators indexed by the grouped axes (group count = product of the selected extents
//! of those axes) and emits one row per group it touched: the group's axis values, then
//! the partial states of each aggregate (see [`Aggregation::state_columns`]). A merge aggregate
//! above (built by the logical rewrite in `sql`) combines partitions and groups whose
//! labels are equal. Index columns are never materialised.

use super::ChunkFeed;
use super::fold::{Accumulators, Elem, Missing, Needs, fold_elementwise, fold_run};
use super::metrics::AggregateMetrics;
use super::payload::{Payload, decode_tile, feed_payloads};
use crate::format::{elements, with_dtype};
use crate::io::FetchOptions;
use crate::plan::{AggFunc, AggSpec, Aggregation, AxisSelection, ChunkTask, State, StateColumn, TableModel};
use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::fmt;
use std::sync::Arc;

/// Which accumulators an aggregate needs.
fn needs(spec: &AggSpec) -> Needs {
    let mut n = Needs::default();
    match spec.func {
        AggFunc::CountStar | AggFunc::Count => {}
        AggFunc::Sum if spec.states()[0].1 != DataType::Float64 => n.isum = true,
        AggFunc::Sum | AggFunc::Avg => n.fsum = true,
        AggFunc::Min | AggFunc::Max => n.min_max = true,
        _ => {
            n.moments = true;
            n.fsum = true;
        }
    }
    n
}

/// Which accumulators an aggregation needs.
fn needs_of(aggregation: &Aggregation) -> Needs {
    aggregation.aggs.iter().map(needs).fold(Needs::default(), |a, b| Needs {
        fsum: a.fsum || b.fsum,
        isum: a.isum || b.isum,
        min_max: a.min_max || b.min_max,
        moments: a.moments || b.moments,
    })
}

/// Dense group indexing over the grouped axes.
#[derive(Debug)]
struct GroupIndex {
    /// Per axis: dense index of each position (u32::MAX when not grouped / not selected).
    dense: Vec<Option<Vec<u32>>>,
    /// Per axis: stride of its dense index in the group index (0 when not grouped).
    stride: Vec<usize>,
    /// Per grouped axis (output order): positions of its dense indices.
    positions: Vec<Vec<u64>>,
    count: usize,
}

impl GroupIndex {
    fn new(aggregation: &Aggregation, sel: &[AxisSelection]) -> GroupIndex {
        let n = sel.len();
        let mut dense = vec![None; n];
        let mut stride = vec![0usize; n];
        let mut positions = Vec::new();
        let mut s = 1usize;
        for &d in aggregation.groups.iter().rev() {
            let pos: Vec<u64> = sel[d].positions().collect();
            let mut map = vec![u32::MAX; sel[d].extent() as usize];
            for (k, &p) in pos.iter().enumerate() {
                map[p as usize] = k as u32;
            }
            dense[d] = Some(map);
            stride[d] = s;
            s *= pos.len().max(1);
            positions.push(pos);
        }
        positions.reverse();
        let count = aggregation
            .groups
            .iter()
            .map(|&d| sel[d].count() as usize)
            .product::<usize>();
        GroupIndex {
            dense,
            stride,
            positions,
            count,
        }
    }

    #[inline]
    fn offset(&self, d: usize, pos: u64) -> usize {
        match &self.dense[d] {
            Some(m) => m[pos as usize] as usize * self.stride[d],
            None => 0,
        }
    }
}

/// Grouped aggregation over the selected chunks of one dataset.
#[derive(Debug)]
pub struct TetAggregateExec {
    table: Arc<TableModel>,
    aggregation: Aggregation,
    feed: ChunkFeed,
    fetch: FetchOptions,
    schema: SchemaRef,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetAggregateExec {
    /// Fold `aggregation` over the cells `feed` plans; object store payloads are read as
    /// `fetch` says. The aggregation must fit the table ([`Aggregation::check`]).
    pub fn try_new(
        table: Arc<TableModel>,
        aggregation: Aggregation,
        feed: ChunkFeed,
        fetch: FetchOptions,
    ) -> Result<Self> {
        if let Err(e) = aggregation.check(&table) {
            return internal_err!("TetAggregateExec over {}: {e}", table.source.location);
        }
        let schema = aggregation.schema(&table.axes);
        Ok(TetAggregateExec {
            cache: Arc::new(Self::properties_for(&schema, &feed)),
            table,
            aggregation,
            feed,
            fetch,
            schema,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    fn properties_for(schema: &SchemaRef, feed: &ChunkFeed) -> PlanProperties {
        feed.properties(schema, EmissionType::Final)
    }

    /// The same aggregation over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetAggregateExec {
            table: self.table.clone(),
            aggregation: self.aggregation.clone(),
            fetch: self.fetch,
            schema: self.schema.clone(),
            cache: Arc::new(Self::properties_for(&self.schema, &feed)),
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

    fn describe(&self) -> (String, String) {
        let axes = &self.table.axes;
        let groups: Vec<&str> = self.aggregation.groups.iter().map(|&d| axes[d].name.as_str()).collect();
        let v_type = self.table.value_type();
        let aggs: Vec<String> = self
            .aggregation
            .aggs
            .iter()
            .map(|a| match a.func {
                AggFunc::CountStar => "count(*)".to_string(),
                f if a.input_type == v_type => format!("{}(v)", f.name()),
                f => format!("{}(v AS {})", f.name(), a.input_type),
            })
            .collect();
        (groups.join(", "), aggs.join(", "))
    }
}

impl DisplayAs for TetAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let (g, a) = self.describe();
        let location = &self.table.source.location;
        let (chunks, total) = (self.feed.len(), self.feed.access.pruning.chunks_total);
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "TetAggregateExec: file={location}, dataset={}, group_by=[{g}], aggr=[{a}], chunks={chunks}/{total}",
                self.table.dataset().name(),
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={location}")?;
                writeln!(f, "group_by=[{g}]")?;
                writeln!(f, "aggr=[{a}]")?;
                writeln!(f, "chunks={chunks}/{total}")
            }
        }
    }
}

impl ExecutionPlan for TetAggregateExec {
    chunk_node_methods!("TetAggregateExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let table = &self.table;
        let metrics = AggregateMetrics::new(
            &self.metrics,
            partition,
            &self.feed.access.pruning,
            table.source.is_remote(),
        );
        let nullable = table.has_missing();
        let payloads = feed_payloads(
            self.feed.clone(),
            partition,
            context.clone(),
            "TetAggregateExec",
            table.clone(),
            self.aggregation.reads_payload(nullable),
            self.fetch,
            metrics.read.fetch.clone(),
        );
        let job = FoldJob {
            table: table.clone(),
            aggregation: self.aggregation.clone(),
            selection: self.feed.access.selection.clone(),
            schema: self.schema.clone(),
        };
        let stream = futures::stream::once(Box::pin(async move {
            let (acc, gi) = job.fold(payloads, &metrics).await?;
            let _t = metrics.baseline.elapsed_compute().timer();
            let batch = job.emit(&acc, &gi)?;
            metrics.baseline.record_output(batch.num_rows());
            Ok(batch)
        }));
        let adapter = RecordBatchStreamAdapter::new(self.schema.clone(), stream);
        Ok(Box::pin(datafusion::physical_plan::coop::cooperative(adapter)))
    }
}

struct FoldJob {
    table: Arc<TableModel>,
    aggregation: Aggregation,
    selection: Vec<AxisSelection>,
    schema: SchemaRef,
}

impl FoldJob {
    async fn fold(
        &self,
        mut payloads: BoxStream<'static, Result<Payload>>,
        metrics: &AggregateMetrics,
    ) -> Result<(Accumulators, GroupIndex)> {
        let ds = self.table.dataset();
        let gi = GroupIndex::new(&self.aggregation, &self.selection);
        let mut acc = Accumulators::new(gi.count, needs_of(&self.aggregation), ds.dtype().is_float());
        while let Some(next) = payloads.next().await {
            let (task, stored) = next?;
            let _fold = metrics.fold_time.timer();
            let _compute = metrics.baseline.elapsed_compute().timer();
            let start = task.tile_start(&ds.record.chunk_shape);
            let Some(stored) = stored else {
                fold_task::<u8>(&mut acc, &gi, &task, &start, None, &Missing::default());
                continue;
            };
            metrics.read.chunk(stored.len() as u64);
            let tile = decode_tile(&self.table, &task, stored)?;
            with_dtype!(ds.dtype(), T => {
                let missing = Missing::<T>::of(&self.table.missing);
                fold_task::<T>(&mut acc, &gi, &task, &start, Some(&elements::<T>(&tile)), &missing)
            })
        }
        Ok((acc, gi))
    }

    fn emit(&self, acc: &Accumulators, gi: &GroupIndex) -> Result<RecordBatch> {
        let touched: Vec<usize> = (0..acc.len()).filter(|&g| acc.cells[g] > 0).collect();
        let groups = &self.aggregation.groups;
        let mut cols: Vec<ArrayRef> = Vec::new();
        // Group g decomposes into dense indices in output order (row-major).
        let mut div = 1usize;
        let mut divisors = vec![0usize; groups.len()];
        for k in (0..groups.len()).rev() {
            divisors[k] = div;
            div *= gi.positions[k].len().max(1);
        }
        for (k, &d) in groups.iter().enumerate() {
            let pos: Vec<u64> = touched
                .iter()
                .map(|&g| gi.positions[k][(g / divisors[k]) % gi.positions[k].len()])
                .collect();
            cols.push(self.table.axes[d].take(&pos)?);
        }
        for column in self.aggregation.state_columns() {
            cols.push(self.state_array(&column, acc, &touched)?);
        }
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }

    /// One partial-state column over the `touched` groups. The accumulators hold
    /// statistics of the stored values; a packed dataset's are mapped to the unpacked
    /// values here (`x·s + o`: sums by `s·sum + o·n`, means likewise, M2 by `s²`, and the
    /// minimum and maximum swap when `s < 0`).
    fn state_array(&self, column: &StateColumn, acc: &Accumulators, touched: &[usize]) -> Result<ArrayRef> {
        let nonempty = |g: usize| acc.n[g] > 0;
        let f64s = |v: &[f64], map: &dyn Fn(usize, f64) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| map(g, v[g]))),
            ))
        };
        let same = |_: usize, x: f64| x;
        if let Some(p) = self.table.packing {
            match column.state {
                State::Sum => return Ok(f64s(&acc.fsum, &|g, x| p.scale * x + p.offset * acc.n[g] as f64)),
                State::Mean => return Ok(f64s(&acc.mean, &|_, x| p.apply(x))),
                State::M2 => return Ok(f64s(&acc.m2, &|_, x| p.scale * p.scale * x)),
                State::Min | State::Max => {
                    let low = (column.state == State::Min) == (p.scale >= 0.0);
                    let raw = if low { &acc.imin } else { &acc.imax };
                    return Ok(Arc::new(Float64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| p.apply(raw[g] as f64))),
                    )));
                }
                State::Cells | State::Count => {}
            }
        }
        let counts = |v: &[u64]| -> ArrayRef {
            match column.data_type {
                DataType::UInt64 => Arc::new(UInt64Array::from_iter_values(touched.iter().map(|&g| v[g]))),
                _ => Arc::new(Int64Array::from_iter_values(touched.iter().map(|&g| v[g] as i64))),
            }
        };
        Ok(match (column.state, &column.data_type) {
            (State::Cells, _) => counts(&acc.cells),
            (State::Count, _) => counts(&acc.n),
            (State::Sum, DataType::Float64) => f64s(&acc.fsum, &same),
            (State::Sum, DataType::Int64) => Arc::new(Int64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g])),
            )),
            (State::Sum, DataType::UInt64) => Arc::new(UInt64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g] as u64)),
            )),
            (State::Min | State::Max, t) => {
                let is_min = column.state == State::Min;
                let arr: ArrayRef = if !acc.fmin.is_empty() {
                    Arc::new(Float64Array::from_iter(touched.iter().map(|&g| {
                        nonempty(g).then(|| {
                            // NaN sorts above every number: it is the max when present,
                            // and the min only when nothing else was seen (fmin stays NaN).
                            if is_min {
                                acc.fmin[g]
                            } else if acc.nan[g] {
                                f64::NAN
                            } else {
                                acc.fmax[g]
                            }
                        })
                    })))
                } else {
                    let v = touched
                        .iter()
                        .map(|&g| nonempty(g).then(|| if is_min { acc.imin[g] } else { acc.imax[g] }));
                    if self.table.dataset().dtype().is_unsigned() {
                        Arc::new(UInt64Array::from_iter(v.map(|x| x.map(|x| x as u64))))
                    } else {
                        Arc::new(Int64Array::from_iter(v.map(|x| x.map(|x| x as i64))))
                    }
                };
                arrow::compute::cast(&arr, t)?
            }
            (State::Mean, _) => f64s(&acc.mean, &same),
            (State::M2, _) => f64s(&acc.m2, &same),
            (State::Sum, t) => {
                return Err(DataFusionError::Internal(format!(
                    "TetAggregateExec: a sum state of type {t}"
                )));
            }
        })
    }
}

/// Fold the selected cells of one chunk, joining runs that are contiguous in the tile
/// and fall into the same group. Without a tile only cells are counted.
fn fold_task<T: Elem>(
    acc: &mut Accumulators,
    gi: &GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    tile: Option<&[T]>,
    missing: &Missing<T>,
) {
    let run = |acc: &mut Accumulators, g: usize, off: usize, len: usize| match tile {
        Some(t) => fold_run(acc, g, &t[off..off + len], missing),
        None => {
            acc.cells[g] += len as u64;
            acc.n[g] += len as u64;
        }
    };
    let last = task.tile_extent.len() - 1;
    if gi.dense[last].is_some() {
        // The innermost axis is grouped: element i of a run folds into group g0 + i * stride.
        let mut runs = task.runs();
        while let Some(r) = runs.next() {
            let g_outer: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
            let g0 = g_outer + gi.offset(last, start[last] + r.first);
            let (off, len) = (r.offset as usize, r.len as usize);
            match tile {
                Some(t) => fold_elementwise(acc, g0, gi.stride[last], &t[off..off + len], missing),
                None => {
                    for i in 0..len {
                        acc.cells[g0 + i * gi.stride[last]] += 1;
                        acc.n[g0 + i * gi.stride[last]] += 1;
                    }
                }
            }
        }
        return;
    }
    let mut pending: Option<(usize, usize, usize)> = None; // (offset, len, group)
    let mut runs = task.runs();
    while let Some(r) = runs.next() {
        let g: usize = (0..last).map(|d| gi.offset(d, start[d] + runs.outer()[d])).sum();
        let (off, len) = (r.offset as usize, r.len as usize);
        pending = match pending {
            Some((o, l, pg)) if pg == g && o + l == off => Some((o, l + len, g)),
            Some((o, l, pg)) => {
                run(acc, pg, o, l);
                Some((off, len, g))
            }
            None => Some((off, len, g)),
        };
    }
    if let Some((o, l, g)) = pending {
        run(acc, g, o, l);
    }
}

//! [`TetAggregateExec`]: grouped aggregation folded straight from payload bytes.
//!
//! Each output partition folds the selected sub-boxes of its chunks into dense
//! accumulators indexed by the grouped axes (group count = product of the selected extents
//! of those axes) and emits one row per group it touched: the group's axis values, then
//! the partial states of each aggregate (see [`AggSpec::state_fields`]). A merge aggregate
//! above (built by the logical rewrite in `sql`) combines partitions and groups whose
//! labels are equal. Index columns are never materialised.

use super::fold::{Accumulators, Elem, Needs, elements, fold_elementwise, fold_run};
use super::{ChunkFeed, Payload};
use crate::format::hyperslab::odometer_next;
use crate::format::{DType, codec};
use crate::io::TetSource;
use crate::plan::{AxisSelection, ChunkTask};
use crate::sql::axes::Axis;
use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::Result;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use half::f16;
use std::fmt;
use std::sync::Arc;

/// Groups with more dense slots than this are left to DataFusion.
pub const MAX_DENSE_GROUPS: u64 = 1 << 24;

/// An aggregate function the pushdown computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
}

impl AggFunc {
    /// Every function.
    pub const ALL: [AggFunc; 10] = [
        AggFunc::CountStar,
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Avg,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::VarPop,
        AggFunc::VarSamp,
        AggFunc::StddevPop,
        AggFunc::StddevSamp,
    ];

    /// SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::CountStar => "count(*)",
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::VarPop => "var_pop",
            AggFunc::VarSamp => "var_samp",
            AggFunc::StddevPop => "stddev_pop",
            AggFunc::StddevSamp => "stddev_samp",
        }
    }
}

/// One aggregate over `v` (or `CAST(v AS input_type)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggSpec {
    pub func: AggFunc,
    /// Type of the aggregated expression.
    pub input_type: DataType,
}

/// Result type of `sum` over `t`.
pub fn sum_type(t: &DataType) -> DataType {
    match t {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => DataType::UInt64,
        _ => DataType::Float64,
    }
}

impl AggSpec {
    /// The partial-state columns this aggregate emits, named `a{i}_{state}`.
    pub fn state_fields(&self, i: usize) -> Vec<Field> {
        let f = |s: &str, t: DataType| Field::new(format!("a{i}_{s}"), t, true);
        match self.func {
            AggFunc::CountStar => vec![f("cells", DataType::Int64)],
            AggFunc::Count => vec![f("n", DataType::Int64)],
            AggFunc::Sum => vec![f("sum", sum_type(&self.input_type))],
            AggFunc::Avg => vec![f("n", DataType::Int64), f("sum", DataType::Float64)],
            AggFunc::Min => vec![f("min", self.input_type.clone())],
            AggFunc::Max => vec![f("max", self.input_type.clone())],
            AggFunc::VarPop | AggFunc::VarSamp | AggFunc::StddevPop | AggFunc::StddevSamp => {
                vec![
                    f("n", DataType::UInt64),
                    f("mean", DataType::Float64),
                    f("m2", DataType::Float64),
                ]
            }
        }
    }

    fn needs(&self) -> Needs {
        match self.func {
            AggFunc::CountStar | AggFunc::Count => Needs::default(),
            AggFunc::Sum if sum_type(&self.input_type) == DataType::Float64 => Needs {
                fsum: true,
                ..Needs::default()
            },
            AggFunc::Sum => Needs {
                isum: true,
                ..Needs::default()
            },
            AggFunc::Avg => Needs {
                fsum: true,
                ..Needs::default()
            },
            AggFunc::Min | AggFunc::Max => Needs {
                min_max: true,
                ..Needs::default()
            },
            _ => Needs {
                moments: true,
                fsum: true,
                ..Needs::default()
            },
        }
    }
}

/// What to aggregate: grouped axes (in output order) and aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregatePlan {
    /// Axis indices grouped by, in output order.
    pub groups: Vec<usize>,
    pub aggs: Vec<AggSpec>,
}

impl AggregatePlan {
    /// Output schema: the grouped axis columns, then every aggregate's state fields.
    pub fn schema(&self, axes: &[Axis]) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .groups
            .iter()
            .map(|&d| Field::new(&axes[d].name, axes[d].data_type(), false))
            .collect();
        for (i, a) in self.aggs.iter().enumerate() {
            fields.extend(a.state_fields(i));
        }
        Arc::new(Schema::new(fields))
    }

    fn needs(&self) -> Needs {
        self.aggs.iter().fold(Needs::default(), |a, s| {
            let b = s.needs();
            Needs {
                fsum: a.fsum || b.fsum,
                isum: a.isum || b.isum,
                min_max: a.min_max || b.min_max,
                moments: a.moments || b.moments,
            }
        })
    }
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
    fn new(plan: &AggregatePlan, sel: &[AxisSelection]) -> GroupIndex {
        let n = sel.len();
        let mut dense = vec![None; n];
        let mut stride = vec![0usize; n];
        let mut positions = Vec::new();
        let mut s = 1usize;
        for &d in plan.groups.iter().rev() {
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
        let count = plan.groups.iter().map(|&d| sel[d].count() as usize).product::<usize>();
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
    source: Arc<TetSource>,
    dataset: usize,
    axes: Arc<Vec<Axis>>,
    plan: AggregatePlan,
    selection: Arc<Vec<AxisSelection>>,
    feed: ChunkFeed,
    schema: SchemaRef,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetAggregateExec {
    /// Build the node; `feed` says which chunks each output partition folds.
    pub fn new(
        source: Arc<TetSource>,
        dataset: usize,
        axes: Arc<Vec<Axis>>,
        plan: AggregatePlan,
        selection: Vec<AxisSelection>,
        feed: ChunkFeed,
    ) -> Self {
        let schema = plan.schema(&axes);
        TetAggregateExec {
            cache: Arc::new(Self::properties_for(&schema, &feed)),
            source,
            dataset,
            axes,
            plan,
            selection: Arc::new(selection),
            feed,
            schema,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn properties_for(schema: &SchemaRef, feed: &ChunkFeed) -> PlanProperties {
        feed.properties(schema, EmissionType::Final)
    }

    /// The same aggregation over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetAggregateExec {
            source: self.source.clone(),
            dataset: self.dataset,
            axes: self.axes.clone(),
            plan: self.plan.clone(),
            selection: self.selection.clone(),
            schema: self.schema.clone(),
            cache: Arc::new(Self::properties_for(&self.schema, &feed)),
            feed,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// What is aggregated.
    pub fn plan(&self) -> &AggregatePlan {
        &self.plan
    }

    /// The file read.
    pub fn source(&self) -> &Arc<TetSource> {
        &self.source
    }

    /// The dataset (directory position).
    pub fn dataset(&self) -> usize {
        self.dataset
    }

    /// Per axis, the selected positions.
    pub fn selection(&self) -> &[AxisSelection] {
        &self.selection
    }

    /// The chunks folded, and which partition folds which.
    pub fn feed(&self) -> &ChunkFeed {
        &self.feed
    }

    fn describe(&self) -> (String, String) {
        let groups: Vec<&str> = self.plan.groups.iter().map(|&d| self.axes[d].name.as_str()).collect();
        let aggs: Vec<String> = self
            .plan
            .aggs
            .iter()
            .map(|a| match a.func {
                AggFunc::CountStar => "count(*)".to_string(),
                f => format!(
                    "{}(v{})",
                    f.name(),
                    if a.input_type == crate::sql::axes::arrow_type(self.source.catalog.datasets[self.dataset].dtype())
                    {
                        String::new()
                    } else {
                        format!(" AS {}", a.input_type)
                    }
                ),
            })
            .collect();
        (groups.join(", "), aggs.join(", "))
    }
}

impl DisplayAs for TetAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let (g, a) = self.describe();
        let ds = &self.source.catalog.datasets[self.dataset];
        let chunks = self.feed.len();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "TetAggregateExec: file={}, dataset={}, group_by=[{g}], aggr=[{a}], chunks={chunks}/{}",
                self.source.location,
                ds.name(),
                ds.record.chunk_count
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={}", self.source.location)?;
                writeln!(f, "group_by=[{g}]")?;
                writeln!(f, "aggr=[{a}]")?;
                writeln!(f, "chunks={chunks}/{}", ds.record.chunk_count)
            }
        }
    }
}

impl ExecutionPlan for TetAggregateExec {
    chunk_plan_methods!("TetAggregateExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let m = &self.metrics;
        let chunks_read = MetricBuilder::new(m).counter("chunks_read", partition);
        let bytes_read = MetricBuilder::new(m).counter("bytes_read", partition);
        let total = MetricBuilder::new(m).counter("chunks_total", partition);
        let fold_time = MetricBuilder::new(m).subset_time("fold_time", partition);
        if partition == 0 {
            total.add(self.source.catalog.datasets[self.dataset].record.chunk_count as usize);
        }
        let job = FoldJob {
            source: self.source.clone(),
            dataset: self.dataset,
            axes: self.axes.clone(),
            plan: self.plan.clone(),
            selection: self.selection.clone(),
            schema: self.schema.clone(),
        };
        let payloads = super::feed_payloads(
            self.feed.clone(),
            partition,
            context.clone(),
            "TetAggregateExec",
            self.source.clone(),
            self.dataset,
            job.need_values(),
            self.source.is_remote().then(|| super::FetchMetrics::new(m, partition)),
        );
        let stream = futures::stream::once(Box::pin(async move {
            let _t = fold_time.timer();
            let (acc, gi) = job
                .fold(payloads, |bytes| {
                    chunks_read.add(1);
                    bytes_read.add(bytes as usize);
                })
                .await?;
            job.emit(&acc, &gi)
        }));
        let adapter = RecordBatchStreamAdapter::new(self.schema.clone(), stream);
        Ok(Box::pin(datafusion::physical_plan::coop::cooperative(adapter)))
    }
}

struct FoldJob {
    source: Arc<TetSource>,
    dataset: usize,
    axes: Arc<Vec<Axis>>,
    plan: AggregatePlan,
    selection: Arc<Vec<AxisSelection>>,
    schema: SchemaRef,
}

impl FoldJob {
    /// Counts of cells (and of non-NULL cells when nothing can be NULL) need no payload.
    fn need_values(&self) -> bool {
        let ds = &self.source.catalog.datasets[self.dataset];
        let nullable = ds.fill_value_le().is_some();
        self.plan
            .aggs
            .iter()
            .any(|a| !(a.func == AggFunc::CountStar || (a.func == AggFunc::Count && !nullable)))
    }

    async fn fold(
        &self,
        mut payloads: BoxStream<'static, Result<Payload>>,
        mut on_read: impl FnMut(u64),
    ) -> Result<(Accumulators, GroupIndex)> {
        let file = &self.source.catalog;
        let ds = &file.datasets[self.dataset];
        let gi = GroupIndex::new(&self.plan, &self.selection);
        let mut acc = Accumulators::new(gi.count, self.plan.needs(), ds.dtype().is_float());
        let fill = ds.fill_value_le();
        let mut scratch = Vec::new();
        while let Some(next) = payloads.next().await {
            let (task, stored) = next?;
            let task = &task;
            let start = task.tile_start(&ds.record.chunk_shape);
            let Some(stored) = stored else {
                fold_task::<u8>(&mut acc, &gi, task, &start, None, None);
                continue;
            };
            let (row, entry) = file.chunk(ds, task.linear);
            on_read(entry.stored_byte_len);
            let tile: &[u8] = match entry.codec {
                crate::format::Codec::Raw => &stored,
                crate::format::Codec::Zstd => codec::decode(row, entry, &stored, &mut scratch)
                    .map_err(|e| DataFusionError::External(Box::new(e.in_file(&self.source.location))))?,
            };
            macro_rules! go {
                ($t:ty) => {{
                    let f = fill.as_deref().map(|b| elements::<$t>(b)[0]);
                    fold_task::<$t>(&mut acc, &gi, task, &start, Some(&elements::<$t>(tile)), f)
                }};
            }
            match ds.dtype() {
                DType::F32 => go!(f32),
                DType::F64 => go!(f64),
                DType::F16 => go!(f16),
                DType::I16 => go!(i16),
                DType::I32 => go!(i32),
                DType::I64 => go!(i64),
                DType::U8 => go!(u8),
                DType::U16 => go!(u16),
                DType::U32 => go!(u32),
                DType::U64 => go!(u64),
            }
        }
        Ok((acc, gi))
    }

    fn emit(&self, acc: &Accumulators, gi: &GroupIndex) -> Result<RecordBatch> {
        let touched: Vec<usize> = (0..acc.len()).filter(|&g| acc.cells[g] > 0).collect();
        let mut cols: Vec<ArrayRef> = Vec::new();
        // Group g decomposes into dense indices in output order (row-major).
        let mut div = 1usize;
        let mut divisors = vec![0usize; self.plan.groups.len()];
        for k in (0..self.plan.groups.len()).rev() {
            divisors[k] = div;
            div *= gi.positions[k].len().max(1);
        }
        for (k, &d) in self.plan.groups.iter().enumerate() {
            let pos: Vec<u64> = touched
                .iter()
                .map(|&g| gi.positions[k][(g / divisors[k]) % gi.positions[k].len()])
                .collect();
            cols.push(self.axes[d].take(&pos)?);
        }
        let n_of = |g: usize| acc.n[g];
        for spec in &self.plan.aggs {
            let nonempty = |g: usize| n_of(g) > 0;
            match spec.func {
                AggFunc::CountStar => cols.push(Arc::new(Int64Array::from_iter_values(
                    touched.iter().map(|&g| acc.cells[g] as i64),
                ))),
                AggFunc::Count => cols.push(Arc::new(Int64Array::from_iter_values(
                    touched.iter().map(|&g| acc.n[g] as i64),
                ))),
                AggFunc::Sum => match sum_type(&spec.input_type) {
                    DataType::Float64 => cols.push(Arc::new(Float64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.fsum[g])),
                    ))),
                    DataType::Int64 => cols.push(Arc::new(Int64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g])),
                    ))),
                    _ => cols.push(Arc::new(UInt64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g] as u64)),
                    ))),
                },
                AggFunc::Avg => {
                    cols.push(Arc::new(Int64Array::from_iter_values(
                        touched.iter().map(|&g| acc.n[g] as i64),
                    )));
                    cols.push(Arc::new(Float64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.fsum[g])),
                    )));
                }
                AggFunc::Min | AggFunc::Max => {
                    let is_min = spec.func == AggFunc::Min;
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
                        let dtype = self.source.catalog.datasets[self.dataset].dtype();
                        if matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64) {
                            Arc::new(UInt64Array::from_iter(v.map(|x| x.map(|x| x as u64))))
                        } else {
                            Arc::new(Int64Array::from_iter(v.map(|x| x.map(|x| x as i64))))
                        }
                    };
                    cols.push(arrow::compute::cast(&arr, &spec.input_type)?);
                }
                _ => {
                    cols.push(Arc::new(UInt64Array::from_iter_values(
                        touched.iter().map(|&g| acc.n[g]),
                    )));
                    cols.push(Arc::new(Float64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.mean[g])),
                    )));
                    cols.push(Arc::new(Float64Array::from_iter(
                        touched.iter().map(|&g| nonempty(g).then(|| acc.m2[g])),
                    )));
                }
            }
        }
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}

/// Fold the selected cells of one chunk, coalescing runs that are contiguous in the tile
/// and fall into the same group. Without a tile only cells are counted.
fn fold_task<T: Elem>(
    acc: &mut Accumulators,
    gi: &GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    tile: Option<&[T]>,
    fill: Option<T>,
) {
    let run = |acc: &mut Accumulators, g: usize, off: usize, len: usize| match tile {
        Some(t) => fold_run(acc, g, &t[off..off + len], fill),
        None => {
            acc.cells[g] += len as u64;
            acc.n[g] += len as u64;
        }
    };
    let elementwise = |acc: &mut Accumulators, g0: usize, stride: usize, off: usize, len: usize| match tile {
        Some(t) => fold_elementwise(acc, g0, stride, &t[off..off + len], fill),
        None => {
            for i in 0..len {
                acc.cells[g0 + i * stride] += 1;
                acc.n[g0 + i * stride] += 1;
            }
        }
    };
    let n = task.tile_extent.len();
    let last = n - 1;
    let mut strides = vec![1usize; n];
    for d in (0..last).rev() {
        strides[d] = strides[d + 1] * task.tile_extent[d + 1] as usize;
    }
    let outer: Vec<Vec<u64>> = task.local[..last]
        .iter()
        .map(|r| r.iter().flat_map(|&(a, b)| a..b).collect())
        .collect();
    let last_grouped = gi.dense[last].is_some();
    let extents: Vec<usize> = outer.iter().map(Vec::len).collect();
    let mut idx = vec![0usize; last];
    let mut pending: Option<(usize, usize, usize)> = None; // (offset, len, group)
    loop {
        let mut base = 0usize;
        let mut g_outer = 0usize;
        for d in 0..last {
            let p = outer[d][idx[d]];
            base += p as usize * strides[d];
            g_outer += gi.offset(d, start[d] + p);
        }
        for &(a, b) in &task.local[last] {
            let (off, len) = (base + a as usize, (b - a) as usize);
            if last_grouped {
                let g0 = g_outer + gi.offset(last, start[last] + a);
                elementwise(acc, g0, gi.stride[last], off, len);
                continue;
            }
            pending = match pending {
                Some((o, l, g)) if g == g_outer && o + l == off => Some((o, l + len, g)),
                Some((o, l, g)) => {
                    run(acc, g, o, l);
                    Some((off, len, g_outer))
                }
                None => Some((off, len, g_outer)),
            };
        }
        if !odometer_next(&mut idx, &extents) {
            if let Some((o, l, g)) = pending {
                run(acc, g, o, l);
            }
            return;
        }
    }
}

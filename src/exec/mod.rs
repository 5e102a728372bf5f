//! DataFusion ExecutionPlans over `.tet` chunks and their kernels.
//!
//! Owns: turning chunk tasks into Arrow batches ([`TetScanExec`]) and the metrics they
//! report. Must not decide which chunks to read (that is `plan` and `sql`).

/// The `ExecutionPlan` methods shared by this crate's nodes: one child (their
/// [`ChunkFeed`]'s input), no expressions, properties in `self.cache`, metrics in
/// `self.metrics`, and `self.with_feed(feed)` to rebuild over a new child.
macro_rules! chunk_plan_methods {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
        fn properties(&self) -> &Arc<PlanProperties> {
            &self.cache
        }
        fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
            vec![&self.feed.input]
        }
        fn benefits_from_input_partitioning(&self) -> Vec<bool> {
            // The child only hands out chunk ids; splitting it further is pointless.
            vec![false]
        }
        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
        ) -> Result<TreeNodeRecursion> {
            Ok(TreeNodeRecursion::Continue)
        }
        fn replace_children(
            self: Arc<Self>,
            children: Vec<Arc<dyn ExecutionPlan>>,
            _options: ReplaceChildrenOptions,
        ) -> Result<Arc<dyn ExecutionPlan>> {
            let [input] = <[Arc<dyn ExecutionPlan>; 1]>::try_from(children)
                .map_err(|c| DataFusionError::Internal(format!("{} has one child, got {}", $name, c.len())))?;
            Ok(Arc::new(self.with_feed(self.feed.with_input(input)?)))
        }
        fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
            self.replace_children(
                children,
                ReplaceChildrenOptions::new(datafusion::physical_plan::ChildrenPropertiesMode::Recompute),
            )
        }
        fn metrics(&self) -> Option<MetricsSet> {
            Some(self.metrics.clone_inner())
        }
    };
}

/// Which chunks each output partition of a node reads.
///
/// The planned tasks live in the node; the partitions are a child plan (a
/// `DataSourceExec` over memory, one batch of chunk ids per partition) whose partition
/// `i` names the chunks of output partition `i`. Engines that split a stage into tasks by
/// restricting its leaves to some partitions (Ballista does this for `DataSourceExec`,
/// and would run every partition of an unknown leaf in every task) thereby hand each
/// task its own chunks and nothing else.
#[derive(Debug, Clone)]
pub struct ChunkFeed {
    /// Emits the chunk ids (column `chunk`, UInt64) of each output partition.
    pub input: std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    /// Every planned task, by chunk id.
    tasks: std::sync::Arc<std::collections::HashMap<u64, crate::plan::ChunkTask>>,
}

impl ChunkFeed {
    /// The schema of the chunk-id child.
    pub fn ids_schema() -> arrow::datatypes::SchemaRef {
        use arrow::datatypes::{DataType, Field, Schema};
        std::sync::Arc::new(Schema::new(vec![Field::new("chunk", DataType::UInt64, false)]))
    }

    /// Tasks split into output partitions (no partition gives one empty partition).
    pub fn new(partitions: Vec<Vec<crate::plan::ChunkTask>>) -> datafusion::common::Result<Self> {
        use arrow::array::{RecordBatch, UInt64Array};
        let schema = Self::ids_schema();
        let batches: Vec<Vec<RecordBatch>> = if partitions.is_empty() {
            vec![vec![]]
        } else {
            partitions
                .iter()
                .map(|p| {
                    let ids = UInt64Array::from_iter_values(p.iter().map(|t| t.linear));
                    Ok(vec![RecordBatch::try_new(
                        schema.clone(),
                        vec![std::sync::Arc::new(ids)],
                    )?])
                })
                .collect::<datafusion::common::Result<_>>()?
        };
        let input = datafusion::datasource::memory::MemorySourceConfig::try_new_exec(&batches, schema, None)?;
        Ok(ChunkFeed {
            input,
            tasks: std::sync::Arc::new(partitions.into_iter().flatten().map(|t| (t.linear, t)).collect()),
        })
    }

    /// Planned `tasks` fed by `input` (e.g. both decoded from a serialized plan).
    pub fn from_parts(
        input: std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        tasks: Vec<crate::plan::ChunkTask>,
    ) -> datafusion::common::Result<Self> {
        let feed = ChunkFeed {
            input: input.clone(),
            tasks: std::sync::Arc::new(tasks.into_iter().map(|t| (t.linear, t)).collect()),
        };
        feed.with_input(input)
    }

    /// The same tasks fed by another child (e.g. one restricted to some partitions).
    pub fn with_input(
        &self,
        input: std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> datafusion::common::Result<Self> {
        if input.schema().fields() != Self::ids_schema().fields() {
            return datafusion::common::internal_err!(
                "a chunk feed needs a child of chunk ids, got {}",
                input.schema()
            );
        }
        Ok(ChunkFeed {
            input,
            tasks: self.tasks.clone(),
        })
    }

    /// Output partitions (those of the child).
    pub fn partition_count(&self) -> usize {
        self.input.properties().output_partitioning().partition_count()
    }

    /// Properties of a node with `schema` fed by this feed: one output partition per
    /// child partition, bounded, cooperative.
    pub(crate) fn properties(
        &self,
        schema: &arrow::datatypes::SchemaRef,
        emission: datafusion::physical_plan::execution_plan::EmissionType,
    ) -> datafusion::physical_plan::PlanProperties {
        use datafusion::physical_plan::execution_plan::{Boundedness, SchedulingType};
        datafusion::physical_plan::PlanProperties::new(
            datafusion::physical_expr::EquivalenceProperties::new(schema.clone()),
            datafusion::physical_plan::Partitioning::UnknownPartitioning(self.partition_count()),
            emission,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative)
    }

    /// Number of planned chunks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when no chunk is planned.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Every planned chunk id, ascending.
    pub fn chunk_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.tasks.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The tasks of output `partition`, in the child's order.
    pub(crate) async fn tasks_of(
        &self,
        partition: usize,
        context: std::sync::Arc<datafusion::execution::TaskContext>,
        node: &str,
    ) -> datafusion::common::Result<Vec<crate::plan::ChunkTask>> {
        use arrow::array::AsArray;
        use arrow::datatypes::UInt64Type;
        let stream = self.input.execute(partition, context)?;
        let batches = datafusion::physical_plan::common::collect(stream).await?;
        let mut out = Vec::new();
        for b in &batches {
            let ids = b.column(0).as_primitive_opt::<UInt64Type>().ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!("{node}: chunk ids are not UInt64"))
            })?;
            for id in ids.values() {
                let task = self.tasks.get(id).ok_or_else(|| {
                    datafusion::error::DataFusionError::Internal(format!("{node}: chunk {id} was not planned"))
                })?;
                out.push(task.clone());
            }
        }
        Ok(out)
    }
}

mod aggregate;
mod cells;
pub mod fold;
mod scan;

pub use aggregate::{AggFunc, AggSpec, AggregatePlan, MAX_DENSE_GROUPS, TetAggregateExec, sum_type};
pub use cells::{axis_positions, for_each_selected_run, value_array};
pub use scan::{ScanSummary, TetScanExec};

/// Counters of object store traffic of one partition (`requests`, `bytes_fetched`); only
/// plans over object store files have them.
#[derive(Debug, Clone)]
pub(crate) struct FetchMetrics {
    requests: datafusion::physical_plan::metrics::Count,
    bytes_fetched: datafusion::physical_plan::metrics::Count,
}

impl FetchMetrics {
    pub(crate) fn new(set: &datafusion::physical_plan::metrics::ExecutionPlanMetricsSet, partition: usize) -> Self {
        use datafusion::physical_plan::metrics::MetricBuilder;
        FetchMetrics {
            requests: MetricBuilder::new(set).counter("requests", partition),
            bytes_fetched: MetricBuilder::new(set).counter("bytes_fetched", partition),
        }
    }
}

/// The payloads of output `partition` of a node fed by `feed`: its chunk ids first, then
/// [`payload_stream`] over their tasks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn feed_payloads(
    feed: ChunkFeed,
    partition: usize,
    context: std::sync::Arc<datafusion::execution::TaskContext>,
    node: &'static str,
    source: std::sync::Arc<crate::io::TetSource>,
    dataset: usize,
    need_values: bool,
    metrics: Option<FetchMetrics>,
) -> futures::stream::BoxStream<'static, datafusion::common::Result<Payload>> {
    use futures::{StreamExt, TryStreamExt};
    let opts = crate::sql::TetConfig::fetch_options_of(&context);
    futures::stream::once(async move {
        let tasks = feed.tasks_of(partition, context, node).await?;
        Ok::<_, datafusion::error::DataFusionError>(payload_stream(source, dataset, tasks, need_values, opts, metrics))
    })
    .try_flatten()
    .boxed()
}

/// A chunk task with its stored payload (`None` when the payload is not needed).
pub(crate) type Payload = (crate::plan::ChunkTask, Option<bytes::Bytes>);

/// The tasks of one partition with their stored payloads, in task order.
///
/// Local files hand out slices of the mmap. Object stores are read a window of
/// `opts.window` stored bytes at a time (coalesced range requests, at most
/// `opts.concurrency` in flight), with the next window fetched while the current one is
/// consumed: memory is bounded by two windows, never by the file size.
pub(crate) fn payload_stream(
    source: std::sync::Arc<crate::io::TetSource>,
    dataset: usize,
    tasks: Vec<crate::plan::ChunkTask>,
    need_values: bool,
    opts: crate::io::FetchOptions,
    metrics: Option<FetchMetrics>,
) -> futures::stream::BoxStream<'static, datafusion::common::Result<Payload>> {
    use datafusion::error::DataFusionError;
    use futures::{StreamExt, TryStreamExt};
    if !need_values {
        return futures::stream::iter(tasks.into_iter().map(|t| Ok((t, None)))).boxed();
    }
    let ds = &source.catalog.datasets[dataset];
    let spans: Vec<std::ops::Range<u64>> = tasks
        .iter()
        .map(|t| {
            let (_, e) = source.catalog.chunk(ds, t.linear);
            e.payload_offset..e.payload_offset + e.stored_byte_len
        })
        .collect();
    let window = if source.is_remote() { opts.window } else { u64::MAX };
    let sizes: Vec<u64> = spans.iter().map(|s| s.end - s.start).collect();
    let groups = crate::io::windows(&sizes, window);
    let tasks = std::sync::Arc::new(tasks);
    let spans = std::sync::Arc::new(spans);
    futures::stream::iter(groups)
        .map(move |g| {
            let (source, tasks, spans, metrics) = (source.clone(), tasks.clone(), spans.clone(), metrics.clone());
            async move {
                let fetched = source
                    .fetch(&spans[g.clone()], &opts)
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                if let Some(m) = &metrics {
                    m.requests.add(fetched.requests as usize);
                    m.bytes_fetched.add(fetched.bytes_fetched as usize);
                }
                let items: Vec<datafusion::common::Result<Payload>> = tasks[g]
                    .iter()
                    .cloned()
                    .zip(fetched.spans)
                    .map(|(t, b)| Ok((t, Some(b))))
                    .collect();
                Ok::<_, DataFusionError>(futures::stream::iter(items))
            }
        })
        .buffered(2)
        .try_flatten()
        .boxed()
}

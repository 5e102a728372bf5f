//! DataFusion ExecutionPlans over `.tet` chunks and their kernels.
//!
//! Owns: turning chunk tasks into Arrow batches ([`TetScanExec`]) and the metrics they
//! report. Must not decide which chunks to read (that is `plan` and `sql`).

/// The `ExecutionPlan` methods shared by this crate's leaf nodes (no children, no
/// expressions, properties in `self.cache`, metrics in `self.metrics`).
macro_rules! leaf_plan_methods {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
        fn properties(&self) -> &Arc<PlanProperties> {
            &self.cache
        }
        fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
            vec![]
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
            if !children.is_empty() {
                return internal_err!("{} has no children", $name);
            }
            Ok(self)
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

/// The chunk tasks of output `partition` (a plan with no tasks still has partition 0).
fn partition_tasks(
    partitions: &[Vec<crate::plan::ChunkTask>],
    partition: usize,
    node: &str,
) -> datafusion::common::Result<Vec<crate::plan::ChunkTask>> {
    match partitions.get(partition) {
        Some(t) => Ok(t.clone()),
        None if partition == 0 => Ok(vec![]),
        None => datafusion::common::internal_err!("{node}: no partition {partition}"),
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

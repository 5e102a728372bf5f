//! [`ChunkFeed`]: which chunks each output partition of a node reads, as the node's one
//! child; and the `ExecutionPlan` methods the nodes over a feed share.

use crate::plan::{AccessPlan, ChunkTask};
use arrow::array::{AsArray, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use datafusion::common::{Result, internal_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PlanProperties};
use std::sync::Arc;

/// The `ExecutionPlan` methods shared by this crate's nodes: one child (their
/// [`ChunkFeed`]'s input), no expressions, properties in `self.cache`, metrics in
/// `self.metrics`, and `self.with_feed(feed)` to rebuild over a new child.
macro_rules! chunk_node_methods {
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
pub(crate) use chunk_node_methods;

/// Which chunks each output partition of a node reads.
///
/// The [`AccessPlan`] owns the chunk tasks; the partitions are a child plan (a
/// `DataSourceExec` over memory, one batch of chunk ids per partition) whose partition
/// `i` names the chunks of output partition `i`. Engines that split a stage into tasks by
/// restricting its leaves to some partitions (Ballista does this for `DataSourceExec`,
/// and would run every partition of an unknown leaf in every task) thereby hand each
/// task its own chunks and nothing else.
#[derive(Debug, Clone)]
pub struct ChunkFeed {
    /// Emits the chunk ids (column `chunk`, UInt64) of each output partition.
    pub input: Arc<dyn ExecutionPlan>,
    /// What is read: the per-axis selection and every planned task.
    pub access: Arc<AccessPlan>,
    /// (chunk id, position in `access.tasks`), ascending by id (a sort of the ids, which
    /// every planned query builds).
    index: Arc<Vec<(u64, usize)>>,
}

impl ChunkFeed {
    /// The schema of the chunk-id child.
    pub fn ids_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("chunk", DataType::UInt64, false)]))
    }

    /// A chunk-id child with one partition per list (no list gives one empty partition).
    pub fn ids_input(partitions: &[Vec<u64>]) -> Result<Arc<dyn ExecutionPlan>> {
        let schema = Self::ids_schema();
        let batches: Vec<Vec<RecordBatch>> = if partitions.is_empty() {
            vec![vec![]]
        } else {
            partitions
                .iter()
                .map(|p| {
                    let ids = UInt64Array::from_iter_values(p.iter().copied());
                    Ok(vec![RecordBatch::try_new(schema.clone(), vec![Arc::new(ids)])?])
                })
                .collect::<Result<_>>()?
        };
        let input: Arc<dyn ExecutionPlan> = MemorySourceConfig::try_new_exec(&batches, schema, None)?;
        Ok(input)
    }

    /// `access` split by `partitions` (chunk ids per output partition).
    pub fn new(access: AccessPlan, partitions: &[Vec<u64>]) -> Result<Self> {
        Self::from_input(access, Self::ids_input(partitions)?)
    }

    /// `access` fed by `input` (e.g. both decoded from a serialized plan).
    pub fn from_input(access: AccessPlan, input: Arc<dyn ExecutionPlan>) -> Result<Self> {
        let mut index: Vec<(u64, usize)> = access.tasks.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
        index.sort_unstable();
        ChunkFeed {
            input: input.clone(),
            access: Arc::new(access),
            index: Arc::new(index),
        }
        .with_input(input)
    }

    /// The same plan fed by another child (e.g. one restricted to some partitions).
    pub fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> Result<Self> {
        if input.schema().fields() != Self::ids_schema().fields() {
            return internal_err!("a chunk feed needs a child of chunk ids, got {}", input.schema());
        }
        Ok(ChunkFeed {
            input,
            access: self.access.clone(),
            index: self.index.clone(),
        })
    }

    /// Output partitions (those of the child).
    pub fn partition_count(&self) -> usize {
        self.input.properties().output_partitioning().partition_count()
    }

    /// Properties of a node with `schema` fed by this feed: one output partition per
    /// child partition, bounded, cooperative.
    pub(crate) fn properties(&self, schema: &SchemaRef, emission: EmissionType) -> PlanProperties {
        PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(self.partition_count()),
            emission,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative)
    }

    /// The tasks of each output partition, in order, when the child holds them in memory
    /// (as [`ChunkFeed::ids_input`] makes it, here or decoded from a serialized plan);
    /// `None` for another child, whose partitions are known only when run.
    pub fn partition_tasks(&self) -> Option<Vec<Vec<Arc<ChunkTask>>>> {
        let source = self.input.downcast_ref::<DataSourceExec>()?;
        let memory = source.data_source().downcast_ref::<MemorySourceConfig>()?;
        memory
            .partitions()
            .iter()
            .map(|batches| {
                let mut tasks = Vec::new();
                for b in batches {
                    for id in b.column(0).as_primitive_opt::<UInt64Type>()?.values() {
                        let at = self.index.binary_search_by_key(id, |&(id, _)| id).ok()?;
                        tasks.push(self.access.tasks[self.index[at].1].clone());
                    }
                }
                Some(tasks)
            })
            .collect()
    }

    /// Number of planned chunks.
    pub fn len(&self) -> usize {
        self.access.tasks.len()
    }

    /// True when no chunk is planned.
    pub fn is_empty(&self) -> bool {
        self.access.tasks.is_empty()
    }

    /// Every planned chunk id, ascending.
    pub fn chunk_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.access.tasks.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids
    }

    /// The tasks of output `partition`, in the child's order.
    pub(crate) async fn tasks_of(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        node: &str,
    ) -> Result<Vec<Arc<ChunkTask>>> {
        let stream = self.input.execute(partition, context)?;
        let batches = datafusion::physical_plan::common::collect(stream).await?;
        let mut out = Vec::new();
        for b in &batches {
            let Some(ids) = b.column(0).as_primitive_opt::<UInt64Type>() else {
                return internal_err!("{node}: chunk ids are not UInt64");
            };
            for id in ids.values() {
                let Ok(at) = self.index.binary_search_by_key(id, |&(id, _)| id) else {
                    return internal_err!("{node}: chunk {id} was not planned");
                };
                out.push(self.access.tasks[self.index[at].1].clone());
            }
        }
        Ok(out)
    }
}

//! Tables handed to the host: our providers scanned in a session of ours
//! ([`HostTable`]), their plans wrapped so nothing unwinds through the FFI
//! ([`GuardExec`]).

use crate::session::{TetOverrides, guarded, local_state, on_runtime, panic_text};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, Statistics};
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, displayable};
use futures::StreamExt;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

/// One of our tables in the host's session: scans run in a session of ours made from the
/// host's options ([`local_state`]) and this table's own `tet.*` options, on our runtime.
#[derive(Debug)]
pub struct HostTable {
    inner: Arc<dyn TableProvider>,
    overrides: TetOverrides,
}

impl HostTable {
    /// `inner` with the table's own `tet.*` options.
    pub fn new(inner: Arc<dyn TableProvider>, overrides: TetOverrides) -> Self {
        HostTable { inner, overrides }
    }
}

#[async_trait]
impl TableProvider for HostTable {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        guarded("supports_filters_pushdown", || {
            self.inner.supports_filters_pushdown(filters)
        })
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let local = local_state(Some(state.config()), &self.overrides)?;
        let (inner, filters, projection) = (self.inner.clone(), filters.to_vec(), projection.cloned());
        on_runtime(async move {
            let plan = inner.scan(&local, projection.as_ref(), &filters, limit).await?;
            Ok(Arc::new(GuardExec::new(plan, None)) as Arc<dyn ExecutionPlan>)
        })
        .await
    }
}

/// A plan of ours as the host sees it: a leaf (the host's optimizer cannot rewrite what
/// it cannot see into), named by the one-line display of the plan it runs so the host's
/// EXPLAIN shows it, executing that plan in its own task context when it has one (a plan
/// made in a session of ours) and turning a panic into an error.
#[derive(Debug)]
pub struct GuardExec {
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Option<Arc<TaskContext>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    name: String,
}

impl GuardExec {
    /// Run `plan` (in `task_ctx`, else in the caller's).
    pub fn new(plan: Arc<dyn ExecutionPlan>, task_ctx: Option<Arc<TaskContext>>) -> Self {
        let schema = plan.schema();
        Self::with_schema(plan, task_ctx, schema)
    }

    /// [`GuardExec::new`], its batches relabelled with `schema` (the same columns; its
    /// field metadata may differ: the logical plan's, which DataFusion keeps, where
    /// rewritten nodes emit plain fields).
    pub fn with_schema(plan: Arc<dyn ExecutionPlan>, task_ctx: Option<Arc<TaskContext>>, schema: SchemaRef) -> Self {
        let mut properties = plan.properties().as_ref().clone();
        if schema != plan.schema() {
            // Orderings and partitioning name columns by position: the same ones.
            let equivalences = properties
                .equivalence_properties()
                .clone()
                .with_new_schema(schema.clone())
                .unwrap_or_else(|_| datafusion::physical_expr::EquivalenceProperties::new(schema.clone()));
            properties = properties.with_eq_properties(equivalences);
        }
        let name = one_line(&plan);
        GuardExec {
            plan,
            task_ctx,
            schema,
            properties: Arc::new(properties),
            name,
        }
    }
}

/// `plan`'s nodes, one line: each node's own display, children after ` <- `.
fn one_line(plan: &Arc<dyn ExecutionPlan>) -> String {
    let text = displayable(plan.as_ref()).indent(false).to_string();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" <- ")
}

impl DisplayAs for GuardExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl ExecutionPlan for GuardExec {
    fn name(&self) -> &str {
        &self.name
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
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

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match children.is_empty() {
            true => Ok(self),
            false => Err(DataFusionError::Internal("GuardExec has no children".into())),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let context = self.task_ctx.clone().unwrap_or(context);
        let stream = guarded("execute", || self.plan.execute(partition, context))?;
        let schema = self.schema.clone();
        let relabel = schema != self.plan.schema();
        let out_schema = schema.clone();
        let mut inner = stream;
        let mut done = false;
        let guarded_stream = futures::stream::poll_fn(move |cx| {
            if done {
                return Poll::Ready(None);
            }
            match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll_next_unpin(cx))) {
                Ok(Poll::Ready(Some(Ok(batch)))) if relabel => Poll::Ready(Some(relabelled(batch, &out_schema))),
                Ok(p) => p,
                Err(p) => {
                    done = true;
                    Poll::Ready(Some(Err(DataFusionError::Execution(format!(
                        "datafusion-tet panicked: {}",
                        panic_text(p)
                    )))))
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, guarded_stream)))
    }

    fn statistics_from_inputs(&self, _input: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        StatisticsContext::new().compute(self.plan.as_ref(), args)
    }
}

/// `batch` under `schema` (the same columns).
fn relabelled(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        batch.columns().to_vec(),
        &options,
    )?)
}

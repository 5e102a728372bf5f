//! [`TetAggregateTable`]: the table the aggregate pushdown scans, whose scan is
//! [`TetAggregateExec`] folding an aggregation over a `.tet` table.

use super::session_options::TetConfig;
use crate::exec::{ChunkFeed, TetAggregateExec};
use crate::plan::{AccessPlan, AggregateOutput, Aggregation, TableModel};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result;
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// A table whose scan is [`TetAggregateExec`]: an aggregation over a table with pushed
/// axis filters, as partial states or as the aggregates' values ([`AggregateOutput`]).
#[derive(Debug, Clone)]
pub struct TetAggregateTable {
    table: Arc<TableModel>,
    filters: Vec<Expr>,
    aggregation: Aggregation,
    output: AggregateOutput,
    schema: SchemaRef,
}

impl TetAggregateTable {
    /// `aggregation` over `table` restricted by `filters`, emitting `output`.
    pub fn new(table: Arc<TableModel>, filters: Vec<Expr>, aggregation: Aggregation, output: AggregateOutput) -> Self {
        let schema = aggregation.schema(output);
        TetAggregateTable {
            table,
            filters,
            aggregation,
            output,
            schema,
        }
    }

    /// What its rows are.
    pub fn output(&self) -> AggregateOutput {
        self.output
    }

    /// The underlying table.
    pub fn table(&self) -> &Arc<TableModel> {
        &self.table
    }
    /// Pushed axis filters.
    pub fn filters(&self) -> &[Expr] {
        &self.filters
    }
    /// What is aggregated.
    pub fn aggregation(&self) -> &Aggregation {
        &self.aggregation
    }
}

#[async_trait]
impl TableProvider for TetAggregateTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Temporary
    }
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Unsupported; filters.len()])
    }
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let config = TetConfig::of(state.config());
        let table = &config.table(&self.table);
        let access = AccessPlan::build(table, state, &self.filters)?;
        let read = self.aggregation.value_columns(table);
        let outer = self.aggregation.partition_axes(&access.selection);
        let partitions = access.partitions(table, state.config().target_partitions(), &read, &outer);
        let exec: Arc<dyn ExecutionPlan> = Arc::new(TetAggregateExec::try_new(
            table.clone(),
            self.aggregation.clone(),
            ChunkFeed::new(access, &partitions)?,
            config.fetch_options(),
            self.output,
        )?);
        match projection {
            Some(p) if *p != (0..self.schema.fields().len()).collect::<Vec<_>>() => {
                let exprs = p
                    .iter()
                    .map(|&i| {
                        let f = self.schema.field(i);
                        let c: Arc<dyn datafusion::physical_expr::PhysicalExpr> =
                            Arc::new(datafusion::physical_expr::expressions::Column::new(f.name(), i));
                        (c, f.name().clone())
                    })
                    .collect::<Vec<_>>();
                Ok(Arc::new(
                    datafusion::physical_plan::projection::ProjectionExec::try_new(exprs, exec)?,
                ))
            }
            _ => Ok(exec),
        }
    }
}

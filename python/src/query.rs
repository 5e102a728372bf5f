//! The fold from Python: SQL planned by this crate's own session (its logical rules, the
//! aggregate fold, `tet.*` options), handed to the host as a table whose scan runs that
//! plan lazily inside the host's plan (`tet_query('<SQL>')`, `datafusion_tet.sql`).
//!
//! datafusion-python 55 takes no foreign logical optimizer rule, so a plain `ctx.sql`
//! over `tet()` plans DataFusion's row aggregate over our scan; here the aggregate is
//! planned where our rules run.

use crate::session::{block_on, local_context, on_runtime};
use crate::tables::GuardExec;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{Column, Result};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::{SQLOptions, SessionConfig};
use std::sync::Arc;

/// The result of a query planned by our session, as a table.
#[derive(Debug)]
pub struct QueryTable {
    df: DataFrame,
    schema: SchemaRef,
}

/// Plan `query` (a query: no DDL, DML or `SET`) in a context of ours.
fn dataframe(host: Option<&SessionConfig>, overrides: &[(String, String)], query: &str) -> Result<DataFrame> {
    let ctx = local_context(host, overrides)?;
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    block_on(async { ctx.sql_with_options(query, options).await })
}

impl QueryTable {
    /// Plan `query` in a session of ours made from `host`'s options and `overrides`.
    pub fn plan(host: Option<&SessionConfig>, overrides: &[(String, String)], query: &str) -> Result<Self> {
        let df = dataframe(host, overrides, query)?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        Ok(QueryTable { df, schema })
    }
}

#[async_trait]
impl TableProvider for QueryTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut df = self.df.clone();
        let schema = match projection {
            Some(p) => {
                let columns = p
                    .iter()
                    .map(|&i| {
                        let (qualifier, field) = df.schema().qualified_field(i);
                        Expr::Column(Column::new(qualifier.cloned(), field.name()))
                    })
                    .collect::<Vec<_>>();
                df = df.select(columns)?;
                Arc::new(self.schema.project(p)?)
            }
            None => self.schema.clone(),
        };
        if let Some(n) = limit {
            df = df.limit(0, Some(n))?;
        }
        on_runtime(async move {
            let task_ctx = Arc::new(df.task_ctx());
            let plan = df.create_physical_plan().await?;
            Ok(Arc::new(GuardExec::with_schema(plan, Some(task_ctx), schema)) as Arc<dyn ExecutionPlan>)
        })
        .await
    }
}

/// The physical plan of `query` in our session (what `tet_query` runs), indented.
pub fn explain(host: Option<&SessionConfig>, overrides: &[(String, String)], query: &str) -> Result<String> {
    let df = dataframe(host, overrides, query)?;
    let plan = block_on(async { df.create_physical_plan().await })?;
    Ok(displayable(plan.as_ref()).indent(true).to_string())
}

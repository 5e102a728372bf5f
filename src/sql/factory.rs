//! `CREATE EXTERNAL TABLE t STORED AS TET LOCATION 'path' OPTIONS ('tet.dataset' 'temp')`,
//! or `OPTIONS ('tet.datasets' 't2m,sst')` for several datasets of the file in one table.
//!
//! datafusion-cli validates every option key against the table-options namespaces before
//! the factory runs, so the `tet` namespace is registered as a table-options extension
//! ([`TetTableOptions`]). In a plain `SessionContext` the keys reach the factory as
//! written (`tet.dataset`), or as `format.dataset` when written undotted (`'dataset'`).

use super::archive::open_table;
use super::table::TetTableProvider;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::CreateExternalTable;
use std::any::Any;
use std::sync::Arc;

/// Options of `STORED AS TET` tables, namespace `tet`.
#[derive(Debug, Clone, Default)]
pub struct TetTableOptions {
    /// The dataset to expose (`tet.dataset`).
    pub dataset: Option<String>,
    /// Several datasets to expose as one table, comma-separated (`tet.datasets`).
    pub datasets: Option<String>,
    /// The axis an archive's files are concatenated along (`tet.concat_axis`).
    pub concat_axis: Option<String>,
}

impl ConfigExtension for TetTableOptions {
    const PREFIX: &'static str = "tet";
}

impl ExtensionOptions for TetTableOptions {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key.strip_prefix("tet.").unwrap_or(key) {
            "dataset" => {
                self.dataset = Some(value.to_owned());
                Ok(())
            }
            "datasets" => {
                self.datasets = Some(value.to_owned());
                Ok(())
            }
            "concat_axis" => {
                self.concat_axis = Some(value.to_owned());
                Ok(())
            }
            other => plan_err!("unknown option tet.{other} (supported: tet.dataset, tet.datasets, tet.concat_axis)"),
        }
    }
    fn entries(&self) -> Vec<ConfigEntry> {
        vec![
            ConfigEntry {
                key: "tet.dataset".into(),
                value: self.dataset.clone(),
                description: "dataset of the .tet file exposed by the table",
            },
            ConfigEntry {
                key: "tet.datasets".into(),
                value: self.datasets.clone(),
                description: "datasets of one shape exposed as one table (comma-separated), a value column each",
            },
            ConfigEntry {
                key: "tet.concat_axis".into(),
                value: self.concat_axis.clone(),
                description: "the axis the files of an archive are concatenated along",
            },
        ]
    }
}

/// Creates [`TetTableProvider`]s for `STORED AS TET`.
#[derive(Debug, Default)]
pub struct TetTableFactory;

#[async_trait]
impl TableProviderFactory for TetTableFactory {
    async fn create(&self, state: &dyn Session, cmd: &CreateExternalTable) -> Result<Arc<dyn TableProvider>> {
        let [location] = cmd.locations.as_slice() else {
            return plan_err!("STORED AS TET takes exactly one LOCATION, got {}", cmd.locations.len());
        };
        let (mut dataset, mut datasets, mut concat_axis) = (None, None, None);
        for (k, v) in &cmd.options {
            match k.as_str() {
                "tet.dataset" | "format.dataset" | "dataset" => dataset = Some(v.clone()),
                "tet.datasets" | "format.datasets" | "datasets" => datasets = Some(v.clone()),
                "tet.concat_axis" | "format.concat_axis" | "concat_axis" => concat_axis = Some(v.clone()),
                // Object store settings (datafusion-cli configures the store from these
                // before the table is created).
                k if k.starts_with("aws.") || k.starts_with("gcp.") => {}
                other => {
                    return plan_err!(
                        "unknown option {other:?} for STORED AS TET (supported: 'tet.dataset', 'tet.datasets', \
                         'tet.concat_axis')"
                    );
                }
            }
        }
        let names: Vec<&str> = match (&dataset, &datasets) {
            (Some(_), Some(_)) => return plan_err!("STORED AS TET takes 'tet.dataset' or 'tet.datasets', not both"),
            (None, Some(list)) => {
                let names: Vec<&str> = list.split(',').map(str::trim).collect();
                if names.iter().any(|n| n.is_empty()) {
                    return plan_err!("'tet.datasets' {list:?} names an empty dataset; write e.g. 't2m,sst'");
                }
                names
            }
            (dataset, None) => dataset.iter().map(String::as_str).collect(),
        };
        let (config, runtime) = (state.config(), state.runtime_env());
        let model = open_table(config, runtime, location, &names, concat_axis.as_deref()).await?;
        let table = TetTableProvider::from_model(model);
        if !cmd.schema.fields().is_empty() {
            let declared: Vec<_> = cmd
                .schema
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect();
            let actual: Vec<_> = table
                .schema()
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect();
            if declared != actual {
                return plan_err!(
                    "declared columns {declared:?} differ from the file's {actual:?}; omit the column list"
                );
            }
        }
        Ok(Arc::new(table))
    }
}

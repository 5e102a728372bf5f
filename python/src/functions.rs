//! The table functions and the `STORED AS TET` factory as the host calls them: each call
//! runs in a session of ours made from the host's ([`local_state`]) and returns a
//! [`HostTable`] whose filters the host may push (datafusion-ffi 55 hands a table
//! function's table to the host with filter pushdown off; a table already wrapped for the
//! FFI, as here, keeps its own setting).

use crate::query::QueryTable;
use crate::session::{block_on, guarded, handle, local_state, on_runtime};
use crate::tables::HostTable;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider, TableProviderFactory};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{CreateExternalTable, Expr};
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::{FFI_TableProvider, ForeignTableProvider};
use datafusion_tet::sql::{TetChunksFunction, TetDatasetsFunction, TetFilesFunction, TetFunction};
use datafusion_tet::{TetTableFactory, TetTableProvider};
use std::sync::Arc;

/// Which function a [`HostFunction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `tet(path [, dataset, ...])`
    Tet,
    /// `tet_datasets(path)`
    Datasets,
    /// `tet_chunks(path [, dataset])`
    Chunks,
    /// `tet_files(path [, dataset, ...])`
    Files,
    /// `tet_query('<SQL>')`
    Query,
}

impl Kind {
    /// Every function, with its SQL name.
    pub const ALL: [(&'static str, Kind); 5] = [
        ("tet", Kind::Tet),
        ("tet_datasets", Kind::Datasets),
        ("tet_chunks", Kind::Chunks),
        ("tet_files", Kind::Files),
        ("tet_query", Kind::Query),
    ];
}

/// A table function of ours for the host, with the codec the host gave for it.
#[derive(Debug)]
pub struct HostFunction {
    kind: Kind,
    codec: FFI_LogicalExtensionCodec,
}

impl HostFunction {
    /// `kind`, handed to a host whose codec is `codec`.
    pub fn new(kind: Kind, codec: FFI_LogicalExtensionCodec) -> Self {
        HostFunction { kind, codec }
    }

    fn call(&self, args: &TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let function: &dyn TableFunctionImpl = match self.kind {
            Kind::Query => {
                let query = query_arg(exprs)?;
                return Ok(Arc::new(QueryTable::plan(Some(args.session().config()), &[], &query)?));
            }
            Kind::Tet => &TetFunction,
            Kind::Datasets => &TetDatasetsFunction,
            Kind::Chunks => &TetChunksFunction,
            Kind::Files => &TetFilesFunction,
        };
        let state = local_state(Some(args.session().config()), &[])?;
        // Our functions wait on object stores through the runtime they run in.
        let _guard = crate::session::handle_enter();
        let table = function.call_with_args(TableFunctionArgs::new(exprs, &state))?;
        Ok(Arc::new(HostTable::new(table, vec![])))
    }
}

impl TableFunctionImpl for HostFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let table = guarded("a table function", || self.call(&args))?;
        Ok(for_host(table, self.kind != Kind::Query, self.codec.clone()))
    }
}

/// `table` wrapped for the FFI with filter pushdown `pushdown`, on our runtime.
pub fn for_host(
    table: Arc<dyn TableProvider>,
    pushdown: bool,
    codec: FFI_LogicalExtensionCodec,
) -> Arc<dyn TableProvider> {
    let ffi = FFI_TableProvider::new_with_ffi_codec(table, pushdown, Some(handle()), codec);
    Arc::new(ForeignTableProvider(ffi))
}

/// The one string argument of `tet_query`.
fn query_arg(exprs: &[Expr]) -> Result<String> {
    let usage = "tet_query('<SQL over tet(...) tables>')";
    match exprs {
        [Expr::Literal(v, _)] => match v.try_as_str() {
            Some(Some(s)) => Ok(s.to_owned()),
            _ => plan_err!("{usage}: the argument must be a string, got {v:?}"),
        },
        _ => plan_err!("{usage} takes one string literal; got {} argument(s)", exprs.len()),
    }
}

/// `STORED AS TET` for the host: [`TetTableFactory`] in a session of ours.
#[derive(Debug, Default)]
pub struct HostFactory;

#[async_trait]
impl TableProviderFactory for HostFactory {
    async fn create(&self, state: &dyn Session, cmd: &CreateExternalTable) -> Result<Arc<dyn TableProvider>> {
        let local = local_state(Some(state.config()), &[])?;
        let cmd = cmd.clone();
        on_runtime(async move {
            let table = TetTableFactory.create(&local, &cmd).await?;
            Ok(Arc::new(HostTable::new(table, vec![])) as Arc<dyn TableProvider>)
        })
        .await
    }
}

/// Plan and open synchronously (Python calls).
pub fn open_blocking(
    location: &str,
    datasets: &[String],
    overrides: &crate::session::TetOverrides,
) -> Result<Arc<dyn TableProvider>> {
    let state = local_state(None, overrides)?;
    let names: Vec<&str> = datasets.iter().map(String::as_str).collect();
    let table = block_on(TetTableProvider::open_datasets(&state, location, &names))?;
    Ok(Arc::new(HostTable::new(Arc::new(table), overrides.clone())))
}

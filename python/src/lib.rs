//! `datafusion_tet._internal`: the Rust side of the Python package `datafusion_tet`.
//!
//! It hands datafusion-python 55 (through `datafusion-ffi` 55) our table functions
//! (`__datafusion_table_function__`), the `STORED AS TET` factory
//! (`__datafusion_table_provider_factory__`), tables (`__datafusion_table_provider__`)
//! and the `tet.*` options as a config extension (`__datafusion_extension_options__`).
//! The Python package (`python/datafusion_tet/__init__.py`) checks the host's DataFusion
//! major against [`ffi_major`] before any of it is used.

mod functions;
mod query;
mod session;
mod tables;

use datafusion::common::DataFusionError;
use datafusion::prelude::SessionConfig;
use datafusion_ffi::config::extension_options::FFI_ExtensionOptions;
use datafusion_ffi::execution::{FFI_TaskContext, FFI_TaskContextProvider};
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_ffi::table_provider_factory::FFI_TableProviderFactory;
use datafusion_ffi::udtf::FFI_TableFunction;
use datafusion_tet::plan::AXIS_KEY;
use datafusion_tet::sql::TetConfig;
use functions::{HostFactory, HostFunction, Kind};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use session::TetOverrides;
use std::ptr::NonNull;
use std::sync::Arc;

// What crosses the FFI is freed by the library that allocated it (Arrow's release
// callbacks, stabby's allocation prefix), so this library may use its own allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    datafusion_tet,
    TetError,
    PyException,
    "An error of datafusion-tet (a file that cannot be opened, a bad dataset or option, a query that fails)."
);

fn py_err(e: DataFusionError) -> PyErr {
    TetError::new_err(e.to_string())
}

/// The host's logical codec: from its session (`__datafusion_logical_extension_codec__`)
/// or a codec capsule.
fn codec_of(obj: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    let name = "__datafusion_logical_extension_codec__";
    let capsule = match obj.hasattr(name)? {
        true => obj.getattr(name)?.call0()?,
        false => obj.clone(),
    };
    let capsule = capsule.cast::<PyCapsule>()?;
    let data: NonNull<FFI_LogicalExtensionCodec> = capsule
        .pointer_checked(Some(c"datafusion_logical_extension_codec"))?
        .cast();
    Ok(unsafe { data.as_ref() }.clone())
}

/// The host session's options, when `session` can tell them
/// (`__datafusion_task_context_provider__`).
fn host_config(session: &Bound<'_, PyAny>) -> PyResult<Option<SessionConfig>> {
    let name = "__datafusion_task_context_provider__";
    if !session.hasattr(name)? {
        return Ok(None);
    }
    let capsule = session.getattr(name)?.call0()?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let data: NonNull<FFI_TaskContextProvider> = capsule
        .pointer_checked(Some(c"datafusion_task_context_provider"))?
        .cast();
    let provider = unsafe { data.as_ref() };
    // Only the options: converting the whole task context (`Arc<TaskContext>::try_from`)
    // would wrap every one of the host's functions again, on every query.
    let ctx: FFI_TaskContext = unsafe { (provider.task_ctx)(provider) }
        .into_result()
        .map_err(|e| TetError::new_err(format!("the host's session: {e}")))?;
    let config = unsafe { (ctx.session_config)(&ctx) };
    Ok(Some(SessionConfig::try_from(&config).map_err(py_err)?))
}

/// One of our table functions, for `ctx.register_udtf(udtf(f, name))`.
#[pyclass(frozen, name = "TableFunction", module = "datafusion_tet")]
struct PyTableFunction {
    name: &'static str,
    kind: Kind,
}

#[pymethods]
impl PyTableFunction {
    fn __datafusion_table_function__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = codec_of(&session)?;
        let f = HostFunction::new(self.kind, codec.clone());
        let ffi = FFI_TableFunction::new_with_ffi_codec(Arc::new(f), Some(session::handle()), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_function")
    }

    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    fn __repr__(&self) -> String {
        format!("datafusion_tet.TableFunction({})", self.name)
    }
}

/// Our table functions by SQL name: `tet`, `tet_datasets`, `tet_chunks`, `tet_files`,
/// `tet_query`.
#[pyfunction]
fn table_functions() -> Vec<(String, PyTableFunction)> {
    Kind::ALL
        .iter()
        .map(|&(name, kind)| (name.to_string(), PyTableFunction { name, kind }))
        .collect()
}

/// The `STORED AS TET` factory, for `ctx.register_table_factory("TET", f)`.
#[pyclass(frozen, name = "TableFactory", module = "datafusion_tet")]
struct PyTableFactory;

#[pymethods]
impl PyTableFactory {
    #[new]
    fn new() -> Self {
        PyTableFactory
    }

    fn __datafusion_table_provider_factory__<'py>(
        &self,
        py: Python<'py>,
        codec: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = codec_of(&codec)?;
        let factory =
            FFI_TableProviderFactory::new_with_ffi_codec(Arc::new(HostFactory), Some(session::handle()), codec);
        PyCapsule::new_with_value(py, factory, c"datafusion_table_provider_factory")
    }
}

/// An opened `.tet` table (one file, or an archive: a glob, a folder, a URL), for
/// `ctx.register_table(name, t)` / `ctx.read_table(t)`.
#[pyclass(frozen, name = "Table", module = "datafusion_tet")]
struct PyTable {
    path: String,
    datasets: Vec<String>,
    table: Arc<dyn datafusion::catalog::TableProvider>,
}

#[pymethods]
impl PyTable {
    /// Open `path` with the datasets `datasets` (none: the file's only one) and the
    /// `tet.*` options `options` (key, value).
    #[new]
    fn new(py: Python<'_>, path: String, datasets: Vec<String>, options: TetOverrides) -> PyResult<Self> {
        let table = py
            .detach(|| functions::open_blocking(&path, &datasets, &options))
            .map_err(py_err)?;
        Ok(PyTable { path, datasets, table })
    }

    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = codec_of(&session)?;
        let ffi = FFI_TableProvider::new_with_ffi_codec(self.table.clone(), true, Some(session::handle()), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
    }

    /// The column names, axes first.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.table.schema().fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The axis columns, in dimension order.
    #[getter]
    fn axes(&self) -> Vec<String> {
        let schema = self.table.schema();
        let mut axes: Vec<(usize, String)> = schema
            .fields()
            .iter()
            .filter_map(|f| Some((f.metadata().get(AXIS_KEY)?.parse().ok()?, f.name().clone())))
            .collect();
        axes.sort();
        axes.into_iter().map(|(_, n)| n).collect()
    }

    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    #[getter]
    fn datasets(&self) -> Vec<String> {
        self.datasets.clone()
    }
}

/// SQL planned by our own session (our rules, the fold), as a table for
/// `ctx.read_table(q)`; planned when the host asks for the table.
#[pyclass(frozen, name = "Query", module = "datafusion_tet")]
struct PyQuery {
    query: String,
    options: TetOverrides,
}

#[pymethods]
impl PyQuery {
    #[new]
    fn new(query: String, options: TetOverrides) -> Self {
        PyQuery { query, options }
    }

    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = codec_of(&session)?;
        let host = host_config(&session)?;
        let table = py
            .detach(|| query::QueryTable::plan(host.as_ref(), &self.options, &self.query))
            .map_err(py_err)?;
        let ffi = FFI_TableProvider::new_with_ffi_codec(Arc::new(table), false, Some(session::handle()), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
    }

    #[getter]
    fn query(&self) -> &str {
        &self.query
    }
}

/// The physical plan our session makes of `query` (what `tet_query` and
/// `datafusion_tet.sql` run), indented; `session` (a host context) lends its options.
#[pyfunction]
#[pyo3(signature = (query, options, session = None))]
fn explain(
    py: Python<'_>,
    query: String,
    options: TetOverrides,
    session: Option<Bound<'_, PyAny>>,
) -> PyResult<String> {
    let host = match &session {
        Some(s) => host_config(s)?,
        None => None,
    };
    py.detach(|| query::explain(host.as_ref(), &options, &query))
        .map_err(py_err)
}

/// The `tet.*` options as a DataFusion config extension, for
/// `SessionConfig().with_extension(TetOptions(...))`: the host then takes `SET tet.x = y`
/// and hands the values to our tables.
#[pyclass(frozen, name = "Options", module = "datafusion_tet")]
struct PyOptions {
    config: TetConfig,
}

#[pymethods]
impl PyOptions {
    #[new]
    fn new(options: TetOverrides) -> PyResult<Self> {
        let config = session::tet_config(None, &options).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyOptions { config })
    }

    fn __datafusion_extension_options__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let mut ffi = FFI_ExtensionOptions::default();
        ffi.add_config(&self.config).map_err(py_err)?;
        PyCapsule::new_with_value(py, ffi, c"datafusion_extension_options")
    }

    /// The options as `tet.key` → value.
    fn entries(&self) -> Vec<(String, String)> {
        use datafusion::common::config::ExtensionOptions;
        self.config
            .entries()
            .into_iter()
            .filter_map(|e| Some((format!("tet.{}", e.key), e.value?)))
            .collect()
    }
}

/// The major version of DataFusion's FFI this library speaks (the host must match it).
#[pyfunction]
fn ffi_major() -> u64 {
    datafusion_ffi::version()
}

/// The DataFusion version this library is built on.
#[pyfunction]
fn datafusion_version() -> &'static str {
    datafusion::DATAFUSION_VERSION
}

/// The `tet.*` option keys.
#[pyfunction]
fn option_keys() -> Vec<String> {
    session::tet_option_keys()
}

#[pymodule]
fn _internal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TetError", m.py().get_type::<TetError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("AXIS_KEY", AXIS_KEY)?;
    m.add_class::<PyTableFunction>()?;
    m.add_class::<PyTableFactory>()?;
    m.add_class::<PyTable>()?;
    m.add_class::<PyQuery>()?;
    m.add_class::<PyOptions>()?;
    m.add_function(wrap_pyfunction!(table_functions, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(ffi_major, m)?)?;
    m.add_function(wrap_pyfunction!(datafusion_version, m)?)?;
    m.add_function(wrap_pyfunction!(option_keys, m)?)?;
    Ok(())
}

"""SQL over ``.tet`` chunked n-dimensional array files in datafusion-python 55.

>>> import datafusion, datafusion_tet
>>> ctx = datafusion.SessionContext()
>>> datafusion_tet.register(ctx)                                   # doctest: +SKIP
>>> ctx.sql("SELECT lat, avg(v) FROM tet('w.tet', 'temp') GROUP BY lat")  # doctest: +SKIP
>>> datafusion_tet.sql(ctx, "SELECT lat, avg(v) FROM tet('w.tet', 'temp') GROUP BY lat")  # the fold  # doctest: +SKIP

``register(ctx)`` adds the table functions ``tet``, ``tet_datasets``, ``tet_chunks``,
``tet_files`` and ``tet_query`` and ``CREATE EXTERNAL TABLE ... STORED AS TET``;
``TetTable(path, *datasets, **options)`` is a table for ``ctx.register_table``.

Plain ``ctx.sql`` plans DataFusion's own row aggregate over our scan (datafusion-python
takes no foreign logical optimizer rule). ``sql(ctx, query)`` and ``tet_query('<SQL>')``
plan the query in this library's own session, where the aggregate fold runs, and hand
the host a table that runs that plan lazily inside the host's plan. ``explain(query)``
shows that plan.

``to_xarray(df)`` pivots a result back into an ``xarray.Dataset``.
"""

from __future__ import annotations

import datafusion as _datafusion

from . import _internal

__version__ = _internal.__version__

#: The DataFusion release this library is built on (its FFI must match the host's major).
DATAFUSION_VERSION: str = _internal.datafusion_version()


def _check_host(host_version: str) -> None:
    """Refuse a host DataFusion whose major differs from ours (the FFI would not match)."""
    ours = _internal.ffi_major()
    try:
        major = int(str(host_version).split(".")[0])
    except ValueError:
        major = None
    if major != ours:
        msg = (
            f"datafusion-tet {__version__} is built on DataFusion {DATAFUSION_VERSION} "
            f"(FFI major {ours}), but the installed datafusion is {host_version}; "
            f"install datafusion>={ours},<{ours + 1}"
        )
        raise ImportError(msg)


_check_host(_datafusion.__version__)

from ._xarray import to_xarray  # noqa: E402

TetError = _internal.TetError
#: The field metadata key marking an axis column (value: its position among the dims).
AXIS_KEY: str = _internal.AXIS_KEY

__all__ = [
    "AXIS_KEY",
    "DATAFUSION_VERSION",
    "TetError",
    "TetOptions",
    "TetTable",
    "explain",
    "register",
    "sql",
    "table_functions",
    "to_xarray",
]


def _option_pairs(options: dict) -> list[tuple[str, str]]:
    """``tet.*`` options as (key, text) pairs; ``True`` is ``'true'``."""
    pairs = []
    for key, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        pairs.append((str(key), str(value)))
    return pairs


def table_functions() -> dict:
    """Our table functions by SQL name (objects with ``__datafusion_table_function__``)."""
    return dict(_internal.table_functions())


def register(ctx: _datafusion.SessionContext) -> None:
    """Add ``tet``, ``tet_datasets``, ``tet_chunks``, ``tet_files``, ``tet_query`` and
    ``STORED AS TET`` to ``ctx``."""
    from datafusion import udtf

    for name, function in table_functions().items():
        ctx.register_udtf(udtf(function, name))
    ctx.register_table_factory("TET", _internal.TableFactory())


class TetTable:
    """A ``.tet`` table for ``ctx.register_table(name, TetTable(...))`` or ``ctx.read_table``.

    ``path`` is a file, a folder (``'era5/'``), a glob (``'era5/*.tet'``) or an object
    store URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``; credentials from the
    environment as in tet-sql). ``datasets`` name the datasets (none: the file's only
    one; several: one value column each). ``options`` are ``tet.*`` session options
    (``concat_axis='time'``, ``nan_is_null=True``, ``fetch_concurrency=16``, ...), with or
    without the ``tet.`` prefix; they apply to this table over the host session's.
    """

    def __init__(self, path: str, *datasets: str, **options) -> None:
        self._table = _internal.Table(str(path), [str(d) for d in datasets], _option_pairs(options))

    def __datafusion_table_provider__(self, session):  # noqa: D105
        return self._table.__datafusion_table_provider__(session)

    @property
    def columns(self) -> list[str]:
        """Column names, the axes first."""
        return self._table.columns

    @property
    def axes(self) -> list[str]:
        """The axis columns, in dimension order."""
        return self._table.axes

    def __repr__(self) -> str:
        datasets = ", ".join(repr(d) for d in self._table.datasets)
        return f"TetTable({self._table.path!r}{', ' if datasets else ''}{datasets})"


class TetOptions:
    """The ``tet.*`` options as a config extension of a host session:
    ``SessionContext(SessionConfig().with_extension(TetOptions(nan_is_null=True)))``.
    The host then takes ``SET tet.<option> = ...`` and our tables read it."""

    def __init__(self, **options) -> None:
        self._options = _internal.Options(_option_pairs(options))

    def __datafusion_extension_options__(self):  # noqa: D105
        return self._options.__datafusion_extension_options__()

    def entries(self) -> dict:
        """The options as ``{'tet.key': value}``."""
        return dict(self._options.entries())


def sql(ctx: _datafusion.SessionContext, query: str, **options) -> _datafusion.DataFrame:
    """``query`` (SQL over ``tet(...)`` tables) planned by this library's own session,
    where the aggregate fold runs, as a DataFrame of ``ctx`` (lazy: it runs inside
    whatever ``ctx`` plans over it, joinable with ``ctx``'s tables). ``options`` are
    ``tet.*`` options over ``ctx``'s. The query sees only ``tet()``-family tables, not
    ``ctx``'s registered tables."""
    return ctx.read_table(_internal.Query(query, _option_pairs(options)))


def explain(query: str, ctx: _datafusion.SessionContext | None = None, **options) -> str:
    """The physical plan this library's session makes of ``query`` (what ``sql`` and
    ``tet_query`` run), e.g. showing ``TetAggregateExec`` where the fold applies."""
    session = ctx.ctx if ctx is not None else None
    return _internal.explain(query, _option_pairs(options), session)

"""Query results back as ``xarray.Dataset``s: axis columns pivoted into dimensions."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

AXIS_KEY = b"tet:axis"


def _arrow_table(obj: Any) -> pa.Table:
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatchReader):
        return obj.read_all()
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if hasattr(obj, "to_arrow_table"):  # datafusion.DataFrame
        return obj.to_arrow_table()
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(obj).read_all()
    msg = f"to_xarray takes a datafusion DataFrame, a pyarrow Table or a RecordBatchReader, not {type(obj).__name__}"
    raise TypeError(msg)


def _attrs(field: pa.Field) -> dict:
    """A column's CF attributes: its field metadata without our own keys."""
    out = {}
    for k, v in (field.metadata or {}).items():
        key = k.decode() if isinstance(k, bytes) else k
        if key.startswith("tet:"):
            continue
        out[key] = v.decode() if isinstance(v, bytes) else v
    return out


def _axis_columns(schema: pa.Schema) -> list[str]:
    axes = []
    for f in schema:
        md = f.metadata or {}
        if AXIS_KEY in md:
            axes.append((int(md[AXIS_KEY]), f.name))
    return [name for _, name in sorted(axes)]


def _coordinates(values):
    """The distinct values of an axis column, sorted (a result's row order says nothing:
    partitions interleave)."""
    import numpy as np
    import pandas as pd

    return np.sort(pd.unique(values))


def _fill_array(column: pa.ChunkedArray, shape, flat_index, size):
    """The cells of ``column`` at ``flat_index`` in an array of ``shape``; missing cells
    (absent rows, NULLs) are NaN (NaT for times, None for other types)."""
    import numpy as np

    values = column.to_numpy(zero_copy_only=False)
    nulls = column.null_count > 0
    complete = len(flat_index) == size
    kind = values.dtype.kind
    if kind in "iub":
        if complete and not nulls:
            out = np.empty(size, dtype=values.dtype)
        else:
            out = np.full(size, np.nan, dtype=np.float64)
            values = values.astype(np.float64)
    elif kind == "f":
        out = np.full(size, np.nan, dtype=values.dtype)
    elif kind in "mM":
        out = np.full(size, np.datetime64("NaT") if kind == "M" else np.timedelta64("NaT"), dtype=values.dtype)
    else:
        out = np.full(size, None, dtype=object)
    if nulls:
        mask = column.is_null().to_numpy(zero_copy_only=False)
        values = values.copy() if values.dtype == out.dtype else values.astype(out.dtype)
        if out.dtype.kind == "f":
            values[mask] = np.nan
        elif out.dtype.kind in "mM":
            values[mask] = np.datetime64("NaT") if out.dtype.kind == "M" else np.timedelta64("NaT")
        else:
            values = values.astype(object)
            values[mask] = None
    out[flat_index] = values
    return out.reshape(shape)


def to_xarray(obj: Any, dims: Sequence[str] | None = None):
    """``obj`` (a datafusion DataFrame, a pyarrow Table or RecordBatchReader) as an
    ``xarray.Dataset``.

    The axis columns (marked in their field metadata by datafusion-tet, in axis order; or
    the columns ``dims`` names) become the dimensions, their distinct values (sorted) the
    coordinates; every other column becomes a data variable over them. CF attributes
    come back from the field metadata. Cells no row gives, and NULLs, are NaN.
    ``SELECT lat, lon, avg(v) ... GROUP BY lat, lon`` gives a 2-D map; a computed key
    (``date_trunc('day', time) AS day``) carries no axis mark: name it in ``dims``.
    """
    import numpy as np
    import pandas as pd
    import xarray as xr

    table = _arrow_table(obj)
    schema = table.schema
    if dims is None:
        dims = _axis_columns(schema)
        if not dims:
            msg = (
                "to_xarray: no column is marked as an axis (computed keys are not); "
                f"name the dimensions, e.g. dims=[{', '.join(repr(n) for n in schema.names[:1])}]"
            )
            raise ValueError(msg)
    dims = list(dims)
    for d in dims:
        if d not in schema.names:
            msg = f"to_xarray: dimension {d!r} is not a column (columns: {schema.names})"
            raise ValueError(msg)
    if len(set(dims)) != len(dims):
        msg = f"to_xarray: dimensions repeat: {dims}"
        raise ValueError(msg)

    coords = {}
    codes = []
    for d in dims:
        col = table.column(d)
        if col.null_count:
            msg = f"to_xarray: the axis column {d!r} holds NULLs"
            raise ValueError(msg)
        values = col.to_numpy(zero_copy_only=False)
        c = _coordinates(values)
        coords[d] = xr.Variable(d, c, attrs=_attrs(schema.field(d)))
        codes.append(pd.Index(c).get_indexer(values))
    shape = tuple(len(coords[d]) for d in dims)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if codes:
        flat = np.ravel_multi_index(codes, shape) if table.num_rows else np.empty(0, dtype=np.int64)
    else:
        if table.num_rows > 1:
            msg = "to_xarray: several rows and no dimension"
            raise ValueError(msg)
        flat = np.zeros(table.num_rows, dtype=np.int64)
    if len(np.unique(flat)) != len(flat):
        msg = f"to_xarray: rows repeat coordinates of {dims}; aggregate over the other columns first"
        raise ValueError(msg)

    data_vars = {}
    for f in schema:
        if f.name in dims:
            continue
        data = _fill_array(table.column(f.name), shape, flat, size)
        data_vars[f.name] = xr.Variable(dims, data, attrs=_attrs(f))
    return xr.Dataset(data_vars, coords=coords)

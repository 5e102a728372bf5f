//! The forms of an aggregate's input the fold recognises in an expression: `v` or a
//! widening cast of it ([`value_input`]), an affine map of it ([`Affine`], [`affine_of`]),
//! a value times a weight of one axis ([`weighted_input`], [`weighted_expr`]), and which
//! columns a deterministic expression reads ([`expr_columns`], [`values_read`]).

use super::table::TableModel;
use super::values::VALUE_COLUMN;
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::{Expr, Operator};
use std::collections::BTreeSet;

/// Whether every value of `from` converts to `to` without loss (or `to` is Float64, the
/// type DataFusion itself coerces numeric aggregates to).
pub fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || *to == Float64 {
        return true;
    }
    matches!(
        (from, to),
        (Float16, Float32)
            | (Int16, Int32 | Int64 | Float32)
            | (Int32, Int64)
            | (UInt8, Int16 | Int32 | Int64 | UInt16 | UInt32 | UInt64 | Float32)
            | (UInt16, Int32 | Int64 | UInt32 | UInt64 | Float32)
            | (UInt32, Int64 | UInt64)
    )
}

/// An affine map `x·scale + offset`, computed in Float64. A map without an offset has
/// the offset -0.0, the additive identity of IEEE floats (x + -0.0 is x for every x, -0.0
/// included; x + 0.0 turns -0.0 into +0.0), so that `v * 2` keeps the sign of a zero as
/// DataFusion's own product does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    pub scale: f64,
    pub offset: f64,
}

impl Affine {
    /// The identity map.
    pub const IDENTITY: Affine = Affine {
        scale: 1.0,
        offset: -0.0,
    };

    /// `x·scale`, without an offset.
    pub fn scaled(scale: f64) -> Affine {
        Affine { scale, offset: -0.0 }
    }

    /// Whether the map adds nothing (its offset is the additive identity -0.0).
    fn no_offset(self) -> bool {
        self.offset == 0.0 && self.offset.is_sign_negative()
    }

    /// `x·scale + offset`.
    #[inline(always)]
    pub fn apply(self, x: f64) -> f64 {
        x * self.scale + self.offset
    }

    /// `then ∘ self`: first `self`, then `then`.
    pub fn then(self, then: Affine) -> Affine {
        Affine {
            scale: self.scale * then.scale,
            offset: if self.no_offset() {
                then.offset
            } else {
                self.offset * then.scale + then.offset
            },
        }
    }
}

impl From<crate::format::Packing> for Affine {
    fn from(p: crate::format::Packing) -> Self {
        Affine {
            scale: p.scale,
            offset: p.offset,
        }
    }
}

/// The type of `e` when it is `v` (of type `v_type`), or `CAST(v AS t)` / `TRY_CAST` to a
/// type that holds every value of `v` exactly.
pub fn value_input(e: &Expr, v_type: &DataType) -> Option<DataType> {
    match e {
        Expr::Column(c) if c.name == VALUE_COLUMN => Some(v_type.clone()),
        Expr::Cast(c)
            if value_input(&c.expr, v_type).as_ref() == Some(v_type) && widens(v_type, c.field.data_type()) =>
        {
            Some(c.field.data_type().clone())
        }
        Expr::TryCast(c)
            if value_input(&c.expr, v_type).as_ref() == Some(v_type) && widens(v_type, c.field.data_type()) =>
        {
            Some(c.field.data_type().clone())
        }
        _ => None,
    }
}

/// `e` as `v·scale + offset` when every step of it is Float64 arithmetic on `v` (or
/// `CAST(v AS DOUBLE)`) and finite Float64 literals: `v + c`, `c - v`, `v * c`, `v / c`,
/// `-v`, nested.
pub fn affine_of(e: &Expr, v_type: &DataType) -> Option<Affine> {
    let literal = |e: &Expr| match e {
        Expr::Literal(ScalarValue::Float64(Some(c)), _) if c.is_finite() => Some(*c),
        _ => None,
    };
    let m = match e {
        Expr::Column(c) if c.name == VALUE_COLUMN && *v_type == DataType::Float64 => Affine::IDENTITY,
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 => match c.expr.as_ref() {
            Expr::Column(col) if col.name == VALUE_COLUMN => Affine::IDENTITY,
            inner => affine_of(inner, v_type)?,
        },
        Expr::Negative(x) => affine_of(x, v_type)?.then(Affine::scaled(-1.0)),
        Expr::BinaryExpr(b) => {
            let (x, c, literal_left) = match (literal(&b.left), literal(&b.right)) {
                (None, Some(c)) => (affine_of(&b.left, v_type)?, c, false),
                (Some(c), None) => (affine_of(&b.right, v_type)?, c, true),
                _ => return None,
            };
            let step = match (b.op, literal_left) {
                (Operator::Plus, _) => Affine { scale: 1.0, offset: c },
                (Operator::Minus, false) => Affine { scale: 1.0, offset: -c },
                (Operator::Minus, true) => Affine { scale: -1.0, offset: c },
                (Operator::Multiply, _) => Affine::scaled(c),
                (Operator::Divide, false) if c != 0.0 => Affine::scaled(1.0 / c),
                _ => return None,
            };
            x.then(step)
        }
        _ => return None,
    };
    (m.scale.is_finite() && m.scale != 0.0 && m.offset.is_finite()).then_some(m)
}

/// An aggregate input weighted by one axis: `w(axis)` alone, or the value (`v` or an
/// affine map of it) times `w(axis)`, where `w` is any deterministic Float64 expression
/// of that axis (`cos(radians(lat))`): the area weights of a climate mean. The fold
/// evaluates `w` once per position of the axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    /// The axis the weight reads.
    pub axis: usize,
    /// The weight: an expression of that axis column alone.
    pub weight: Expr,
    /// The map of `v` the weight multiplies (`None`: the weight alone).
    pub value: Option<Affine>,
    /// The product is computed in f32 (a Float32 `v` times a Float32 weight, as with a
    /// Float32 latitude), then widened to f64 for the sum.
    pub f32_product: bool,
}

/// An aggregate input that is an expression of value columns times a weight of one axis
/// (`a * b * cos(radians(lat))`): the weight evaluated once per position, the rest
/// compiled by the fold.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedExpr {
    /// The axis the weight reads.
    pub axis: usize,
    /// The weight: an expression of that axis column alone.
    pub weight: Expr,
    /// What the weight multiplies: an expression of value columns (and no axis).
    pub value: Expr,
    /// `CAST(value * weight AS DOUBLE)`: the product is taken in Float32 (value and
    /// weight are Float32), then widened; else both are Float64.
    pub f32_product: bool,
}

/// `e` as a [`WeightedExpr`]: `value * w(axis)` or `w(axis) * value`, or that product
/// inside a cast to Float64; `None` when one side is not an expression of one axis alone
/// or the other reads an axis. The types of the two sides are the caller's to check.
pub fn weighted_expr(table: &TableModel, e: &Expr) -> Option<WeightedExpr> {
    let (e, f32_product) = match e {
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 => (c.expr.as_ref(), true),
        e => (e, false),
    };
    let Expr::BinaryExpr(b) = e else { return None };
    if b.op != Operator::Multiply {
        return None;
    }
    let axis_only = |e: &Expr| match expr_columns(table, e)?.as_slice() {
        [d] if *d < table.axes.len() => Some(*d),
        _ => None,
    };
    let values_only =
        |e: &Expr| expr_columns(table, e).is_some_and(|c| !c.is_empty() && c.iter().all(|&c| c >= table.axes.len()));
    let (value, weight) = match (values_only(&b.left), values_only(&b.right)) {
        (true, false) => (b.left.as_ref(), b.right.as_ref()),
        (false, true) => (b.right.as_ref(), b.left.as_ref()),
        _ => return None,
    };
    Some(WeightedExpr {
        axis: axis_only(weight)?,
        weight: weight.clone(),
        value: value.clone(),
        f32_product,
    })
}

/// `e` (of type Float64) as a [`Weighted`] input: `w(axis)` (of any table), or of a table
/// of one dataset `f(v) * w(axis)` or
/// `w(axis) * f(v)` with `f` a widening cast of `v` to Float64 or an affine map of it,
/// or `CAST(v * w(axis) AS DOUBLE)` of a Float32 `v` and weight.
pub fn weighted_input(table: &TableModel, e: &Expr) -> Option<Weighted> {
    let v_type = table.value_type();
    let axis_only = |e: &Expr| match expr_columns(table, e)?.as_slice() {
        [d] if *d < table.axes.len() => Some(*d),
        _ => None,
    };
    if let Some(axis) = axis_only(e) {
        return Some(Weighted {
            axis,
            weight: e.clone(),
            value: None,
            f32_product: false,
        });
    }
    if table.is_multi() {
        // Products with a value column are `weighted_expr`s of a table of several.
        return None;
    }
    let (e, f32_product) = match e {
        Expr::Cast(c) if *c.field.data_type() == DataType::Float64 && v_type == DataType::Float32 => {
            (c.expr.as_ref(), true)
        }
        e => (e, false),
    };
    let Expr::BinaryExpr(b) = e else { return None };
    if b.op != Operator::Multiply {
        return None;
    }
    let value = |x: &Expr| match value_input(x, &v_type) {
        // Float32 products: `v` itself (so the weight is Float32 too).
        Some(DataType::Float32) if f32_product && matches!(x, Expr::Column(_)) => Some(Affine::IDENTITY),
        Some(DataType::Float64) if !f32_product => Some(Affine::IDENTITY),
        Some(_) => None,
        None if f32_product => None,
        None => affine_of(x, &v_type),
    };
    let (value, weight) = match (value(&b.left), value(&b.right)) {
        (Some(m), None) => (m, b.right.as_ref()),
        (None, Some(m)) => (m, b.left.as_ref()),
        _ => return None,
    };
    Some(Weighted {
        axis: axis_only(weight)?,
        weight: weight.clone(),
        value: Some(value),
        f32_product,
    })
}

/// The value columns of `table` (indices into `table.values`) that `e` reads.
pub fn values_read(table: &TableModel, e: &Expr) -> BTreeSet<usize> {
    e.column_refs()
        .iter()
        .filter_map(|c| table.value_named(&c.name).map(|(k, _)| k))
        .collect()
}

/// Whether `t` is a primitive numeric type (an input the fold accumulates).
pub fn is_numeric(t: &DataType) -> bool {
    t.is_integer() || t.is_floating()
}

/// The table columns (schema indices, ascending) a deterministic expression over value
/// and axis columns reads; `None` for anything else (other columns, volatile functions,
/// subqueries, aggregates, windows, placeholders).
pub fn expr_columns(table: &TableModel, e: &Expr) -> Option<Vec<usize>> {
    if e.is_volatile()
        || e.exists(|x| {
            Ok(matches!(
                x,
                Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::AggregateFunction(_)
                    | Expr::WindowFunction(_)
                    | Expr::OuterReferenceColumn(..)
                    | Expr::Placeholder(_)
                    | Expr::GroupingSet(_)
                    | Expr::Unnest(_)
            ))
        })
        .unwrap_or(true)
    {
        return None;
    }
    let mut cols = BTreeSet::new();
    for c in e.column_refs() {
        if c.relation.is_some() {
            return None;
        }
        let i = match table.value_named(&c.name) {
            Some((k, _)) => table.value_index() + k,
            None => table.axis_index(&c.name)?,
        };
        cols.insert(i);
    }
    Some(cols.into_iter().collect())
}

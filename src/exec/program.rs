//! Arithmetic expressions of `v` compiled to loops over blocks of a tile's values: the
//! non-affine inputs analysts write (`sqrt(abs(v))`, `v * v`, `(v - c) / (v + d)`),
//! evaluated without building Arrow arrays per tile.
//!
//! Only operations whose results are exactly DataFusion's for the same types compile:
//! IEEE arithmetic (`+ - * / %`) and negation of f32 or f64, `abs`, `sqrt` (with
//! DataFusion's error for a negative input), casts between f32 and f64, and the value
//! column read as its own float type or cast to one. Anything else is evaluated by
//! DataFusion's own expressions ([`TileExprs`](super::expr::TileExprs)).

use super::fold::Elem;
use crate::format::Packing;
use crate::plan::{TableModel, VALUE_COLUMN};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, Operator};
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

/// Values evaluated per block: short enough that every intermediate stays in L1.
pub const BLOCK: usize = 512;

/// The float type of an intermediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    F32,
    F64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// The value column (stored values converted, then unpacked when packed).
    Value,
    Const(f64),
    /// A cast from the other float type.
    Cast(Box<Typed>),
    Neg(Box<Typed>),
    Abs(Box<Typed>),
    Sqrt(Box<Typed>),
    Bin(Arith, Box<Typed>, Box<Typed>),
}

#[derive(Debug, Clone, PartialEq)]
struct Typed {
    node: Node,
    ty: Ty,
}

/// A compiled expression of `v`.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    root: Typed,
    packing: Option<Packing>,
}

fn float_type(t: &DataType) -> Option<Ty> {
    match t {
        DataType::Float32 => Some(Ty::F32),
        DataType::Float64 => Some(Ty::F64),
        _ => None,
    }
}

impl Program {
    /// `e` (unqualified columns) compiled, when every step of it is one the module
    /// supports; `None` otherwise.
    pub fn compile(table: &TableModel, e: &Expr) -> Option<Program> {
        let ctx = Ctx {
            value_type: float_type(&table.value_type()),
        };
        Some(Program {
            root: ctx.typed(e)?,
            packing: table.packing,
        })
    }

    /// The type of the result.
    pub fn ty(&self) -> Ty {
        self.root.ty
    }

    /// Evaluate over stored values `x` (at most [`BLOCK`]) into `out` (as long as `x`);
    /// `negative[i]` becomes true where a square root met a negative input.
    pub fn eval<T: Elem, F: Lane>(&self, x: &[T], out: &mut [F], negative: &mut [bool]) {
        self.eval_node(&self.root, x, out, negative)
    }

    fn eval_node<T: Elem, F: Lane>(&self, n: &Typed, x: &[T], out: &mut [F], negative: &mut [bool]) {
        let len = x.len();
        let out = &mut out[..len];
        match &n.node {
            Node::Value => match self.packing {
                Some(p) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = F::of_f64(p.apply(v.f()))),
                None => out.iter_mut().zip(x).for_each(|(o, &v)| *o = F::of_elem(v)),
            },
            Node::Const(c) => out.fill(F::of_f64(*c)),
            Node::Cast(a) => {
                let mut tmp = [F::Other::default(); BLOCK];
                self.eval_node(a, x, &mut tmp[..len], negative);
                out.iter_mut().zip(&tmp[..len]).for_each(|(o, &v)| *o = F::of_other(v));
            }
            Node::Neg(a) => {
                self.eval_node(a, x, out, negative);
                out.iter_mut().for_each(|o| *o = -*o);
            }
            Node::Abs(a) => {
                self.eval_node(a, x, out, negative);
                out.iter_mut().for_each(|o| *o = o.abs());
            }
            Node::Sqrt(a) => {
                self.eval_node(a, x, out, negative);
                for (o, bad) in out.iter_mut().zip(negative.iter_mut()) {
                    *bad |= *o < F::default();
                    *o = o.sqrt();
                }
            }
            Node::Bin(op, a, b) => {
                self.eval_node(a, x, out, negative);
                let mut tmp = [F::default(); BLOCK];
                let rhs = &mut tmp[..len];
                self.eval_node(b, x, rhs, negative);
                let pairs = out.iter_mut().zip(rhs.iter());
                match op {
                    Arith::Add => pairs.for_each(|(o, &r)| *o = *o + r),
                    Arith::Sub => pairs.for_each(|(o, &r)| *o = *o - r),
                    Arith::Mul => pairs.for_each(|(o, &r)| *o = *o * r),
                    Arith::Div => pairs.for_each(|(o, &r)| *o = *o / r),
                    Arith::Rem => pairs.for_each(|(o, &r)| *o = *o % r),
                }
            }
        }
    }
}

/// What the compiler knows of the table.
struct Ctx {
    /// The value column's type when it is a float type.
    value_type: Option<Ty>,
}

impl Ctx {
    fn typed(&self, e: &Expr) -> Option<Typed> {
        let t = |node, ty| Some(Typed { node, ty });
        match e {
            Expr::Column(c) if c.relation.is_none() && c.name == VALUE_COLUMN => t(Node::Value, self.value_type?),
            Expr::Cast(c) => self.cast(&c.expr, c.field.data_type()),
            Expr::TryCast(c) => self.cast(&c.expr, c.field.data_type()),
            Expr::Literal(ScalarValue::Float64(Some(c)), _) => t(Node::Const(*c), Ty::F64),
            Expr::Literal(ScalarValue::Float32(Some(c)), _) => t(Node::Const(*c as f64), Ty::F32),
            Expr::Negative(a) => {
                let a = self.typed(a)?;
                let ty = a.ty;
                t(Node::Neg(Box::new(a)), ty)
            }
            Expr::BinaryExpr(b) => {
                let op = match b.op {
                    Operator::Plus => Arith::Add,
                    Operator::Minus => Arith::Sub,
                    Operator::Multiply => Arith::Mul,
                    Operator::Divide => Arith::Div,
                    Operator::Modulo => Arith::Rem,
                    _ => return None,
                };
                let (l, r) = (self.typed(&b.left)?, self.typed(&b.right)?);
                if l.ty != r.ty {
                    return None;
                }
                let ty = l.ty;
                t(Node::Bin(op, Box::new(l), Box::new(r)), ty)
            }
            Expr::ScalarFunction(f) if f.args.len() == 1 => {
                let a = self.typed(&f.args[0])?;
                let ty = a.ty;
                match f.func.name() {
                    "abs" => t(Node::Abs(Box::new(a)), ty),
                    "sqrt" => t(Node::Sqrt(Box::new(a)), ty),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `CAST(e AS to)`.
    fn cast(&self, e: &Expr, to: &DataType) -> Option<Typed> {
        let to = float_type(to)?;
        // The value column of a type that is not a float: stored values convert to
        // either float type directly (`Elem::f`, `Elem::f32`), as Arrow casts them.
        if let Expr::Column(c) = e
            && c.relation.is_none()
            && c.name == VALUE_COLUMN
            && self.value_type.is_none()
        {
            return Some(Typed {
                node: Node::Value,
                ty: to,
            });
        }
        let a = self.typed(e)?;
        if a.ty == to {
            return Some(a);
        }
        Some(Typed {
            node: Node::Cast(Box::new(a)),
            ty: to,
        })
    }
}

/// A float type the programs compute in.
pub trait Lane:
    Copy
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    /// The other float type.
    type Other: Lane<Other = Self>;
    /// `x` rounded to this type (as Arrow casts f64 to f32).
    fn of_f64(x: f64) -> Self;
    /// A value of the other type converted (Arrow's cast).
    fn of_other(x: Self::Other) -> Self;
    /// A stored value converted (Arrow's cast).
    fn of_elem<T: Elem>(x: T) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
}

impl Lane for f32 {
    type Other = f64;
    #[inline(always)]
    fn of_f64(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn of_other(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn of_elem<T: Elem>(x: T) -> Self {
        x.f32()
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f32::abs(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Lane for f64 {
    type Other = f32;
    #[inline(always)]
    fn of_f64(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn of_other(x: f32) -> Self {
        x as f64
    }
    #[inline(always)]
    fn of_elem<T: Elem>(x: T) -> Self {
        x.f()
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f64::abs(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

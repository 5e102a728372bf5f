//! Expressions of value columns compiled to a [`Program`], when every step is one whose
//! result is exactly DataFusion's.

use super::steps::{Arith, Op, Program, Step, Ty};
use crate::plan::{TableModel, WeightedExpr, weighted_expr};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, Operator};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// Value column `k` (stored values converted, then unpacked when packed).
    Column(usize),
    Const(f64),
    /// A cast from the other float type.
    Cast(Box<Typed>),
    Neg(Box<Typed>),
    Abs(Box<Typed>),
    Sqrt(Box<Typed>),
    Bin(Arith, Box<Typed>, Box<Typed>),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Typed {
    pub(super) node: Node,
    pub(super) ty: Ty,
}

/// `e` as a compiled expression times a weight of one axis ([`weighted_expr`]): the
/// value part compiled, of the product's type (Float32 inside a cast to Float64, else
/// Float64).
pub fn weighted_program(table: &TableModel, e: &Expr) -> Option<(WeightedExpr, Program)> {
    let w = weighted_expr(table, e)?;
    let ty = if w.f32_product { Ty::F32 } else { Ty::F64 };
    let p = Program::compile(table, &w.value).filter(|p| p.ty() == ty)?;
    Some((w, p))
}

pub(super) fn float_type(t: &DataType) -> Option<Ty> {
    match t {
        DataType::Float32 => Some(Ty::F32),
        DataType::Float64 => Some(Ty::F64),
        _ => None,
    }
}

/// Append the postfix steps of `t` to `ops`.
pub(super) fn lower(t: &Typed, ops: &mut Vec<Op>) {
    let ty = t.ty;
    match &t.node {
        Node::Column(k) => ops.push(Op::Step(ty, Step::Load(*k))),
        Node::Const(c) => ops.push(Op::Step(ty, Step::Push(*c))),
        Node::Cast(a) => {
            lower(a, ops);
            ops.push(Op::Cast(ty));
        }
        Node::Neg(a) => {
            lower(a, ops);
            ops.push(Op::Step(ty, Step::Neg));
        }
        Node::Abs(a) => {
            lower(a, ops);
            ops.push(Op::Step(ty, Step::Abs));
        }
        Node::Sqrt(a) => {
            lower(a, ops);
            ops.push(Op::Step(ty, Step::Sqrt));
        }
        Node::Bin(op, a, b) => match (&a.node, &b.node) {
            (_, Node::Const(c)) => {
                lower(a, ops);
                ops.push(Op::Step(ty, Step::BinConst(*op, *c)));
            }
            (Node::Const(c), _) => {
                lower(b, ops);
                ops.push(Op::Step(ty, Step::ConstBin(*op, *c)));
            }
            (Node::Column(j), Node::Column(k)) => ops.push(Op::Step(ty, Step::LoadCombined(*j, *k, *op))),
            (_, Node::Column(k)) => {
                lower(a, ops);
                ops.push(Op::Step(ty, Step::LoadBin(*k, *op)));
            }
            _ => {
                lower(a, ops);
                lower(b, ops);
                ops.push(Op::Step(ty, Step::Bin(*op)));
            }
        },
    }
}

/// The most blocks each stack (f32, f64) of `ops` holds at once.
pub(super) fn depth(ops: &[Op]) -> (usize, usize) {
    let (mut h, mut most) = ([0usize; 2], [0usize; 2]);
    let at = |ty| if ty == Ty::F32 { 0 } else { 1 };
    for op in ops {
        match *op {
            Op::Step(ty, Step::Load(_) | Step::LoadCombined(..) | Step::Push(_)) => h[at(ty)] += 1,
            Op::Cast(ty) => {
                h[1 - at(ty)] -= 1;
                h[at(ty)] += 1;
            }
            Op::Step(ty, Step::Bin(_)) => h[at(ty)] -= 1,
            _ => {}
        }
        most = [most[0].max(h[0]), most[1].max(h[1])];
    }
    (most[0], most[1])
}

impl Program {
    /// `e` (unqualified columns) compiled, when every step of it is one the module
    /// supports and it reads at least one value column; `None` otherwise.
    pub fn compile(table: &TableModel, e: &Expr) -> Option<Program> {
        let ctx = Ctx { table };
        let mut root = ctx.typed(e)?;
        let ty = root.ty;
        // f32 → f64 is exact: the fold widens the f32 results as it reads them.
        let widened = ty == Ty::F64
            && match &root.node {
                Node::Cast(a) if a.ty == Ty::F32 => {
                    root = (**a).clone();
                    true
                }
                Node::Column(k) if table.values.get(*k).map(|v| v.data_type()) == Some(DataType::Float32) => {
                    root.ty = Ty::F32;
                    true
                }
                _ => false,
            };
        let mut ops = Vec::new();
        lower(&root, &mut ops);
        let mut columns: Vec<usize> = ops
            .iter()
            .flat_map(|op| match op {
                Op::Step(_, Step::Load(k) | Step::LoadBin(k, _)) => vec![*k],
                Op::Step(_, Step::LoadCombined(j, k, _)) => vec![*j, *k],
                _ => vec![],
            })
            .collect();
        columns.sort_unstable();
        columns.dedup();
        if columns.is_empty() {
            return None;
        }
        Some(Program {
            depth: depth(&ops),
            ops,
            ty,
            widened,
            columns,
        })
    }
}

/// What the compiler knows of the table.
pub(super) struct Ctx<'a> {
    pub(super) table: &'a TableModel,
}

impl Ctx<'_> {
    /// The value column an expression is (index, and its type when a float type).
    fn value_column(&self, e: &Expr) -> Option<(usize, Option<Ty>)> {
        match e {
            Expr::Column(c) if c.relation.is_none() => {
                let (k, v) = self.table.value_named(&c.name)?;
                Some((k, float_type(&v.data_type())))
            }
            _ => None,
        }
    }

    fn typed(&self, e: &Expr) -> Option<Typed> {
        let t = |node, ty| Some(Typed { node, ty });
        if let Some((k, ty)) = self.value_column(e) {
            return t(Node::Column(k), ty?);
        }
        match e {
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
        // A value column: its stored values (unpacked) convert to either float type
        // directly (`Elem::f`, `Elem::f32`, `Packing::apply` then a rounding to f32), as
        // Arrow casts them, so the cast costs no pass of its own.
        if let Some((k, _)) = self.value_column(e) {
            return Some(Typed {
                node: Node::Column(k),
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

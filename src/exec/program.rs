//! Arithmetic expressions of value columns compiled to loops over blocks of a task's
//! cells: the non-affine inputs analysts write (`sqrt(abs(v))`, `v * v`,
//! `(v - c) / (v + d)`, and over several datasets `t2m - sst`, `u * u + v * v`),
//! evaluated without building Arrow arrays per tile.
//!
//! Only operations whose results are exactly DataFusion's for the same types compile:
//! IEEE arithmetic (`+ - * / %`) and negation of f32 or f64, `abs`, `sqrt` (with
//! DataFusion's error for a negative input), casts between f32 and f64, and value
//! columns read as their own float type or cast to one. Anything else is evaluated by
//! DataFusion's own expressions ([`TileExprs`](super::expr::TileExprs)).
//!
//! A program reads its columns through [`Cells`]: a tile's stored values of one dataset,
//! or the aligned cells of several ([`AlignedCells`](super::aligned::AlignedCells)).

use super::kernel::simd::multiversion;
use super::kernel::{Elem, zip_sum};
use crate::format::{DType, Element, Packing};
use crate::plan::{TableModel, WeightedExpr, weighted_expr};
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
struct Typed {
    node: Node,
    ty: Ty,
}

/// One step of a compiled expression: a postfix program over two stacks of blocks, one
/// per float type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// Pop a block of the other type, push it converted to this one.
    Cast(Ty),
    /// A step on the top of this type's stack.
    Step(Ty, Step),
}

/// A step within one type's stack.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// Push value column `k`'s stored values, converted (and unpacked when packed).
    Load(usize),
    /// The top `a` becomes `a op` value column `k` (converted as by `Load`): one pass
    /// instead of a load and a step.
    LoadBin(usize, Arith),
    /// Push value column `j` `op` value column `k`: one pass over both where the cells
    /// hold both in place ([`Cells::view`]), else a `Load` and a `LoadBin`.
    LoadPair(usize, usize, Arith),
    /// Push a constant block.
    Push(f64),
    Neg,
    Abs,
    Sqrt,
    /// Pop `b`, then `a`; push `a op b`.
    Bin(Arith),
    /// The top `a` becomes `a op c`.
    BinConst(Arith, f64),
    /// The top `b` becomes `c op b`.
    ConstBin(Arith, f64),
}

/// A compiled expression of a table's value columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    ops: Vec<Op>,
    ty: Ty,
    /// The result is evaluated in f32 and is of type f64 (`ty`) by a conversion that is
    /// exact, left to the fold (`Elem::f`): a root cast from f32, or an f32 column read
    /// as f64.
    widened: bool,
    /// The value columns read (indices into the table's values, ascending).
    columns: Vec<usize>,
    /// The most blocks each stack (f32, f64) holds at once.
    depth: (usize, usize),
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

/// The cells a program reads, by value column, a block at a time: offsets count from the
/// start of a run of cells the fold walks.
pub trait Cells {
    /// True when every cell is kept (no missing value or range drops any).
    fn plain(&self) -> bool;
    /// True when a range of stored values drops cells (a value `WHERE`: dropped cells
    /// are not rows), not only missing values.
    fn ranged(&self) -> bool {
        false
    }
    /// Per cell of `from..from + n` (`n` ≤ [`BLOCK`]), 1 in `out` where it is kept, else 0.
    fn mask(&self, from: usize, n: usize, out: &mut [u8]);
    /// Write to `at` the offsets (from `from`) of the kept cells among `from..from + n`
    /// (`n` ≤ [`BLOCK`]); returns how many.
    #[inline(always)]
    fn kept(&self, from: usize, n: usize, at: &mut [u32]) -> usize {
        let mut mask = [0u8; BLOCK];
        self.mask(from, n, &mut mask[..n]);
        offsets(&mask[..n], at)
    }
    /// Value column `k`'s values converted to `F` (and unpacked), `x`, combined into
    /// `out` as `out[i] = with(out[i], x[i])`: those of cells `from..from + out.len()`,
    /// or with `at`, those of cells `from + at[i]`.
    fn load<F: Lane>(&self, k: usize, from: usize, at: Option<&[u32]>, out: &mut [F], with: impl Fn(F, F) -> F);
    /// Value column `k`'s stored values of cells `from..from + n` in place, when they
    /// are of type `F` and not packed; `None`: read them by [`load`](Self::load).
    fn view<F: Lane>(&self, k: usize, from: usize, n: usize) -> Option<&[F]> {
        let _ = (k, from, n);
        None
    }
}

/// Write to `at` the offsets where `mask` is 1; returns how many. Eight cells at a time
/// where all or none are kept (filters on smooth fields keep runs), one by one elsewhere.
#[inline(always)]
pub fn offsets(mask: &[u8], at: &mut [u32]) -> usize {
    const ALL: u64 = u64::from_ne_bytes([1; 8]);
    let mut m = 0;
    let words = mask.chunks_exact(8);
    let tail = words.remainder();
    for (w, bytes) in words.enumerate() {
        let i = (w * 8) as u32;
        match u64::from_ne_bytes(bytes.try_into().expect("eight bytes")) {
            0 => {}
            ALL => {
                at[m..m + 8].iter_mut().zip(i..).for_each(|(a, j)| *a = j);
                m += 8;
            }
            _ => {
                for (j, &k) in (i..).zip(bytes) {
                    at[m] = j;
                    m += k as usize;
                }
            }
        }
    }
    let base = (mask.len() - tail.len()) as u32;
    for (j, &k) in (base..).zip(tail) {
        at[m] = j;
        m += k as usize;
    }
    m
}

/// Stored values `x` converted (and unpacked by `packing`) and combined into `out` by
/// `with` ([`Cells::load`]): the first `out.len()`, or with `at`, those at `at`.
#[inline(always)]
pub fn convert<T: Elem, F: Lane>(
    x: &[T],
    packing: Option<Packing>,
    at: Option<&[u32]>,
    out: &mut [F],
    with: impl Fn(F, F) -> F,
) {
    match (packing, at) {
        (None, None) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = with(*o, F::of_elem(v))),
        (Some(p), None) => out
            .iter_mut()
            .zip(x)
            .for_each(|(o, &v)| *o = with(*o, F::of_f64(p.apply(v.f())))),
        (None, Some(at)) => out
            .iter_mut()
            .zip(at)
            .for_each(|(o, &i)| *o = with(*o, F::of_elem(x[i as usize]))),
        (Some(p), Some(at)) => out
            .iter_mut()
            .zip(at)
            .for_each(|(o, &i)| *o = with(*o, F::of_f64(p.apply(x[i as usize].f())))),
    }
}

/// Blocks a [`Program`] evaluates into: made once per chunk task by
/// [`Program::scratch`], reused for every block.
pub struct Scratch {
    f32: Vec<f32>,
    f64: Vec<f64>,
}

fn float_type(t: &DataType) -> Option<Ty> {
    match t {
        DataType::Float32 => Some(Ty::F32),
        DataType::Float64 => Some(Ty::F64),
        _ => None,
    }
}

/// Append the postfix steps of `t` to `ops`.
fn lower(t: &Typed, ops: &mut Vec<Op>) {
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
            (Node::Column(j), Node::Column(k)) => ops.push(Op::Step(ty, Step::LoadPair(*j, *k, *op))),
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
fn depth(ops: &[Op]) -> (usize, usize) {
    let (mut h, mut most) = ([0usize; 2], [0usize; 2]);
    let at = |ty| if ty == Ty::F32 { 0 } else { 1 };
    for op in ops {
        match *op {
            Op::Step(ty, Step::Load(_) | Step::LoadPair(..) | Step::Push(_)) => h[at(ty)] += 1,
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
                Op::Step(_, Step::LoadPair(j, k, _)) => vec![*j, *k],
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

    /// True when evaluating a cell can fail (a square root of a negative number): the
    /// program must then be evaluated on kept cells only, as DataFusion does.
    pub fn fallible(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Step(_, Step::Sqrt)))
    }

    /// The value columns the program reads (indices into the table's values, ascending).
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The type of the result.
    pub fn ty(&self) -> Ty {
        self.ty
    }

    /// The type [`eval`](Self::eval) computes the result in: [`ty`](Self::ty), or f32
    /// when the result is that widened (exactly) to f64, which the fold does as it reads
    /// it.
    pub fn eval_ty(&self) -> Ty {
        if self.widened { Ty::F32 } else { self.ty }
    }

    /// The blocks [`eval`](Self::eval) needs.
    pub fn scratch(&self) -> Scratch {
        Scratch {
            f32: vec![0.0; BLOCK * self.depth.0],
            f64: vec![0.0; BLOCK * self.depth.1],
        }
    }

    /// The results for cells `from..from + n` read in place, without evaluating: when
    /// the program is one value column that `cells` holds as `F` ([`Cells::view`]).
    #[inline(always)]
    pub fn view<'a, C: Cells, F: Lane>(&self, cells: &'a C, from: usize, n: usize) -> Option<&'a [F]> {
        match self.ops[..] {
            [Op::Step(ty, Step::Load(k))] if ty == self.eval_ty() => cells.view(k, from, n),
            _ => None,
        }
    }

    /// The f64 sum of the results times `scale` (in `F`) over cells `from..from + n` in
    /// one pass over the stored values, nothing stored between: when the program is two
    /// value columns combined ([`Step::LoadPair`]) that `cells` holds in place as `F`.
    /// The results are those [`eval`](Self::eval) computes (the same operation on the
    /// same values); a scale of 1 changes none of them.
    #[inline(always)]
    pub fn pair_sum<C: Cells, F: Lane + Elem>(&self, cells: &C, from: usize, n: usize, scale: F) -> Option<f64> {
        let [Op::Step(ty, Step::LoadPair(j, k, a))] = self.ops[..] else {
            return None;
        };
        if ty != self.eval_ty() {
            return None;
        }
        let (x, y) = (cells.view::<F>(j, from, n)?, cells.view::<F>(k, from, n)?);
        Some(pair_sum(x, y, a, scale))
    }

    /// The results over `n` (at most [`BLOCK`]) cells of `cells`: those from `from`, or
    /// with `at`, those at `from + at[i]` (`n` = `at.len()`), of type `F` =
    /// [`eval_ty`](Self::eval_ty); evaluated into `s`, or read in place
    /// ([`view`](Self::view)). True when a square root met a negative input.
    #[inline(always)]
    pub fn eval<'a, C: Cells, F: Lane>(
        &self,
        cells: &'a C,
        from: usize,
        at: Option<&[u32]>,
        n: usize,
        s: &'a mut Scratch,
    ) -> (&'a [F], bool) {
        if let (None, Some(x)) = (at, self.view(cells, from, n)) {
            return (x, false);
        }
        let negative = run_steps(self, cells, from, at, n, s);
        (F::result(s, n), negative)
    }

    /// Run the steps over the cells [`eval`](Self::eval) names, into `s`.
    #[inline(always)]
    fn run<C: Cells>(&self, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool {
        let mut h = (0usize, 0usize);
        let src = Source { cells, from, at, n };
        let mut negative = false;
        for &op in &self.ops {
            negative |= match op {
                Op::Cast(Ty::F64) => {
                    let src = &s.f32[(h.0 - 1) * BLOCK..][..n];
                    let dst = &mut s.f64[h.1 * BLOCK..][..n];
                    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = f64::of_other(v));
                    h = (h.0 - 1, h.1 + 1);
                    false
                }
                Op::Cast(Ty::F32) => {
                    let src = &s.f64[(h.1 - 1) * BLOCK..][..n];
                    let dst = &mut s.f32[h.0 * BLOCK..][..n];
                    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = f32::of_other(v));
                    h = (h.0 + 1, h.1 - 1);
                    false
                }
                Op::Step(Ty::F32, st) => step(st, &src, &mut s.f32, &mut h.0),
                Op::Step(Ty::F64, st) => step(st, &src, &mut s.f64, &mut h.1),
            };
        }
        negative
    }
}

multiversion! {
    /// [`Program::run`], compiled once per kind of cells (and instruction set) rather
    /// than inlined into every kernel that evaluates a program: the kernels stay small
    /// (and quick to build), at the cost of one call per block.
    #[inline(never)]
    fn run_steps[C](program: &Program, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool where [C: Cells] = run_steps_body;
}

/// The body of [`run_steps`], compiled into each of its copies.
#[inline(always)]
fn run_steps_body<C>(program: &Program, cells: &C, from: usize, at: Option<&[u32]>, n: usize, s: &mut Scratch) -> bool
where
    C: Cells,
{
    program.run(cells, from, at, n, s)
}

multiversion! {
    /// The f64 sum of `(x[i] op y[i]) * scale` ([`zip_sum`]), one loop per operation.
    #[inline(never)]
    fn pair_sum[F](x: &[F], y: &[F], op: Arith, scale: F) -> f64 where [F: Lane + Elem] = pair_sum_body;
}

/// The body of [`pair_sum`], compiled into each of its copies.
#[inline(always)]
fn pair_sum_body<F>(x: &[F], y: &[F], op: Arith, scale: F) -> f64
where
    F: Lane + Elem,
{
    match op {
        Arith::Add => zip_sum(x, y, |a, b| (a + b) * scale),
        Arith::Sub => zip_sum(x, y, |a, b| (a - b) * scale),
        Arith::Mul => zip_sum(x, y, |a, b| (a * b) * scale),
        Arith::Div => zip_sum(x, y, |a, b| (a / b) * scale),
        Arith::Rem => zip_sum(x, y, |a, b| (a % b) * scale),
    }
}

/// `a op b` in type `F`.
#[inline(always)]
fn arith<F: Lane>(op: Arith, a: F, b: F) -> F {
    match op {
        Arith::Add => a + b,
        Arith::Sub => a - b,
        Arith::Mul => a * b,
        Arith::Div => a / b,
        Arith::Rem => a % b,
    }
}

/// `top[i] = top[i] op x[i]` for value column `k`'s values `x` of the cells `src` names.
#[inline(always)]
fn load_bin<C: Cells, F: Lane>(src: &Source<C>, k: usize, a: Arith, top: &mut [F]) {
    let (cells, from, at) = (src.cells, src.from, src.at);
    // One loop per operation, so none branches per element.
    match a {
        Arith::Add => cells.load(k, from, at, top, |o, x| o + x),
        Arith::Sub => cells.load(k, from, at, top, |o, x| o - x),
        Arith::Mul => cells.load(k, from, at, top, |o, x| o * x),
        Arith::Div => cells.load(k, from, at, top, |o, x| o / x),
        Arith::Rem => cells.load(k, from, at, top, |o, x| o % x),
    }
}

/// The cells one evaluation reads.
struct Source<'a, C> {
    cells: &'a C,
    from: usize,
    at: Option<&'a [u32]>,
    n: usize,
}

/// Apply `op` to the stack of blocks `buf` of height `h` over `src`;
/// true when a square root met a negative input.
#[inline(always)]
fn step<C: Cells, F: Lane>(op: Step, src: &Source<C>, buf: &mut [F], h: &mut usize) -> bool {
    let n = src.n;
    let top = |h: usize| (h - 1) * BLOCK..(h - 1) * BLOCK + n;
    match op {
        Step::Load(k) => {
            src.cells
                .load(k, src.from, src.at, &mut buf[*h * BLOCK..][..n], |_, x| x);
            *h += 1;
        }
        Step::LoadBin(k, a) => load_bin(src, k, a, &mut buf[top(*h)]),
        Step::LoadPair(j, k, a) => {
            let out = &mut buf[*h * BLOCK..][..n];
            let (cells, from) = (src.cells, src.from);
            match (src.at, cells.view::<F>(j, from, n), cells.view::<F>(k, from, n)) {
                (None, Some(x), Some(y)) => {
                    let pairs = out.iter_mut().zip(x.iter().zip(y));
                    // One loop per operation, so none branches per element.
                    match a {
                        Arith::Add => pairs.for_each(|(o, (&x, &y))| *o = x + y),
                        Arith::Sub => pairs.for_each(|(o, (&x, &y))| *o = x - y),
                        Arith::Mul => pairs.for_each(|(o, (&x, &y))| *o = x * y),
                        Arith::Div => pairs.for_each(|(o, (&x, &y))| *o = x / y),
                        Arith::Rem => pairs.for_each(|(o, (&x, &y))| *o = x % y),
                    }
                }
                _ => {
                    cells.load(j, from, src.at, out, |_, x| x);
                    load_bin(src, k, a, out);
                }
            }
            *h += 1;
        }
        Step::Push(c) => {
            buf[*h * BLOCK..][..n].fill(F::of_f64(c));
            *h += 1;
        }
        Step::Neg => buf[top(*h)].iter_mut().for_each(|o| *o = -*o),
        Step::Abs => buf[top(*h)].iter_mut().for_each(|o| *o = o.abs()),
        Step::Sqrt => {
            // DataFusion's check, as a reduction that vectorizes.
            let mut negative = 0u32;
            for o in &mut buf[top(*h)] {
                negative |= (*o < F::default()) as u32;
                *o = o.sqrt();
            }
            return negative != 0;
        }
        Step::Bin(a) => {
            let (lo, hi) = buf.split_at_mut((*h - 1) * BLOCK);
            let l = &mut lo[(*h - 2) * BLOCK..][..n];
            l.iter_mut().zip(&hi[..n]).for_each(|(o, &r)| *o = arith(a, *o, r));
            *h -= 1;
        }
        Step::BinConst(a, c) => {
            let c = F::of_f64(c);
            buf[top(*h)].iter_mut().for_each(|o| *o = arith(a, *o, c));
        }
        Step::ConstBin(a, c) => {
            let c = F::of_f64(c);
            buf[top(*h)].iter_mut().for_each(|o| *o = arith(a, c, *o));
        }
    }
    false
}

/// What the compiler knows of the table.
struct Ctx<'a> {
    table: &'a TableModel,
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

/// A float type the programs compute in.
pub trait Lane:
    Element
    + Copy
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
    /// The stored type of the same values.
    const DTYPE: DType;
    /// `x` rounded to this type (as Arrow casts f64 to f32).
    fn of_f64(x: f64) -> Self;
    /// A value of the other type converted (Arrow's cast).
    fn of_other(x: Self::Other) -> Self;
    /// A stored value converted (Arrow's cast).
    fn of_elem<T: Elem>(x: T) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    /// The first `n` results of [`Program::eval`] when the program has this type.
    fn result(s: &Scratch, n: usize) -> &[Self];
}

impl Lane for f32 {
    type Other = f64;
    const DTYPE: DType = DType::F32;
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
    #[inline(always)]
    fn result(s: &Scratch, n: usize) -> &[Self] {
        &s.f32[..n]
    }
}

impl Lane for f64 {
    type Other = f32;
    const DTYPE: DType = DType::F64;
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
    #[inline(always)]
    fn result(s: &Scratch, n: usize) -> &[Self] {
        &s.f64[..n]
    }
}

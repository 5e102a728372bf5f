//! The compiled form of a program: typed postfix operations over blocks of cells.

use super::lane::{BLOCK, Scratch};

/// The float type of an intermediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    F32,
    F64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// One step of a compiled expression: a postfix program over two stacks of blocks, one
/// per float type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Op {
    /// Pop a block of the other type, push it converted to this one.
    Cast(Ty),
    /// A step on the top of this type's stack.
    Step(Ty, Step),
}

/// A step within one type's stack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// Push value column `k`'s stored values, converted (and unpacked when packed).
    Load(usize),
    /// The top `a` becomes `a op` value column `k` (converted as by `Load`): one pass
    /// instead of a load and a step.
    LoadBin(usize, Arith),
    /// Push value column `j` `op` value column `k`: one pass over both where the cells
    /// hold both in place ([`Cells::view`]), else a `Load` and a `LoadBin`.
    LoadCombined(usize, usize, Arith),
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
    pub(super) ops: Vec<Op>,
    pub(super) ty: Ty,
    /// The result is evaluated in f32 and is of type f64 (`ty`) by a conversion that is
    /// exact, left to the fold (`Elem::f`): a root cast from f32, or an f32 column read
    /// as f64.
    pub(super) widened: bool,
    /// The value columns read (indices into the table's values, ascending).
    pub(super) columns: Vec<usize>,
    /// The most blocks each stack (f32, f64) holds at once.
    pub(super) depth: (usize, usize),
}

impl Program {
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
}

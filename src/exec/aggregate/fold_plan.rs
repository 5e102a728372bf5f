use super::order_values::order_program;
use crate::exec::kernel::Needs;
use crate::exec::program::{Program, weighted_program};
use crate::exec::tile::TileExprs;
use crate::format::DType;
use crate::plan::{
    Affine, AggFunc, AggInput, AggSpec, Aggregation, KeyRounding, TableModel, VALUE_COLUMN, ValueRanges, value_ranges,
    weighted_input,
};
use arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{Expr, cast};
use std::collections::BTreeSet;

/// Cells of one slab when several inputs walk a tile (64 KiB of f32: within L2), and of
/// each batch evaluated inputs are evaluated over (`evaluated`).
pub(super) const SLAB_CELLS: u64 = 16 * 1024;

/// Which accumulators an aggregate needs.
pub(super) fn needs(spec: &AggSpec) -> Needs {
    let mut n = Needs::default();
    match spec.func {
        AggFunc::CountStar | AggFunc::Count => {}
        AggFunc::Sum if spec.states()[0].1 != DataType::Float64 => n.isum = true,
        AggFunc::Sum | AggFunc::Avg => n.fsum = true,
        AggFunc::Min | AggFunc::Max => n.min_max = true,
        _ => {
            n.moments = true;
            n.fsum = true;
        }
    }
    n
}

pub(super) fn union(a: Needs, b: Needs) -> Needs {
    Needs {
        fsum: a.fsum || b.fsum,
        isum: a.isum || b.isum,
        min_max: a.min_max || b.min_max,
        moments: a.moments || b.moments,
    }
}

/// What one set of accumulators folds.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum InputKind {
    /// The tile's stored values kept by `ranges`; without the tile (a table of several
    /// datasets) the cells those ranges keep.
    Stored { ranges: ValueRanges },
    /// Expression `value` (index into the [`TileExprs`]; `None`: cells only) over the cells
    /// that pass the row filter and where expression `filter` is true. Both are evaluated
    /// on the rows the row filter keeps, as DataFusion evaluates them above its filter.
    Evaluated {
        value: Option<usize>,
        filter: Option<usize>,
    },
    /// Weight `weight` (index into [`FoldPlan::weights`]) times the stored values mapped
    /// by `value` (`None`: the weight alone), over the cells `ranges` keep.
    Weighted {
        weight: usize,
        value: Option<Affine>,
        f32_product: bool,
        ranges: ValueRanges,
    },
    /// Program `program` (index into [`FoldPlan::programs`]) over the cells `ranges` keep.
    Program { program: usize, ranges: ValueRanges },
    /// Program `program` times weight `weight` (index into [`FoldPlan::weights`]), per
    /// cell: in f32 when `f32_product` (then widened), else in f64.
    WeightedProgram {
        program: usize,
        weight: usize,
        f32_product: bool,
        ranges: ValueRanges,
    },
}

impl InputKind {
    /// The ranges of stored values that keep the input's cells (`None`: evaluated).
    pub(super) fn ranges(&self) -> Option<&ValueRanges> {
        match self {
            InputKind::Stored { ranges }
            | InputKind::Weighted { ranges, .. }
            | InputKind::Program { ranges, .. }
            | InputKind::WeightedProgram { ranges, .. } => Some(ranges),
            InputKind::Evaluated { .. } => None,
        }
    }
}

/// One set of accumulators and how to read them.
#[derive(Debug, Clone)]
pub(super) struct Input {
    pub(super) kind: InputKind,
    pub(super) needs: Needs,
    /// The folded values are floats (else integers).
    pub(super) float: bool,
    /// Integers folded are unsigned.
    pub(super) unsigned: bool,
    /// The folded values are the stored ones of a packed dataset.
    pub(super) packed: bool,
}

/// How an aggregation folds: its inputs, which input each aggregate reads, the
/// expressions evaluated per tile, and the input whose cells decide which groups exist.
#[derive(Debug)]
pub(super) struct FoldPlan {
    pub(super) inputs: Vec<Input>,
    /// Per aggregate: its input, or for a function of two inputs, its pair (index into
    /// `pairs`).
    pub(super) of_agg: Vec<Slot>,
    /// The inputs of functions of two (`corr`): expressions (indices into `exprs`) and
    /// the `FILTER`.
    pub(super) pairs: Vec<PairInput>,
    /// The input counting the rows that pass the row filter.
    pub(super) rows: usize,
    pub(super) exprs: TileExprs,
    /// The row filter (index into `exprs`), when an evaluated input needs it.
    pub(super) row_filter: Option<usize>,
    /// The weights of weighted inputs: (axis, expression of it alone).
    pub(super) weights: Vec<(usize, Expr)>,
    /// Compiled expressions of the value columns.
    pub(super) programs: Vec<Program>,
    /// In a table of several datasets, the value columns the programs read and the
    /// filters compare (whose aligned cells each task gathers); empty otherwise.
    pub(super) aligned_columns: Vec<usize>,
    /// In a table of several datasets, the distinct filters of the inputs as ranges of
    /// stored values (which cells pass each is found once per task).
    pub(super) aligned_filters: Vec<ValueRanges>,
    /// Two inputs over the stored values of one float dataset folded in one pass
    /// ([`fold_run_sum_and_count`](crate::exec::kernel::fold_run_sum_and_count)): (sums without a range, counts within one).
    pub(super) sum_and_count: Option<(usize, usize)>,
    /// The inputs of order statistics, whose values each group gathers.
    pub(super) order_inputs: Vec<OrderInput>,
    /// The key of the value: its program (index into `programs`) and rounding. Its fold
    /// has one input, of the stored values kept by the row filter's ranges.
    pub(super) value_key: Option<(usize, KeyRounding)>,
}

impl FoldPlan {
    /// The pairs of compiled expressions.
    pub(super) fn compiled_pairs(&self) -> impl Iterator<Item = &PairInput> {
        self.pairs.iter().filter(|p| matches!(p, PairInput::Compiled { .. }))
    }
}

/// Where an aggregate's statistics are kept.
#[derive(Debug, Clone, Copy)]
pub(super) enum Slot {
    Input(usize),
    Pair(usize),
    /// The values an order statistic selects from (index into [`FoldPlan::order_inputs`]).
    Order(usize),
}

/// What an order statistic gathers per group: program `program` (index into
/// [`FoldPlan::programs`]) over the cells `ranges` keep.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OrderInput {
    pub(super) program: usize,
    pub(super) ranges: ValueRanges,
    /// Sketched for an approximate statistic, rather than kept whole.
    pub(super) approximate: bool,
}

/// Two inputs folded as co-moments.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PairInput {
    /// Expressions `x`, `y` (indices into `exprs`) over the cells that pass the row
    /// filter and where expression `filter` is true.
    Evaluated { x: usize, y: usize, filter: Option<usize> },
    /// Programs `x`, `y` (indices into `programs`) over the cells kept by the missing
    /// rules and `ranges`.
    Compiled { x: usize, y: usize, ranges: ValueRanges },
}

/// The position of `item` in `items`, pushed at the end when absent: the plan's lists
/// hold each expression, program, weight and pair once, however many aggregates name it.
fn intern<T: PartialEq>(items: &mut Vec<T>, item: T) -> usize {
    intern_by(items, item, |a, b| a == b)
}

/// [`intern`] with `same` deciding which entry is the item's.
fn intern_by<T>(items: &mut Vec<T>, item: T, same: impl Fn(&T, &T) -> bool) -> usize {
    match items.iter().position(|x| same(x, &item)) {
        Some(i) => i,
        None => {
            items.push(item);
            items.len() - 1
        }
    }
}

impl FoldPlan {
    /// The fold of `aggregation` over `table`: its inputs (shared by kind), programs,
    /// pairs, weights and expressions, each once, and the slot of each aggregate.
    pub(super) fn new(table: &TableModel, aggregation: &Aggregation) -> Result<Self> {
        let dtype = table.dataset().dtype();
        let mut exprs: Vec<Expr> = Vec::new();
        let mut expr_index = |e: Expr| intern(&mut exprs, e);
        let row_filter = aggregation.filter.clone();
        let mut inputs: Vec<Input> = Vec::new();
        // Inputs of one kind share an accumulator, which keeps what each of them needs.
        let mut add = |input: Input| {
            let needs = input.needs;
            let i = intern_by(&mut inputs, input, |a, b| a.kind == b.kind);
            inputs[i].needs = union(inputs[i].needs, needs);
            i
        };
        let stored = |ranges| Input {
            kind: InputKind::Stored { ranges },
            needs: Needs::default(),
            float: dtype.is_float(),
            unsigned: dtype.is_unsigned(),
            packed: table.value().packing.is_some(),
        };
        // Either filter as ranges of the stored values, both combined.
        let ranges_of = |f: &Option<Expr>| match f {
            None => Some(ValueRanges::default()),
            Some(e) => value_ranges(table, e),
        };
        let combined = |f: &Option<Expr>| Some(ranges_of(&row_filter)?.and(&ranges_of(f)?));
        // Compiled expressions, shared by the inputs that evaluate them.
        let mut programs: Vec<Program> = Vec::new();
        let mut program_index = |p: Program| intern(&mut programs, p);
        // Functions of two inputs fold their pairs as co-moments: of compiled expressions
        // when both compile (as for one input: without FILTER), else of evaluated ones.
        let mut pairs: Vec<PairInput> = Vec::new();
        let pair_of: Vec<Option<usize>> = aggregation
            .aggs
            .iter()
            .map(|a| {
                let AggInput::Pair(x, y) = &a.input else {
                    return None;
                };
                let compiled = match (&a.filter, combined(&None)) {
                    (None, Some(ranges)) => Program::compile(table, x)
                        .zip(Program::compile(table, y))
                        .map(|p| (p, ranges)),
                    _ => None,
                };
                let p = match compiled {
                    Some(((px, py), ranges)) => PairInput::Compiled {
                        x: program_index(px),
                        y: program_index(py),
                        ranges,
                    },
                    None => PairInput::Evaluated {
                        x: expr_index(x.clone()),
                        y: expr_index(y.clone()),
                        filter: a.filter.clone().map(&mut expr_index),
                    },
                };
                Some(intern(&mut pairs, p))
            })
            .collect();
        let mut evaluated = |value: Option<Expr>, filter: &Option<Expr>, a: Option<&AggSpec>| Input {
            kind: InputKind::Evaluated {
                value: value.map(&mut expr_index),
                filter: filter.clone().map(&mut expr_index),
            },
            needs: Needs::default(),
            float: a.is_some_and(|a| a.input_type.is_floating()),
            unsigned: a.is_some_and(|a| a.input_type.is_unsigned_integer()),
            packed: false,
        };
        let rows = match combined(&None) {
            Some(ranges) => add(stored(ranges)),
            None => add(evaluated(None, &None, None)),
        };
        let mut of_agg = Vec::new();
        let mut order_inputs: Vec<OrderInput> = Vec::new();
        let mut weights: Vec<(usize, Expr)> = Vec::new();
        let mut weight_index = |axis: usize, e: Expr| intern(&mut weights, (axis, e));
        let packing = table.value().packing.map(Affine::from);
        for (a, pair) in aggregation.aggs.iter().zip(&pair_of) {
            if let Some(j) = pair {
                of_agg.push(Slot::Pair(*j));
                continue;
            }
            if a.func.is_order_statistic() {
                // The rewrite took the aggregate only when its input compiles and its
                // filters are ranges (`sql::foldable`).
                let program = match &a.input {
                    AggInput::Expr(e) => order_program(table, e, &a.input_type, a.filter.is_some()),
                    _ => None,
                };
                let (Some(program), Some(ranges)) = (program, combined(&a.filter)) else {
                    return internal_err!(
                        "TetAggregateExec: {} of an input the fold does not gather",
                        a.func.name()
                    );
                };
                let input = OrderInput {
                    program: program_index(program),
                    ranges,
                    approximate: a.func.is_approximate(),
                };
                of_agg.push(Slot::Order(intern(&mut order_inputs, input)));
                continue;
            }
            let plain = matches!(a.input, AggInput::Value { .. }) || a.func == AggFunc::CountStar;
            let weighted = match &a.input {
                AggInput::Expr(e) if matches!(a.func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count) => {
                    weighted_input(table, e)
                }
                _ => None,
            };
            // A compiled expression of `v` without FILTER: DataFusion evaluates an input
            // on every row its filter keeps, FILTER or not (a negative square root fails
            // the query), so the rows evaluated are the rows folded.
            let program = match &a.input {
                AggInput::Expr(e) if a.filter.is_none() => Program::compile(table, e),
                _ => None,
            };
            // A compiled expression times a weight of one axis (`a * b * cos(radians(lat))`),
            // when `weighted` (one dataset's `v` times a weight) does not cover it.
            let weighted_program = match &a.input {
                AggInput::Expr(e)
                    if weighted.is_none()
                        && a.filter.is_none()
                        && matches!(a.func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count) =>
                {
                    weighted_program(table, e)
                }
                _ => None,
            };
            let input = match (plain, weighted, combined(&a.filter)) {
                (true, _, Some(ranges)) => stored(ranges),
                (false, _, Some(ranges)) if program.is_some() => {
                    let program = program_index(program.expect("checked"));
                    Input {
                        kind: InputKind::Program { program, ranges },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                (false, None, Some(ranges)) if weighted_program.is_some() => {
                    let (w, p) = weighted_program.expect("checked");
                    Input {
                        kind: InputKind::WeightedProgram {
                            program: program_index(p),
                            weight: weight_index(w.axis, w.weight),
                            f32_product: w.f32_product,
                            ranges,
                        },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                (false, Some(w), Some(ranges)) => {
                    let weight = weight_index(w.axis, w.weight);
                    // The stored values are v unpacked.
                    let value = w.value.map(|m| packing.map_or(m, |p| p.then(m)));
                    Input {
                        kind: InputKind::Weighted {
                            weight,
                            value,
                            f32_product: w.f32_product,
                            ranges,
                        },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                _ => {
                    let value = match (&a.input, a.func) {
                        (_, AggFunc::CountStar) => None,
                        (AggInput::Value { .. }, _) => {
                            let v = Expr::Column(Column::from_name(VALUE_COLUMN));
                            Some(if a.input_type == table.value_type() {
                                v
                            } else {
                                cast(v, a.input_type.clone())
                            })
                        }
                        (AggInput::Expr(e), _) => Some(e.clone()),
                        (AggInput::Pair(..), _) => None,
                    };
                    evaluated(value, &a.filter, Some(a))
                }
            };
            let i = add(Input {
                needs: needs(a),
                ..input
            });
            of_agg.push(Slot::Input(i));
        }
        let value_key = match &aggregation.value_key {
            None => None,
            Some(k) => {
                let program = order_program(table, &k.expr, &k.data_type, true);
                let one_stored = matches!(
                    inputs.as_slice(),
                    [Input {
                        kind: InputKind::Stored { .. },
                        ..
                    }]
                );
                let Some(program) = program.filter(|_| one_stored && pairs.is_empty() && order_inputs.is_empty())
                else {
                    return internal_err!(
                        "TetAggregateExec: a key of the value {} the fold does not take",
                        k.sql()
                    );
                };
                Some((program_index(program), k.rounding))
            }
        };
        let uses_rows = pairs.iter().any(|p| matches!(p, PairInput::Evaluated { .. }))
            || inputs.iter().any(|i| matches!(i.kind, InputKind::Evaluated { .. }));
        let row_filter = row_filter.filter(|_| uses_rows).map(&mut expr_index);
        let exprs = TileExprs::new(table, &exprs)?;
        // In a table of several datasets: the distinct filters of the inputs (which
        // cells pass each is found once per task), and the columns the programs read and
        // the filters compare.
        let mut aligned_filters: Vec<ValueRanges> = Vec::new();
        let mut aligned_columns = BTreeSet::new();
        if table.is_multi() {
            let compiled = pairs.iter().filter_map(|p| match p {
                PairInput::Compiled { ranges, .. } => Some(ranges),
                PairInput::Evaluated { .. } => None,
            });
            let gathered = order_inputs.iter().map(|o| &o.ranges);
            for r in inputs
                .iter()
                .filter_map(|i| i.kind.ranges())
                .chain(compiled)
                .chain(gathered)
            {
                if !r.is_empty() && !aligned_filters.contains(r) {
                    aligned_filters.push(r.clone());
                    aligned_columns.extend(r.columns());
                }
            }
            aligned_columns.extend(programs.iter().flat_map(|p| p.columns().iter().copied()));
        }
        let aligned_columns = aligned_columns.into_iter().collect();
        let sum_and_count = match (table.is_multi(), dtype) {
            (false, DType::F32 | DType::F64) => {
                let stored = |i: &Input| match &i.kind {
                    InputKind::Stored { ranges } => Some((ranges.of(0), i.needs)),
                    _ => None,
                };
                let sums = inputs
                    .iter()
                    .position(|i| stored(i).is_some_and(|(r, n)| r.is_none() && n.sum_only()));
                let counts = inputs
                    .iter()
                    .position(|i| stored(i).is_some_and(|(r, n)| r.is_some() && n == Needs::default()));
                sums.zip(counts)
            }
            _ => None,
        };
        Ok(FoldPlan {
            value_key,
            order_inputs,
            sum_and_count,
            aligned_columns,
            aligned_filters,
            inputs,
            of_agg,
            pairs,
            rows,
            exprs,
            row_filter,
            weights,
            programs,
        })
    }
}

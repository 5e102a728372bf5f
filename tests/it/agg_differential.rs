//! Differential tests of the aggregate pushdown: on random files and random queries the
//! pushed-down answer equals DataFusion's own plan (`SET tet.aggregate_pushdown = false`),
//! and `TetAggregateExec` appears exactly when the rule should fire.

use crate::common::{Rng, Val, assert_same, close, ctx, ctx_with, rows, rows_and_scan_metrics, sorted, tempdir};
use crate::sql_differential::Case;
use datafusion::physical_plan::{ExecutionPlanProperties, displayable};
use datafusion::prelude::SessionContext;
use datafusion_tet::format::DType;

pub async fn no_pushdown() -> SessionContext {
    ctx_with(&["tet.aggregate_pushdown = false"]).await
}

/// A session whose pushdown leaves the merge of the fold's partitions to DataFusion
/// (`tet.merge_in_scan = false`): partial states per partition, as Ballista runs it.
pub async fn merged_by_datafusion() -> SessionContext {
    ctx_with(&["tet.merge_in_scan = false"]).await
}

pub async fn plan_text(ctx: &SessionContext, sql: &str) -> Option<String> {
    let df = ctx.sql(sql).await.ok()?;
    let p = df.create_physical_plan().await.ok()?;
    Some(displayable(p.as_ref()).indent(true).to_string())
}

/// Returns false when DataFusion itself refuses the query (and checks the pushdown does too).
/// `expect_pushdown`: whether `on`'s physical plan must (not) hold `TetAggregateExec`
/// (`None` for distributed sessions, whose local plan is only the client's stub).
pub async fn compare(on: &SessionContext, off: &SessionContext, sql: &str, expect_pushdown: Option<bool>) -> bool {
    let want = match off.sql(sql).await {
        Ok(df) => df.collect().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let Ok(_) = want else {
        // DataFusion itself refuses the query (e.g. an aggregate not defined for Float16):
        // the pushdown must refuse it too.
        assert!(
            on.sql(sql).await.is_err() || on.sql(sql).await.unwrap().collect().await.is_err(),
            "{sql}"
        );
        return false;
    };
    if let Some(expect) = expect_pushdown {
        let plan = plan_text(on, sql).await.unwrap();
        if plan.contains("TetAggregateExec") != expect {
            let logical = on.sql(sql).await.unwrap().into_optimized_plan().unwrap();
            panic!(
                "{sql}: TetAggregateExec expected: {expect}\n{plan}\n{}",
                logical.display_indent()
            );
        }
    }
    assert_same(rows(on, sql).await, rows(off, sql).await, sql);
    true
}

const AGGS: &[&str] = &[
    "count(*)",
    "count(v)",
    "sum(v)",
    "avg(v)",
    "min(v)",
    "max(v)",
    "var_pop(v)",
    "var(v)",
    "var_samp(v)",
    "stddev_pop(v)",
    "stddev(v)",
    "sum(CAST(v AS DOUBLE))",
    "max(CAST(v AS DOUBLE))",
];

/// A random grouped aggregate over `from` (a table of `case`): random group-by axes,
/// one to three aggregates of [`AGGS`], random axis predicates.
pub fn random_aggregate(case: &Case, rng: &mut Rng, from: &str) -> String {
    let n = case.axes.len();
    let groups: Vec<String> = (0..n)
        .filter(|_| rng.below(2) == 0)
        .map(|d| case.axes[d].name.clone())
        .collect();
    let aggs: Vec<&str> = (0..rng.range(1, 4))
        .map(|_| AGGS[rng.below(AGGS.len() as u64) as usize])
        .collect();
    let mut preds = Vec::new();
    for d in 0..n {
        if rng.below(3) == 0 {
            preds.push(case.predicate(rng, d).0);
        }
    }
    let where_ = if preds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", preds.join(" AND "))
    };
    let select: Vec<String> = groups
        .iter()
        .cloned()
        .chain(aggs.iter().map(|a| a.to_string()))
        .collect();
    let group_by = if groups.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", groups.join(", "))
    };
    format!("SELECT {} FROM {from}{where_}{group_by}", select.join(", "))
}

#[tokio::test(flavor = "multi_thread")]
async fn random_aggregates_equal_datafusion() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let states = merged_by_datafusion().await;
    let mut rng = Rng(77);
    let mut compared = 0;
    for k in 0..30 {
        let case = Case::generate(&mut rng, dir.path(), k);
        // Half of the files under an alias: a qualifier must not change the plan.
        let alias = if k % 2 == 0 { "" } else { " AS x" };
        let from = format!("tet('{}', 't'){alias}", case.path);
        for _ in 0..4 {
            let sql = random_aggregate(&case, &mut rng, &from);
            compared += compare(&on, &off, &sql, Some(true)).await as usize;
            compare(&states, &off, &sql, Some(true)).await;
        }
    }
    // Most random queries are valid SQL (some compare a text label with a number).
    assert!(compared >= 90, "only {compared} of 120 queries compared");
}

#[tokio::test(flavor = "multi_thread")]
async fn query_shapes_around_the_aggregate() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(3);
    // A float case with labels on some axes.
    let case = Case::first(&mut rng, dir.path(), |c| c.axes.len() >= 3 && c.dtype.is_float());
    let f = format!("tet('{}', 't')", case.path);
    let (a0, a1, a2) = (&case.axes[0].name, &case.axes[1].name, &case.axes[2].name);
    // The axis just outside the innermost one.
    let rows = &case.axes[case.axes.len() - 2].name;
    let fire = [
        format!(
            "SELECT {a1} AS x, {a0}, sum(v) AS s, count(*) FROM {f} GROUP BY {a0}, {a1} ORDER BY s DESC, {a0}, {a1} LIMIT 3"
        ),
        format!("SELECT {a0}, avg(v) FROM {f} GROUP BY {a0} HAVING count(*) > 1"),
        format!("WITH g AS (SELECT {a2}, max(v) AS m FROM {f} GROUP BY {a2}) SELECT * FROM g WHERE m > 0"),
        format!("SELECT * FROM (SELECT {a0}, stddev(v) AS sd FROM {f} GROUP BY {a0}) WHERE sd IS NOT NULL"),
        format!("SELECT {a2}, {a0}, var_pop(v) FROM {f} GROUP BY {a2}, {a0}"),
        format!("SELECT {a0}, sum(v) FILTER (WHERE {a1} = 0) FROM {f} GROUP BY {a0}"),
        format!("SELECT sum(v + 1) FROM {f}"),
        format!("SELECT {a0}, sum(v) FROM {f} WHERE v > 0 GROUP BY {a0}"),
        // Grouped by the axis outside a whole innermost one: rows fold as blocks.
        format!("SELECT {a1}, avg(v), min(v), count(*) FROM {f} GROUP BY {a1}"),
        format!("SELECT {a0}, {a1}, sum(v), var_pop(v) FROM {f} GROUP BY {a0}, {a1}"),
        // Cells counted without their values, and a counted pair, grouped by rows.
        format!("SELECT {rows}, count(*) FROM {f} GROUP BY {rows}"),
        format!("SELECT {rows}, count(*) FILTER (WHERE v > 0), avg(v) FROM {f} GROUP BY {rows}"),
    ];
    for q in &fire {
        assert!(compare(&on, &off, q, Some(true)).await, "{q}");
    }
    // Keys of the value fold where `v` is a float (DataFusion plans a distinct count as a
    // grouping by `v`); over integers DataFusion groups them. Answers compared either way.
    let float = matches!(case.dtype, DType::F32 | DType::F64).then_some(true);
    for q in [
        format!("SELECT count(DISTINCT v) FROM {f}"),
        format!("SELECT v, count(*) FROM {f} GROUP BY v"),
    ] {
        compare(&on, &off, &q, float).await;
    }
    let keep = [
        // A semi join sits between the aggregate and the scan. (The subquery is ordered:
        // `LIMIT 1` alone picks any row, and the two sessions may pick different ones.)
        format!("SELECT count(*), sum(v), min(v) FROM {f} WHERE {a0} IN (SELECT {a0} FROM {f} ORDER BY {a0} LIMIT 1)"),
    ];
    for q in &keep {
        assert!(compare(&on, &off, q, Some(false)).await, "{q}");
    }
    // An order statistic folds where its input compiles: f32 and f64, not f16.
    let median = format!("SELECT median(v) FROM {f}");
    let folds = case.dtype != DType::F16;
    assert!(compare(&on, &off, &median, Some(folds)).await, "{median}");
}

/// Lines of an indented physical plan naming the operator `name`.
fn operators(plan: &str, name: &str) -> usize {
    plan.lines().filter(|l| l.trim_start().starts_with(name)).count()
}

/// By default the fold merges its partitions itself: the plan is a projection over
/// `TetAggregateExec` with one output partition, no aggregate, repartition or coalesce of
/// DataFusion's above it, and the answers are DataFusion's, also with more partitions
/// than chunks and over no cells. With `tet.merge_in_scan = false`, DataFusion's
/// aggregate merges partial states.
#[tokio::test(flavor = "multi_thread")]
async fn the_fold_merges_its_partitions_in_one_output() {
    let dir = tempdir();
    let off = no_pushdown().await;
    let states = merged_by_datafusion().await;
    let mut rng = Rng(3);
    let case = Case::first(&mut rng, dir.path(), |c| c.axes.len() >= 2 && c.dtype.is_float());
    let f = format!("tet('{}', 't')", case.path);
    let (a0, a1) = (&case.axes[0].name, &case.axes[1].name);
    let never = match &case.axes[0].values[0] {
        Val::Str(_) => format!("{a0} = 'nope'"),
        _ => format!("{a0} < -1000000"),
    };
    let queries = [
        format!("SELECT avg(v) FROM {f}"),
        format!(
            "SELECT {a0}, sum(v), count(*), count(v), var(v), stddev_pop(v), min(v), max(v) FROM {f} GROUP BY {a0}"
        ),
        format!(
            "SELECT {a1}, {a0}, avg(v) FILTER (WHERE v > 0), covar_pop(v, v * v), corr(v, v + 1) FROM {f} GROUP BY {a1}, {a0}"
        ),
        format!("SELECT count(*), count(v), sum(v), avg(v), min(v), var_samp(v), corr(v, v) FROM {f} WHERE {never}"),
        format!("SELECT {a0}, count(*) FROM {f} WHERE {never} GROUP BY {a0}"),
    ];
    for partitions in [1, 2, 7] {
        let on = ctx_with(&[&format!("datafusion.execution.target_partitions = {partitions}")]).await;
        for q in &queries {
            assert!(compare(&on, &off, q, Some(true)).await, "{q}");
            let plan = on.sql(q).await.unwrap().create_physical_plan().await.unwrap();
            let text = plan_text(&on, q).await.unwrap();
            assert_eq!(plan.output_partitioning().partition_count(), 1, "{q}\n{text}");
            for merge in ["AggregateExec", "RepartitionExec", "CoalescePartitionsExec"] {
                assert_eq!(operators(&text, merge), 0, "{q}\n{text}");
            }
            assert_eq!(operators(&text, "TetAggregateExec"), 1, "{q}\n{text}");
            assert!(text.contains("output=values"), "{q}\n{text}");
        }
    }
    for q in &queries {
        assert!(compare(&states, &off, q, Some(true)).await, "{q}");
        let text = plan_text(&states, q).await.unwrap();
        assert!(operators(&text, "AggregateExec: mode=") >= 1, "{q}\n{text}");
        assert!(text.contains("output=states"), "{q}\n{text}");
    }
}

/// Names put on the table (`AS x`, subqueries, CTEs, views) are only qualifiers: the
/// aggregate above them still folds in the scan.
#[tokio::test(flavor = "multi_thread")]
async fn aliases_subqueries_and_views_keep_the_pushdown() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(5);
    let case = Case::first(&mut rng, dir.path(), |c| c.axes.len() >= 2 && c.dtype.is_float());
    let f = format!("tet('{}', 't')", case.path);
    let (a0, a1) = (&case.axes[0].name, &case.axes[1].name);
    for c in [&on, &off] {
        for view in [
            format!("CREATE VIEW cube AS SELECT * FROM {f}"),
            format!("CREATE VIEW scaled AS SELECT {a0} AS k, {a1}, v * 2 + 1 AS w FROM {f} WHERE v > 0"),
        ] {
            c.sql(&view).await.unwrap().collect().await.unwrap();
        }
    }
    let fire = [
        format!("SELECT x.{a0}, avg(x.v), max(x.v) FROM {f} AS x GROUP BY x.{a0}"),
        format!("SELECT x.{a0}, count(*), sum(v) FROM {f} x WHERE x.v > 0 AND x.{a1} IS NOT NULL GROUP BY x.{a0}"),
        format!("SELECT s.k, var_pop(s.w) FROM (SELECT {a0} AS k, v + 1 AS w FROM {f}) AS s GROUP BY s.k"),
        format!("WITH c AS (SELECT * FROM {f} WHERE v > 0) SELECT {a1}, stddev(v), count(v) FROM c GROUP BY {a1}"),
        format!("SELECT {a0}, avg(v) FROM cube GROUP BY {a0}"),
        "SELECT sum(v), min(v) FROM cube".to_string(),
        format!("SELECT k, {a1}, avg(w), count(*) FROM scaled GROUP BY k, {a1}"),
        // Aliases stacked on aliases, with a filter above one of them.
        format!(
            "SELECT y.k, sum(y.w) FROM (SELECT c.{a0} AS k, c.v AS w FROM cube AS c) AS y WHERE y.w > 0 GROUP BY y.k"
        ),
    ];
    for q in &fire {
        assert!(compare(&on, &off, q, Some(true)).await, "{q}");
    }
    // Not a fold of the scan: the subquery's LIMIT picks rows.
    let keep = format!("SELECT count(*), sum(v) FROM (SELECT * FROM {f} ORDER BY {a0}, {a1} LIMIT 3) AS x");
    assert!(compare(&on, &off, &keep, Some(false)).await, "{keep}");
}

/// Optimizer passes DataFusion's logical optimizer makes over the plan of `sql` (it
/// stops after the first pass that changes nothing), and which rule changed the plan in
/// which pass.
async fn optimizer_passes(ctx: &SessionContext, sql: &str) -> (usize, Vec<String>) {
    let (state, plan) = ctx.sql(sql).await.unwrap().into_parts();
    let plan = state
        .analyzer()
        .execute_and_check(plan, state.config_options(), |_, _| {})
        .unwrap();
    let rules = state.optimizer().rules.len();
    let (mut applied, mut changes, mut last) = (0, Vec::new(), plan.clone());
    state
        .optimizer()
        .optimize(plan, &state, |p, rule| {
            if *p != last {
                changes.push(format!(
                    "pass {}: {}\n{}",
                    applied / rules,
                    rule.name(),
                    p.display_indent()
                ));
                last = p.clone();
            }
            applied += 1;
        })
        .unwrap();
    (applied / rules, changes)
}

/// The rewrite hands the optimizer a plan it leaves alone (the scan of partial states
/// projects its columns as `optimize_projections` would): the pushdown costs no extra
/// pass of every logical rule over the query, also under a projection above the aggregate
/// (naming `count(*)`, or a key's alias), which the rule merges with its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_rewrite_costs_no_extra_optimizer_pass() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(3);
    let case = Case::first(&mut rng, dir.path(), |c| c.axes.len() >= 2 && c.dtype.is_float());
    let f = format!("tet('{}', 't')", case.path);
    let (a0, a1) = (&case.axes[0].name, &case.axes[1].name);
    for q in [
        format!("SELECT avg(v) FROM {f}"),
        format!("SELECT {a0}, avg(v) FROM {f} GROUP BY {a0}"),
        format!("SELECT {a0}, {a1}, count(*), min(v), max(v), var(v) FROM {f} GROUP BY {a0}, {a1}"),
        format!("SELECT {a0}, count(*) FROM {f} WHERE v > 0 GROUP BY {a0}"),
        format!("SELECT {a1} AS k, avg(v) AS m, count(v) FROM {f} GROUP BY {a1} ORDER BY m"),
    ] {
        assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
        let ((with, changes), (without, _)) = (optimizer_passes(&on, &q).await, optimizer_passes(&off, &q).await);
        assert!(
            with <= without,
            "{q}: {with} optimizer passes with the pushdown, {without} without; changes:\n{}",
            changes.join("\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_selections_give_datafusions_empty_results() {
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let mut rng = Rng(11);
    let case = Case::generate(&mut rng, dir.path(), 0);
    let f = format!("tet('{}', 't')", case.path);
    let a0 = &case.axes[0].name;
    let never = match &case.axes[0].values[0] {
        Val::Str(_) => format!("{a0} = 'nope'"),
        _ => format!("{a0} < -1000000"),
    };
    for q in [
        format!("SELECT count(*), count(v), sum(v), avg(v), min(v), var(v) FROM {f} WHERE {never}"),
        format!("SELECT {a0}, count(*) FROM {f} WHERE {never} GROUP BY {a0}"),
    ] {
        assert!(compare(&on, &off, &q, Some(true)).await, "{q}");
    }
    let (got, _) = rows_and_scan_metrics(&on, &format!("SELECT count(*) FROM {f} WHERE {never}")).await;
    assert_eq!(got, vec![vec![Val::Int(0)]]);
}

#[tokio::test(flavor = "multi_thread")]
async fn nan_infinity_and_fill_values_follow_datafusion() {
    use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetWriter};
    let dir = tempdir();
    let (on, off) = (ctx(), no_pushdown().await);
    let vals: Vec<f64> = vec![
        1.0,
        f64::NAN,
        -2.0,
        f64::INFINITY,
        7.0,
        -9999.0,
        3.5,
        -1.0,
        f64::NEG_INFINITY,
        2.0,
        -9999.0,
        0.5,
    ];
    let cols: Vec<f64> = vec![1.0, 2.0, -9999.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
    // Rows of only NaN and +inf, only NaN, only fill values.
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    let edge: Vec<f64> = vec![
        nan, inf, nan, inf, nan, nan, nan, nan, -9999.0, -9999.0, -9999.0, -9999.0,
    ];
    for (name, data) in [("nan", &vals), ("plain", &cols), ("edge", &edge)] {
        for dtype in [DType::F32, DType::F64] {
            let bytes: Vec<u8> = match dtype {
                DType::F32 => data.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
                _ => data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            };
            let path = dir.path().join(format!("{name}_{dtype}.tet"));
            let mut w = TetWriter::new();
            w.dataset(
                DatasetSpec::new("x", dtype, &[3, 4], &[2, 3], &bytes)
                    .codecs(ChunkCodecs::Zstd(1))
                    .dim_names(&["r", "c"])
                    .attr("_FillValue", "-9999"),
            )
            .unwrap();
            w.write_path(&path).unwrap();
            let f = format!("tet('{}')", path.display());
            let all = "count(*), count(v), sum(v), avg(v), min(v), max(v), var_pop(v), stddev(v)";
            assert!(compare(&on, &off, &format!("SELECT {all} FROM {f}"), Some(true)).await);
            // DataFusion's grouped min/max skip NaN while its ungrouped ones order NaN above
            // every number; the pushdown gives the ungrouped answer for each group, so the
            // oracle is DataFusion's ungrouped query per group.
            for (axis, extent) in [("r", 3), ("c", 4)] {
                let grouped = sorted(rows(&on, &format!("SELECT {axis}, {all} FROM {f} GROUP BY {axis}")).await);
                assert_eq!(grouped.len(), extent);
                for (i, row) in grouped.iter().enumerate() {
                    let want = rows(&off, &format!("SELECT {i}, {all} FROM {f} WHERE {axis} = {i}")).await;
                    assert!(
                        row.iter().zip(&want[0]).all(|(a, b)| close(a, b)),
                        "{name} {dtype} {axis}={i}: {row:?} vs {:?}",
                        want[0]
                    );
                }
            }
        }
    }
}

/// The sign bits of a query's float cells, row by row (`Val` compares -0.0 equal to +0.0).
async fn float_bits(ctx: &SessionContext, sql: &str) -> Vec<Vec<Option<u64>>> {
    sorted(rows(ctx, sql).await)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    Val::Float(x) => Some(x.to_bits()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Zeros of both signs, in every order and in runs long and short, fold to DataFusion's
/// order of floats (-0.0 below +0.0, as its ungrouped `min`/`max` and our merges order
/// them): the minimum of {-0.0, +0.0} is -0.0, the maximum +0.0, grouped or not; a packed
/// dataset whose `scale_factor` is -0.0 (and `add_offset` -0.0, which keeps the zeros'
/// signs) swaps its extremes as a negative scale does.
#[tokio::test(flavor = "multi_thread")]
async fn signed_zeros_order_as_datafusion_orders_floats() {
    use datafusion_tet::format::{DType, DatasetSpec, TetWriter};
    let dir = tempdir();
    let path = dir.path().join("zeros.tet");
    // 4 rows of 40 values: row r holds -0.0 at positions where (i + r) % 3 == 0, +0.0
    // elsewhere, so each row (and each lane of the kernels) sees both in both orders.
    let (rows_n, cols) = (4usize, 40usize);
    let f: Vec<f32> = (0..rows_n * cols)
        .map(|k| if (k % cols + k / cols) % 3 == 0 { -0.0 } else { 0.0 })
        .collect();
    let d: Vec<f64> = f.iter().rev().map(|&x| x as f64).collect();
    let packed: Vec<i16> = (0..rows_n * cols).map(|k| k as i16 % 7 - 3).collect();
    let fb: Vec<u8> = f.iter().flat_map(|x| x.to_le_bytes()).collect();
    let db: Vec<u8> = d.iter().flat_map(|x| x.to_le_bytes()).collect();
    let pb: Vec<u8> = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut w = TetWriter::new();
    let shape = [rows_n as u64, cols as u64];
    w.dataset(DatasetSpec::new("f", DType::F32, &shape, &[2, 40], &fb).dim_names(&["r", "c"]))
        .unwrap();
    w.dataset(DatasetSpec::new("d", DType::F64, &shape, &[4, 8], &db).dim_names(&["r", "c"]))
        .unwrap();
    w.dataset(
        DatasetSpec::new("p", DType::I16, &shape, &[3, 16], &pb)
            .dim_names(&["r", "c"])
            .attr("scale_factor", "-0.0")
            .attr("add_offset", "-0.0"),
    )
    .unwrap();
    w.write_path(&path).unwrap();
    let p = path.display();
    let (on, off) = (ctx(), no_pushdown().await);
    let neg = (-0.0f64).to_bits();
    let pos = 0.0f64.to_bits();
    for ds in ["f", "d", "p"] {
        let sql = format!("SELECT min(v), max(v) FROM tet('{p}', '{ds}')");
        assert!(
            plan_text(&on, &sql).await.unwrap().contains("TetAggregateExec"),
            "{sql}"
        );
        let got = float_bits(&on, &sql).await;
        assert_eq!(got, float_bits(&off, &sql).await, "{sql}");
        assert_eq!(got, vec![vec![Some(neg), Some(pos)]], "{sql}");
        // Grouped: DataFusion's grouped min/max keep the first of equal values, so the
        // oracle is the order itself (every row and column of `f` and `d` holds both zeros).
        if ds == "p" {
            continue;
        }
        for key in ["r", "c"] {
            let sql = format!("SELECT {key}, min(v), max(v) FROM tet('{p}', '{ds}') GROUP BY {key}");
            for row in float_bits(&on, &sql).await {
                assert_eq!(row[1..], [Some(neg), Some(pos)], "{sql}");
            }
        }
    }
}

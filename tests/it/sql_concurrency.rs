//! Eight queries at once over one file from one SessionContext equal the same queries run
//! one by one.

use crate::common::{Rng, ctx, rows, small_values, sorted, tempdir};
use datafusion_tet::format::{ChunkCodecs, DType, DatasetSpec, TetWriter};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_queries_match_sequential() {
    let dir = tempdir();
    let path = dir.path().join("c.tet");
    let mut rng = Rng(5);
    let data = small_values(&mut rng, DType::F64, 24 * 30 * 40);
    let mut w = TetWriter::new();
    w.dataset(
        DatasetSpec::new("x", DType::F64, &[24, 30, 40], &[5, 7, 40], &data)
            .codecs(ChunkCodecs::Zstd(1))
            .dim_names(&["t", "y", "x"]),
    )
    .unwrap();
    w.write_path(&path).unwrap();
    let p = path.display();
    let queries: Vec<String> = vec![
        format!("SELECT * FROM tet('{p}')"),
        format!("SELECT t, y, x, v FROM tet('{p}') WHERE t = 3"),
        format!("SELECT y, round(avg(v), 9) FROM tet('{p}') GROUP BY y"),
        format!("SELECT t, sum(v), count(*) FROM tet('{p}') WHERE x BETWEEN 5 AND 9 GROUP BY t"),
        format!("SELECT min(v), max(v) FROM tet('{p}') WHERE y IN (1, 2, 29)"),
        format!("SELECT x, round(stddev(v), 9) FROM tet('{p}') WHERE t < 10 GROUP BY x"),
        format!("SELECT count(*) FROM tet('{p}') WHERE v > 10"),
        format!("SELECT t, y, max(v) FROM tet('{p}') WHERE x = 7 GROUP BY t, y"),
    ];
    let ctx = ctx();
    let mut sequential = Vec::new();
    for q in &queries {
        sequential.push(sorted(rows(&ctx, q).await));
    }
    let handles: Vec<_> = queries
        .iter()
        .cloned()
        .map(|q| {
            let ctx = ctx.clone();
            tokio::spawn(async move { sorted(rows(&ctx, &q).await) })
        })
        .collect();
    for (h, want) in handles.into_iter().zip(sequential) {
        assert_eq!(h.await.unwrap(), want);
    }
}

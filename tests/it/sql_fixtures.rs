//! The upstream fixtures through SQL (skipped with a notice when absent).

use crate::common::{Val, ctx, rows, rows_and_scan_metrics, upstream_fixtures};

#[tokio::test(flavor = "multi_thread")]
async fn documented_answers_via_sql() {
    let Some(dir) = upstream_fixtures() else { return };
    let p = |n: &str| dir.join(n).display().to_string();
    let ctx = ctx();
    let got = rows(
        &ctx,
        &format!(
            "SELECT col, sum(v) FROM tet('{}') GROUP BY col ORDER BY col",
            p("group_by_labels.tet")
        ),
    )
    .await;
    assert_eq!(
        got,
        vec![
            vec![Val::Str("east".into()), Val::Float(12.0)],
            vec![Val::Str("west".into()), Val::Float(9.0)]
        ]
    );

    let (got, m) = rows_and_scan_metrics(
        &ctx,
        &format!("SELECT sum(v) FROM tet('{}') WHERE v > 5", p("embedded_zone.tet")),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Float(21.0)]]);
    assert_eq!((m["chunks_read"], m["chunks_pruned_by_zone"]), (1, 1), "{m:?}");

    let got = rows(
        &ctx,
        &format!("SELECT avg(v), count(*) FROM tet('{}', 'temperature')", p("sample.tet")),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Float(3.5), Val::Int(6)]]);
    let got = rows(
        &ctx,
        &format!(
            "SELECT avg(v), count(*) FROM tet('{}') WHERE dim_0 = 0 AND dim_1 IN (0, 2)",
            p("sample.tet")
        ),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Float(2.0), Val::Int(2)]]);
    for f in ["multichunk_u8.tet", "multichunk_u32.tet", "multichunk_f16.tet"] {
        let got = rows(
            &ctx,
            &format!(
                "SELECT sum(CAST(v AS DOUBLE)), avg(CAST(v AS DOUBLE)), var_pop(CAST(v AS DOUBLE)) FROM tet('{}')",
                p(f)
            ),
        )
        .await;
        assert_eq!(got[0][0], Val::Float(21.0), "{f}");
        assert_eq!(got[0][1], Val::Float(3.5), "{f}");
        assert!((got[0][2].as_f64() - 2.9166666666666665).abs() < 1e-12, "{f}");
    }
    let got = rows(
        &ctx,
        &format!("SELECT count(*), count(DISTINCT dim_0) FROM tet('{}')", p("large.tet")),
    )
    .await;
    assert_eq!(got, vec![vec![Val::Int(34 * 64), Val::Int(34)]]);
    let got = rows(
        &ctx,
        &format!(
            "SELECT row, col, v FROM tet('{}', 'b') WHERE row = 'r1' AND col = 'c2'",
            p("align_pair.tet")
        ),
    )
    .await;
    assert_eq!(got.len(), 1);
    let e = ctx
        .sql(&format!("SELECT * FROM tet('{}')", p("align_pair.tet")))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("a, b"), "{e}");
    let e = ctx
        .sql(&format!("SELECT * FROM tet('{}', 'nope')", p("align_pair.tet")))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no dataset named \"nope\"") && e.contains("a, b"), "{e}");
    let got = rows(
        &ctx,
        &format!(
            "SELECT name, chunk_count, attrs FROM tet_datasets('{}')",
            p("recording.tet")
        ),
    )
    .await;
    assert_eq!(got[0][0], Val::Str("frames".into()));
    assert!(matches!(&got[0][2], Val::Str(s) if s.contains("frame_rate")));
    let got = rows(
        &ctx,
        &format!(
            "SELECT zone_min, zone_max FROM tet_chunks('{}') ORDER BY payload_offset",
            p("embedded_zone.tet")
        ),
    )
    .await;
    assert_eq!(
        got,
        vec![
            vec![Val::Float(1.0), Val::Float(2.0)],
            vec![Val::Float(10.0), Val::Float(11.0)]
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_fixtures_fail_cleanly_via_sql() {
    let Some(dir) = upstream_fixtures() else { return };
    let ctx = ctx();
    let mut names = vec!["plan.tet".to_string()];
    for e in std::fs::read_dir(dir.join("reject")).unwrap() {
        names.push(format!("reject/{}", e.unwrap().file_name().to_string_lossy()));
    }
    for n in names {
        let path = dir.join(&n).display().to_string();
        let r = match ctx.sql(&format!("SELECT sum(v) FROM tet('{path}')")).await {
            Err(e) => Err(e),
            Ok(df) => df.collect().await.map(|_| ()),
        };
        let e = r.expect_err(&n).to_string();
        assert!(e.contains(&path), "{n}: message does not name the file: {e}");
    }
}

//! The layers point one way: format ← io ← plan ← exec ← sql ← ballista / bin. Every
//! `crate::` path in the library's code (comments aside) names a layer at or below the
//! file's own; `format` uses neither DataFusion nor Arrow.

use std::path::{Path, PathBuf};

const LAYERS: [&str; 6] = ["format", "io", "plan", "exec", "sql", "ballista"];

/// The layer of a source file: its top-level module (`lib.rs` belongs with `sql`, whose
/// registrations it installs).
fn layer_of(file: &Path, src: &Path) -> usize {
    let rel = file.strip_prefix(src).unwrap();
    let top = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let top = top.trim_end_matches(".rs");
    match top {
        "lib" => 4,
        "bin" => LAYERS.len(),
        m => LAYERS
            .iter()
            .position(|l| *l == m)
            .unwrap_or_else(|| panic!("{}: a module outside the layers", rel.display())),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The layer a `crate::NAME` path refers to (items of `lib.rs` count as `sql`).
fn target_layer(name: &str) -> usize {
    LAYERS.iter().position(|l| *l == name).unwrap_or(4)
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 20,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut wrong = Vec::new();
    for f in &files {
        let own = layer_of(f, &src);
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let code = code.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                if at > 0 && code[..at].ends_with('$') {
                    continue; // `$crate::` in a macro refers to the crate root
                }
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if target_layer(&name) > own {
                    wrong.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
            if own == 0
                && ["datafusion::", "datafusion_", "arrow::", "arrow_"]
                    .iter()
                    .any(|d| code.contains(d))
            {
                wrong.push(format!("{}:{}: format uses {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "imports of a layer above:\n{}", wrong.join("\n"));
}

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

/// The rooms of `exec`, bottom first: a file may import its own room and those before it.
/// `exec/mod.rs` is the layer's door (it declares and re-exports the rooms) and is not
/// ranked.
const EXEC_ROOMS: [&[&str]; 7] = [
    &["kernel"],
    &["metrics"],
    &["feed"],
    &["tile"],
    &["program"],
    &["walk"],
    &["scan", "aggregate"],
];

/// The room of a file under `src/exec` (`None` for the door, `exec/mod.rs`).
fn exec_room(file: &Path, src: &Path) -> Option<usize> {
    let rel = file.strip_prefix(src.join("exec")).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    let room = first.trim_end_matches(".rs");
    if room == "mod" {
        return None;
    }
    Some(
        EXEC_ROOMS
            .iter()
            .position(|r| r.contains(&room))
            .unwrap_or_else(|| panic!("{}: a file of exec outside its rooms", file.display())),
    )
}

/// The source file of the module at `dir/segments…` (its `NAME.rs` or `NAME/mod.rs`), as
/// far as the segments name modules: `src/a/b.rs` for `a::b::Item`, `src/a/mod.rs` for
/// `a::Item`.
fn module_file(dir: &Path, segments: &[String]) -> Option<PathBuf> {
    let mut at = dir.to_path_buf();
    let mut file = None;
    for s in segments {
        let (as_file, as_dir) = (at.join(format!("{s}.rs")), at.join(s).join("mod.rs"));
        if as_file.is_file() {
            file = Some(as_file);
            break; // a file has no submodules in this crate
        } else if as_dir.is_file() {
            file = Some(as_dir);
            at = at.join(s);
        } else {
            break;
        }
    }
    file
}

/// The module files each `super::` and `crate::` path in `text` (a file at `file`) names,
/// with the line each is on; `mod NAME;` declarations and a `mod.rs`'s `pub use` of its
/// own modules (the door re-exporting its rooms) are not imports.
fn imports(file: &Path, src: &Path, text: &str) -> Vec<(usize, PathBuf)> {
    let is_mod = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs");
    // The directory whose modules `self::` names: a mod.rs's own, else its file's.
    let own_dir = file.parent().unwrap().to_path_buf();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.trim_start_matches("pub(crate) ").starts_with("mod tests") {
            break; // a file's unit tests come last; their `super::` is the file itself
        }
        if code.starts_with("//") || code.starts_with("mod ") || code.starts_with("pub mod ") {
            continue;
        }
        if is_mod && (code.starts_with("pub use ") || code.starts_with("pub(crate) use ")) {
            continue;
        }
        let code = code.split("//").next().unwrap_or("");
        for key in ["crate::", "super::"] {
            for (at, _) in code.match_indices(key) {
                let before = &code[..at];
                if before.ends_with('$') || before.ends_with("super::") {
                    continue; // `$crate::`; a second `super::` of a chain
                }
                let rest = &code[at..];
                let mut dir = own_dir.clone();
                let mut tail = rest;
                if key == "crate::" {
                    dir = src.to_path_buf();
                    tail = &rest[7..];
                } else {
                    // `super::` from `a/b.rs` names `a` (its files); from `a/b/mod.rs`, `a`.
                    if is_mod {
                        dir = dir.parent().unwrap().to_path_buf();
                    }
                    while let Some(t) = tail.strip_prefix("super::") {
                        tail = t;
                        if tail.starts_with("super::") {
                            dir = dir.parent().unwrap().to_path_buf();
                        }
                    }
                }
                let segments: Vec<String> = tail
                    .split("::")
                    .map(|s| {
                        s.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect::<String>()
                    })
                    .take_while(|s| !s.is_empty())
                    .collect();
                let target = module_file(&dir, &segments).unwrap_or_else(|| {
                    // An item of the module itself (`super::Item`).
                    let m = dir.join("mod.rs");
                    if m.is_file() { m } else { src.join("lib.rs") }
                });
                if target != file {
                    out.push((i + 1, target));
                }
            }
        }
    }
    out
}

/// A cycle in `edges` (file → the files it imports), as the files along it.
fn find_cycle(edges: &std::collections::BTreeMap<PathBuf, Vec<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        f: &PathBuf,
        edges: &std::collections::BTreeMap<PathBuf, Vec<PathBuf>>,
        state: &mut std::collections::BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        match state.get(f) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| s == f).unwrap();
                let mut cycle = stack[from..].to_vec();
                cycle.push(f.clone());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(f.clone(), 1);
        stack.push(f.clone());
        for g in edges.get(f).into_iter().flatten() {
            if let Some(c) = visit(g, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(f.clone(), 2);
        None
    }
    let mut state = std::collections::BTreeMap::new();
    for f in edges.keys() {
        if let Some(c) = visit(f, edges, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_file_imports_a_later_room_of_exec_and_no_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges = std::collections::BTreeMap::new();
    let mut wrong = Vec::new();
    let mut exec_edges = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let targets = imports(f, &src, &text);
        if let Some(own) = exec_room(f, &src) {
            for (line, t) in &targets {
                if let Some(theirs) = exec_room(t, &src) {
                    exec_edges += 1;
                    if theirs > own {
                        wrong.push(format!(
                            "{}:{line}: imports {} (room {theirs} after its own, {own})",
                            f.display(),
                            t.display()
                        ));
                    }
                }
            }
        }
        let mut to: Vec<PathBuf> = targets.into_iter().map(|(_, t)| t).collect();
        to.sort();
        to.dedup();
        edges.insert(f.clone(), to);
    }
    assert!(exec_edges > 50, "found only {exec_edges} imports between files of exec");
    assert!(
        wrong.is_empty(),
        "imports of a later room of exec:\n{}",
        wrong.join("\n")
    );
    if let Some(cycle) = find_cycle(&edges) {
        let names: Vec<String> = cycle
            .iter()
            .map(|p| p.strip_prefix(&src).unwrap().display().to_string())
            .collect();
        panic!("files import each other in a circle: {}", names.join(" → "));
    }
}

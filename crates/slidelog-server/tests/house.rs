//! The house rules of `crates/*/src` (the test kit aside), kept by a test:
//! no function over 60 lines, no two files of a crate importing each other
//! (directly or round a circle), and no issue numbers or contract
//! citations in the code, docs and scripts (docs/design.md sections are
//! cited instead).
//!
//! The scan is textual (no parser): strings, character literals and
//! comments are blanked before braces are counted, `#[cfg(test)]` modules
//! at the end of a file are left out, and an import is a `use crate::…` or
//! `use super::…` path or a `crate::…` path in code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LONGEST: usize = 60;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate's `src` but the test kit's, with its files.
fn crates() -> Vec<(PathBuf, Vec<PathBuf>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() && !entry.file_name().to_string_lossy().contains("testkit") {
            let mut files = Vec::new();
            walk(&src, &mut files);
            files.retain(|p| p.extension().is_some_and(|e| e == "rs"));
            files.sort();
            out.push((src, files));
        }
    }
    out
}

/// The code of `text` before its `#[cfg(test)]` module, with comments,
/// strings and character literals blanked (their lines kept).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    let (mut out, mut chars) = (String::new(), text.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push('"');
            }
            '\'' if matches!(chars.clone().nth(1), Some('\'')) => {
                chars.next();
                chars.next();
                out.push_str("' '");
            }
            '\'' if chars.peek() == Some(&'\\') => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                }
                out.push_str("' '");
            }
            c => out.push(c),
        }
    }
    out
}

/// The functions of `code` longer than [`LONGEST`] lines: (name, lines).
fn long_functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(name) = fn_name(lines[i]) else {
            i += 1;
            continue;
        };
        let (mut depth, mut started, mut j) = (0i32, false, i);
        'body: while j < lines.len() {
            for c in lines[j].chars() {
                match c {
                    '{' => (depth, started) = (depth + 1, true),
                    '}' => depth -= 1,
                    ';' if !started && depth == 0 => break 'body,
                    _ => {}
                }
                if started && depth == 0 {
                    break 'body;
                }
            }
            j += 1;
        }
        if started && j - i + 1 > LONGEST {
            found.push((name, j - i + 1));
        }
        i = if started { j + 1 } else { i + 1 };
    }
    found
}

/// The name of the function a line starts, if it does.
fn fn_name(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let allowed = [
        "pub",
        "pub(crate)",
        "pub(super)",
        "async",
        "const",
        "unsafe",
        "extern",
        "\"C\"",
    ];
    if !words[..at].iter().all(|w| allowed.contains(w)) {
        return None;
    }
    let name = words.get(at + 1)?;
    Some(name.split(['(', '<']).next().unwrap_or(name).to_owned())
}

#[test]
fn no_function_is_over_60_lines() {
    let mut long = Vec::new();
    for (_, files) in crates() {
        for file in files {
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            for (name, lines) in long_functions(&code) {
                long.push(format!("{} {name}: {lines} lines", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST} lines:\n{}",
        long.join("\n")
    );
}

/// The module path of `file` in its crate (`a/b.rs` and `a/b/mod.rs` are
/// `["a", "b"]`; `lib.rs` and `main.rs` are the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The `crate::…` and `super::…` paths `code` imports or names, as module
/// paths from the crate's root (`module` is the file's own).
fn imported_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    for (at, _) in flat
        .match_indices("crate::")
        .chain(flat.match_indices("super::"))
    {
        let before = flat[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let path: String = flat[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let mut segments: Vec<String> = path.split("::").map(str::to_owned).collect();
        let mut base: Vec<String> = Vec::new();
        if segments[0] == "super" {
            base = module.to_vec();
            while segments.first().is_some_and(|s| s == "super") {
                segments.remove(0);
                base.pop();
            }
        } else {
            segments.remove(0);
        }
        base.extend(segments.into_iter().filter(|s| !s.is_empty()));
        out.push(base);
    }
    out
}

/// The modules of each crate that import one another round a circle.
fn circles(src: &Path, files: &[PathBuf]) -> Vec<BTreeSet<String>> {
    let modules: BTreeMap<Vec<String>, &PathBuf> =
        files.iter().map(|f| (module_of(src, f), f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, file) in &modules {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in imported_paths(&code, module) {
            let target = (1..=path.len())
                .rev()
                .map(|k| path[..k].to_vec())
                .find(|p| modules.contains_key(p));
            if let Some(target) = target.filter(|t| t != module) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    let reach = |from: &Vec<String>| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<_, _> = modules.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (m, seen) in &reaches {
        if !seen.contains(m) {
            continue;
        }
        let circle: BTreeSet<String> = seen
            .iter()
            .filter(|o| reaches[*o].contains(m))
            .map(|o| o.join("/"))
            .collect();
        if !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut found = Vec::new();
    for (src, files) in crates() {
        for circle in circles(&src, &files) {
            found.push(format!("{}: {circle:?}", src.display()));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other:\n{}",
        found.join("\n")
    );
}

/// Every file a reader of the repository reads as text: the crates' code
/// (sources, tests, benches, examples, the test kit's too), the docs, the
/// scripts and the deploy files.
fn readable_files() -> Vec<PathBuf> {
    let root = crates_dir().join("..");
    let mut all = Vec::new();
    for dir in ["crates", "docs", "scripts", "deploy"] {
        walk(&root.join(dir), &mut all);
    }
    all.extend(["README.md", "BENCHMARKS.md"].map(|f| root.join(f)));
    let readable = ["rs", "md", "sh", "lua", "yaml", "yml", "toml"];
    all.retain(|p| {
        p.extension()
            .is_some_and(|e| readable.iter().any(|r| e == *r))
    });
    all
}

/// Every file under `dir`, build folders left out.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && entry.file_name() != "target" {
            walk(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

/// Whether `line` (lower case) cites an issue by its number (after
/// "issue " or "issues ", a `#` allowed) or the contract file outside the
/// repository (spelt in pieces here, so this file does not cite it).
fn cites_outside(line: &str) -> bool {
    let numbered = |word: &str| {
        line.match_indices(word).any(|(at, w)| {
            let rest = line[at + w.len()..].trim_start_matches('#');
            rest.starts_with(|c: char| c.is_ascii_digit())
        })
    };
    let contract = [concat!("spec", " §"), concat!("spec", ".md")];
    numbered("issue ") || numbered("issues ") || contract.iter().any(|c| line.contains(c))
}

#[test]
fn sources_cite_the_design_not_issue_numbers() {
    let mut found = Vec::new();
    for file in readable_files() {
        let text = std::fs::read_to_string(&file).unwrap().to_lowercase();
        for (n, line) in text.lines().enumerate() {
            if cites_outside(line) {
                found.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite docs/design.md instead:\n{}",
        found.join("\n")
    );
}

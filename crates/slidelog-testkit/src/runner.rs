//! A small runner for test targets declared with `harness = false` whose
//! binary is also run as a worker process (exactness across processes).
//!
//! With libtest, a worker has to be a `#[test]` that returns at once in a
//! normal run, so it counts as a passing test that checked nothing. A
//! `harness = false` target owns `main`: it becomes a worker when its
//! environment says so and otherwise runs its cases with this runner, which
//! understands what `cargo test` passes on (name filters, `--exact`,
//! `--skip`, `--list`, and ignores the other flags).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;
use std::time::Instant;

/// One named case.
pub struct Case {
    name: String,
    run: Box<dyn FnOnce()>,
}

impl Case {
    /// A case called `name` that runs `run` (it fails by panicking).
    pub fn new(name: impl Into<String>, run: impl FnOnce() + 'static) -> Self {
        Self {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

/// Runs the cases that the command line selects, one after another (each
/// starts its own servers and worker processes), printing as libtest does.
/// Exit code 101 when one failed, as libtest.
pub fn run(cases: Vec<Case>) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let (mut exact, mut list) = (false, false);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--exact" => exact = true,
            "--list" => list = true,
            "--skip" => skips.extend(it.next().cloned()),
            // Flags that take a value as a separate argument.
            "--test-threads" | "--format" | "--color" | "-Z" | "--logfile" => {
                it.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter.to_owned()),
        }
    }
    let matches = |name: &str, pattern: &str| {
        if exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    let selected: Vec<Case> = cases
        .into_iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| matches(&c.name, f)))
        .filter(|c| !skips.iter().any(|s| matches(&c.name, s)))
        .collect();
    if list {
        for c in &selected {
            println!("{}: test", c.name);
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", selected.len());
    let started = Instant::now();
    let mut failed = Vec::new();
    let total = selected.len();
    for case in selected {
        let name = case.name;
        let outcome = catch_unwind(AssertUnwindSafe(case.run));
        println!(
            "test {name} ... {}",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if outcome.is_err() {
            failed.push(name);
        }
    }
    let result = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {result}. {} passed; {} failed; finished in {:.2}s\n",
        total - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        for name in &failed {
            println!("failed: {name}");
        }
        ExitCode::from(101)
    }
}

//! The README's shell examples run as written, through the page runner of
//! `common::pages` (a real `slidelog serve`, a real `redis-server` this
//! test starts, the JSON the README shows compared field by field).

mod common;

use common::pages;

/// Lines that are not run: (a substring that identifies the line, why).
const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo run --release -p slidelog-server -- serve",
        "builds the release binary; the test runs the same `slidelog serve` (debug build) below",
    ),
    (
        "./scripts/test.sh",
        "the test command, which runs this test",
    ),
    (
        "cargo install --path crates/slidelog-server --locked",
        "installs into ~/.cargo/bin; the test puts the built binary first on PATH instead",
    ),
];

#[test]
fn every_shell_example_of_the_readme_runs_as_written() {
    let ran = pages::run("README.md", NOT_RUN);
    assert!(ran.server.is_some(), "the README starts a server");
    assert!(ran.ran >= 7, "only {} README commands ran", ran.ran);
    // /v1/check, /v1/peek and /json show their output.
    assert!(ran.compared >= 3, "only {} outputs compared", ran.compared);
}

#[test]
fn the_readme_stays_short_and_opens_with_the_two_commands() {
    let text = pages::text("README.md");
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: at most 300, the rest in docs/guide/"
    );
    let run = text
        .find("cargo run --release -p slidelog-server -- serve")
        .unwrap();
    let test = text.find("./scripts/test.sh").unwrap();
    let first_prose = text.find("slidelog is exact").unwrap();
    assert!(
        run < test && test < first_prose,
        "the README opens with the run and test commands"
    );
}

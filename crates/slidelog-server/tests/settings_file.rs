//! `slidelog serve --settings FILE` and `--print-settings` on the built
//! binary: the file sets any flag by its long name, the environment and the
//! command line override it, bad files are refused with file:line(:col)
//! naming the key or the flag's own error, files that are no regular file
//! are refused at once, and sizes and durations take units everywhere.

mod common;

use common::{child, raw_http, setting, shows};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_slidelog");

/// Runs `slidelog serve ARGS` with extra environment `envs`; it must exit
/// within 20 s (a settings error or --print-settings).
fn serve_exits(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .env_remove("SLIDELOG_MEMORY_LIMIT")
        .env_remove("SLIDELOG_SETTINGS")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child::exit_status(&mut child, Duration::from_secs(20), "serve to exit");
    let mut out = child.wait_with_output().unwrap();
    out.status = status;
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The settings file `body` in a fresh folder (kept alive by the guard).
fn settings(body: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.toml");
    std::fs::write(&path, body).unwrap();
    (dir, path.to_str().unwrap().to_owned())
}

#[test]
fn the_file_sets_flags_and_env_and_flags_override_it() {
    let (_dir, path) = settings(
        "# a comment\nmemory-limit = \"512MiB\"\non-store-error = \"fail-closed\"\n\
         no-rejection-cache = true\nmax-cost = 500\nshutdown-grace = \"3s\"\n",
    );
    let out = serve_exits(&["--settings", &path, "--print-settings"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    shows(
        &text(&out.stdout),
        &[
            "memory-limit = \"512MiB\"  # settings file",
            "on-store-error = \"fail-closed\"  # settings file",
            "no-rejection-cache = true  # settings file",
            "max-cost = 500  # settings file",
            "http = \"127.0.0.1:8080\"  # default",
        ],
    );
    // The environment beats the file; a flag beats both.
    let env = [("SLIDELOG_MEMORY_LIMIT", "1GB")];
    let out = serve_exits(&["--settings", &path, "--print-settings"], &env);
    shows(
        &text(&out.stdout),
        &["memory-limit = \"1GB\"  # env SLIDELOG_MEMORY_LIMIT"],
    );
    let flags = ["--memory-limit", "64KiB", "--max-cost", "7"];
    let args = [&["--settings", &path, "--print-settings"], flags.as_slice()].concat();
    shows(
        &text(&serve_exits(&args, &env).stdout),
        &["memory-limit = \"64KiB\"  # flag", "max-cost = 7  # flag"],
    );
    // The settings file may come from the environment too.
    let out = serve_exits(&["--print-settings"], &[("SLIDELOG_SETTINGS", &path)]);
    shows(
        &text(&out.stdout),
        &["shutdown-grace = \"3s\"  # settings file"],
    );
}

#[test]
fn a_flag_overrides_a_setting_it_conflicts_with() {
    let (_dir, path) = settings("no-grpc = true\n");
    let printed = text(&serve_exits(&["--settings", &path, "--print-settings"], &[]).stdout);
    assert_eq!(
        setting(&printed, "no-grpc"),
        "no-grpc = true  # settings file"
    );
    let args = [
        "--settings",
        &path,
        "--print-settings",
        "--grpc",
        "127.0.0.1:0",
    ];
    let printed = text(&serve_exits(&args, &[]).stdout);
    assert_eq!(setting(&printed, "no-grpc"), "no-grpc = false  # default");
    assert_eq!(setting(&printed, "grpc"), "grpc = \"127.0.0.1:0\"  # flag");
}

#[test]
fn a_flag_may_require_a_setting_of_the_file() {
    // --memory-snapshot-interval requires --memory-snapshot: the file's counts.
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("memory.snapshot");
    let (_settings_dir, path) = settings(&format!(
        "memory-snapshot = {:?}\n",
        snapshot.to_str().unwrap()
    ));
    let args = [
        "--settings",
        &path,
        "--print-settings",
        "--memory-snapshot-interval",
        "5s",
    ];
    let out = serve_exits(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    shows(
        &text(&out.stdout),
        &[
            &format!(
                "memory-snapshot = {:?}  # settings file",
                snapshot.to_str().unwrap()
            ),
            "memory-snapshot-interval = \"5s\"  # flag",
        ],
    );
    // Without the setting, clap still refuses the flag alone.
    let (_other, empty) = settings("# nothing\n");
    let args = [
        "--settings",
        &empty,
        "--print-settings",
        "--memory-snapshot-interval",
        "5s",
    ];
    let out = serve_exits(&args, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--memory-snapshot <"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn secrets_never_print() {
    let (_dir, path) = settings(
        "store = \"redis://app:s3cret-pw@127.0.0.1:1/0?sentinel_password=s3cret-sp\"\n\
         admin-token = \"s3cret-token\"\n",
    );
    let out = serve_exits(&["--settings", &path, "--print-settings"], &[]);
    let printed = text(&out.stdout);
    assert!(!printed.contains("s3cret"), "{printed}");
    assert_eq!(
        setting(&printed, "store"),
        "store = \"redis://app:***@127.0.0.1:1/0?sentinel_password=***\"  # settings file"
    );
    assert_eq!(
        setting(&printed, "admin-token"),
        "admin-token = \"***\"  # settings file"
    );
    // A token given as a flag is masked the same way.
    let printed =
        text(&serve_exits(&["--print-settings", "--admin-token", "s3cret-flag"], &[]).stdout);
    assert!(!printed.contains("s3cret"), "{printed}");
}

/// Every flag `--print-settings` lists (the flags others add included)
/// reads back from a settings file to the same effective settings.
#[test]
fn printed_settings_read_back_the_same() {
    let args = [
        "--print-settings",
        "--http",
        "0.0.0.0:9000",
        "--memory-limit",
        "2GiB",
        "--no-rejection-cache",
        "--inspect-every",
        "1m",
        "--max-connections",
        "100",
        "--max-cost",
        "500",
        "--on-store-error",
        "fail-closed",
        "--shutdown-grace",
        "3s",
        "--receipt-ttl",
        "10m",
        "--trust-client-time",
    ];
    // Ten flags: the file printed from them reproduces the run.
    assert_eq!(args.iter().filter(|a| a.starts_with("--")).count(), 11);
    let first = text(&serve_exits(&args, &[]).stdout);
    let (_dir, path) = settings(&first);
    let out = serve_exits(&["--settings", &path, "--print-settings"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let strip = |printed: &str| -> Vec<String> {
        let lines = printed.lines().filter(|l| !l.starts_with('#'));
        lines
            .map(|l| l.split("  # ").next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(strip(&first), strip(&text(&out.stdout)));
    assert!(
        first.lines().filter(|l| !l.starts_with('#')).count() > 30,
        "{first}"
    );
}

/// `serve --settings FILE` with `body` in FILE: it must exit 2 saying
/// `FILE:` followed by `said` (`{path}` in `said` stands for FILE).
fn refused(body: &str, said: &[&str]) {
    let (_dir, path) = settings(body);
    let out = serve_exits(&["--settings", &path], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    for part in said {
        let part = part.replace("{path}", &path);
        assert!(stderr.contains(&part), "{part} not in {stderr}");
    }
}

#[test]
fn bad_files_name_the_file_the_line_and_the_key() {
    let body = "max-cost = 5\n\n  memroy-limit = \"1GB\"\n";
    refused(body, &["{path}:3:3: unknown setting 'memroy-limit'"]);
    refused(
        "max-cost = 5\nmemory-limit = \"12XB\"\n",
        &[
            "{path}:2: memory-limit: invalid value '12XB' for '--memory-limit",
            "unknown size unit 'XB'",
        ],
    );
    refused(
        "shutdown-grace = \"10\"\n",
        &[
            "{path}:1: shutdown-grace: invalid value '10' for '--shutdown-grace",
            "needs a unit",
        ],
    );
    refused(
        "on-store-error = \"fail-sideways\"\n",
        &["{path}:1: on-store-error: invalid value 'fail-sideways'"],
    );
    refused(
        "no-grpc = \"yes\"\n",
        &["{path}:1: no-grpc: a switch: give true or false"],
    );
    refused(
        "http = [\"a\", \"b\"]\n",
        &["{path}:1: http: takes one value, not an array"],
    );
    refused(
        "[serve]\nhttp = \"x\"\n",
        &["{path}:1:2: unknown setting 'serve'"],
    );
    refused("http = \n", &["{path}:1:", "not TOML"]);
}

#[test]
fn a_pipe_a_device_or_a_huge_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    for (path, why) in [
        (fifo.to_str().unwrap(), "not a regular file (a named pipe)"),
        ("/dev/zero", "not a regular file (a device)"),
        ("/", "not a regular file (a directory)"),
    ] {
        let started = Instant::now();
        let out = serve_exits(&["--settings", path], &[]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("--settings {path}: {why}")),
            "{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path}: {:?}",
            started.elapsed()
        );
    }
    let huge = dir.path().join("huge.toml");
    std::fs::write(&huge, "# padding\n".repeat(200_000)).unwrap();
    let stderr = text(&serve_exits(&["--settings", huge.to_str().unwrap()], &[]).stderr);
    assert!(
        stderr.contains("larger than the 1048576-byte bound"),
        "{stderr}"
    );
}

#[test]
fn a_service_started_from_the_file_alone_uses_it() {
    let (_dir, path) = settings(
        "http = \"127.0.0.1:0\"\nno-grpc = true\nmax-body-bytes = \"1KiB\"\nshutdown-grace = \"1s\"\n",
    );
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--settings", &path])
        .env_remove("SLIDELOG_SETTINGS");
    let service = child::spawn(command);
    let (status, body) = raw_http::check(&service.addr, r#"{"key":"k","max":2,"window_ms":60000}"#);
    assert_eq!(status, 200, "{body}");
    // 1KiB from the file: a 2 KiB body is over it.
    let big = format!(
        r#"{{"key":"{}","max":2,"window_ms":60000}}"#,
        "x".repeat(2_000)
    );
    let (status, body) = raw_http::check(&service.addr, &big);
    assert_eq!(status, 413, "{body}");
}

#[test]
fn sizes_and_durations_take_units_and_name_the_flag_when_wrong() {
    let args = [
        "--print-settings",
        "--max-body-bytes",
        "64KiB",
        "--shutdown-grace",
        "1h30m",
    ];
    let out = serve_exits(&args, &[("SLIDELOG_MEMORY_LIMIT", "2GB")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (args, flag, why) in [
        (
            ["--max-body-bytes", "1.5MiB"],
            "--max-body-bytes",
            "unknown size unit '.5MiB'",
        ),
        (
            ["--memory-limit", "lots"],
            "--memory-limit",
            "must start with a whole number",
        ),
        (
            ["--shutdown-grace", "1M"],
            "--shutdown-grace",
            "ambiguous: write m or min",
        ),
        (
            ["--store-timeout", "100"],
            "--store-timeout",
            "needs a unit",
        ),
        (
            ["--memory-snapshot-interval", "5x"],
            "--memory-snapshot-interval",
            "unknown duration unit 'x'",
        ),
    ] {
        let out = serve_exits(&args, &[]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(&format!("for '{flag} <")), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
    }
    let out = serve_exits(&["--print-settings"], &[("SLIDELOG_MEMORY_LIMIT", "9ZB")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown size unit 'ZB'"),
        "{}",
        text(&out.stderr)
    );
}

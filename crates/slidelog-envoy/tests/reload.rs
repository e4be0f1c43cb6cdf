//! Reloading the config: a file change is picked up by polling, SIGHUP
//! reloads at once, and a broken edit keeps the last good config and says why.

use slidelog_envoy::ConfigHandle;
use std::path::Path;
use std::time::{Duration, Instant};

fn config(limit: u32) -> String {
    format!(
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n"
    )
}

fn max_of(h: &ConfigHandle) -> u64 {
    h.get()
        .find("api", &[("user", "u")])
        .unwrap()
        .limit()
        .unwrap()
        .max()
}

/// Replaces the file the way editors and ConfigMaps do: write then rename.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn wait_until(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached in 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn file_changes_reload_and_broken_edits_keep_the_last_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, config(5)).unwrap();
    let handle = ConfigHandle::load(&path).unwrap();
    assert_eq!(max_of(&handle), 5);
    let watcher = handle.spawn_watcher(Duration::from_millis(50));

    replace(&path, &config(7));
    wait_until(|| max_of(&handle) == 7).await;
    // At least 1: the SIGHUP of `sighup_reloads_at_once`, which runs in the
    // same process, reaches this watcher too and may reload once more.
    assert!(handle.reload_count() >= 1, "{}", handle.reload_count());
    assert!(handle.last_error().is_none());

    replace(
        &path,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    );
    wait_until(|| handle.last_error().is_some()).await;
    let why = handle.last_error().unwrap();
    assert!(
        why.contains("limits.yaml:4") && why.contains("fortnight"),
        "{why}"
    );
    assert_eq!(max_of(&handle), 7, "the last good config stays");

    replace(&path, &config(9));
    wait_until(|| max_of(&handle) == 9).await;
    assert!(handle.last_error().is_none());
    watcher.abort();
}

#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, config(5)).unwrap();
    let handle = ConfigHandle::load(&path).unwrap();
    // The readiness signal: the watcher installs its SIGHUP handler, then
    // polls once at once. A change made before it starts is reloaded by that
    // first poll, so seeing it reloaded means the handler is in place (and
    // the next poll is an hour away: only SIGHUP can reload after it).
    replace(&path, &config(7));
    let watcher = handle.spawn_watcher(Duration::from_secs(3600));
    wait_until(|| max_of(&handle) == 7).await;
    assert_eq!(handle.reload_count(), 1);
    replace(&path, &config(11));
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_until(|| max_of(&handle) == 11).await;
    assert_eq!(
        handle.reload_count(),
        2,
        "one reload by poll, one by SIGHUP"
    );
    watcher.abort();
}

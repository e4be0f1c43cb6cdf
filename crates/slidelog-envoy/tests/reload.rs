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

/// A rule's metric names (`detailed_metric`) survive a reload: the names
/// given out stay, renamed from the new rule (its new limit applies to
/// them), and once the budget is used up a new value is counted under the
/// rule's configured path, before and after the reload alike.
#[test]
fn a_rules_metric_names_survive_reloads_with_the_new_limit() {
    use slidelog_envoy::config::rule::MAX_METRIC_KEYS_PER_RULE;
    let detailed = |limit: u32| {
        format!(
            "domain: d\ndescriptors:\n  - key: client\n    detailed_metric: true\n    rate_limit: {{unit: second, requests_per_unit: {limit}}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, detailed(5)).unwrap();
    let handle = ConfigHandle::load(&path).unwrap();
    let rule = |value: &str| handle.get().lookup("d", &[("client", value)]).unwrap();
    for i in 0..MAX_METRIC_KEYS_PER_RULE {
        assert_eq!(rule(&format!("c{i}")).path(), format!("d.client_c{i}"));
    }
    assert_eq!(rule("late").path(), "d.client", "the budget is used up");
    std::fs::write(&path, detailed(7)).unwrap();
    handle.reload().unwrap();
    let kept = rule("c0");
    assert_eq!(kept.path(), "d.client_c0");
    assert_eq!(kept.limit().unwrap().max(), 7, "renamed from the new rule");
    assert_eq!(
        rule("after").path(),
        "d.client",
        "no new name after a reload"
    );
    assert_eq!(rule("after").limit().unwrap().max(), 7);
}

//! Serve's `--inspect-every`: the key space scan schedule of the flags,
//! checked before the service starts, and its start.

use super::ServeArgs;
use crate::app::App;
use crate::inspect_task::{self, InspectSchedule};
use crate::shutdown::Shutdown;

/// Builds and checks the `--inspect-every` schedule, when one is asked for.
pub(super) fn from_flags(args: &ServeArgs) -> anyhow::Result<Option<InspectSchedule>> {
    let Some(every) = args.inspect_every else {
        return Ok(None);
    };
    if let Some(max) = args
        .inspect_max
        .filter(|m| !(1..=slidelog_core::MAX_MAX).contains(m))
    {
        anyhow::bail!("--inspect-max must be 1 ..= 10000000, got {max}");
    }
    // Without --inspect-max, the largest limit of --config (read once at
    // start): a key above twice the largest limit is above twice its own.
    let (max, max_source, key_limits) = match (args.inspect_max, &args.config) {
        (Some(max), _) => (Some(max), Some("--inspect-max".to_owned()), None),
        (None, Some(path)) => {
            match crate::inspect_limits::from_config(path, &args.store.key_prefix) {
                Ok(limits) => (
                    Some(limits.max),
                    Some(format!("config:{}", path.display())),
                    Some(limits.key_limits),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "--inspect-every: no limits from --config; sizes are not checked");
                    (None, None, None)
                }
            }
        }
        (None, None) => (None, None, None),
    };
    let schedule = InspectSchedule {
        store_url: args.store.store.clone(),
        options: slidelog_inspect::InspectOptions {
            pattern: args
                .inspect_pattern
                .clone()
                .unwrap_or_else(|| slidelog_inspect::prefix_pattern(&args.store.key_prefix)),
            max,
            max_source,
            key_limits,
            ..slidelog_inspect::InspectOptions::default()
        },
        every,
    };
    schedule.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(schedule))
}

/// Starts the scheduled scans until shutdown.
pub(super) fn spawn(app: App, schedule: InspectSchedule, shutdown: Shutdown) {
    tracing::info!(every = ?schedule.every, pattern = %schedule.options.pattern, "key space inspection scheduled");
    inspect_task::spawn(app, schedule, shutdown);
}

//! Serve's flag checks, run before anything is opened or bound: each names
//! the flag at fault and the range it takes.

use super::ServeArgs;
use std::time::Duration;

/// Checks every flag that clap's parsers cannot check alone.
pub(super) fn flags(args: &ServeArgs) -> anyhow::Result<()> {
    admin_and_body(args)?;
    memory_store(args)?;
    client_bounds(args)?;
    connections(args)?;
    args.failure_policy()?;
    if args.local_journal_cap == 0 {
        anyhow::bail!("--local-journal-cap must be at least 1, got 0");
    }
    if args.store.store_timeout.is_zero() {
        anyhow::bail!("--store-timeout must be at least 1ms, got 0");
    }
    Ok(())
}

/// Checks `--admin-token` and `--max-body-bytes`.
fn admin_and_body(args: &ServeArgs) -> anyhow::Result<()> {
    if args
        .admin_token
        .as_ref()
        .is_some_and(|t| t.expose().is_empty())
    {
        anyhow::bail!("--admin-token must not be empty (leave it unset for no token)");
    }
    if args.max_body_bytes < 64 {
        anyhow::bail!(
            "--max-body-bytes must be at least 64, got {}",
            args.max_body_bytes
        );
    }
    Ok(())
}

/// Checks the in-memory store's key cap and memory budget.
fn memory_store(args: &ServeArgs) -> anyhow::Result<()> {
    if args.memory_key_cap == 0 {
        anyhow::bail!("--memory-key-cap must be at least 1, got 0");
    }
    if !(1..=10_000_000).contains(&args.max_blocks) {
        anyhow::bail!(
            "--max-blocks must be between 1 and 10000000, got {}",
            args.max_blocks
        );
    }
    if args.memory_limit < 1 << 20 {
        anyhow::bail!(
            "--memory-limit must be at least 1048576 (1 MiB), got {}",
            args.memory_limit
        );
    }
    Ok(())
}

/// Checks the bounds on what a client may ask (docs/design.md §5) against
/// their absolute ranges.
fn client_bounds(args: &ServeArgs) -> anyhow::Result<()> {
    let absolute = slidelog::Bounds::ABSOLUTE;
    for (flag, value, top) in [
        ("--max-limit", args.max_limit, absolute.max_limit),
        ("--max-cost", args.max_cost, absolute.max_cost),
        (
            "--max-limits",
            args.max_limits as u64,
            absolute.max_limits as u64,
        ),
        (
            "--max-descriptors",
            args.max_descriptors as u64,
            absolute.max_descriptors as u64,
        ),
    ] {
        if !(1..=top).contains(&value) {
            anyhow::bail!("{flag} must be between 1 and {top}, got {value}");
        }
    }
    Ok(())
}

/// Checks the config poll interval and the connection limits and timeouts.
fn connections(args: &ServeArgs) -> anyhow::Result<()> {
    if args.config_poll_interval.is_zero() {
        anyhow::bail!("--config-poll-interval must be at least 1ms, got 0");
    }
    if args.max_connections == Some(0) {
        anyhow::bail!("--max-connections must be at least 1, got 0");
    }
    for (flag, value) in [
        ("--http-header-timeout", args.http_header_timeout),
        ("--http-idle-timeout", args.http_idle_timeout),
        ("--grpc-idle-timeout", args.grpc_idle_timeout),
        ("--grpc-keepalive-interval", args.grpc_keepalive_interval),
        ("--grpc-keepalive-timeout", args.grpc_keepalive_timeout),
    ] {
        if value < Duration::from_millis(100) {
            anyhow::bail!("{flag} must be at least 100ms, got {value:?}");
        }
    }
    if args.grpc_max_streams == 0 {
        anyhow::bail!("--grpc-max-streams must be at least 1, got 0");
    }
    Ok(())
}

//! `slidelog serve` (built in its own issue).

use std::process::ExitCode;

/// Arguments of `slidelog serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// Not built yet.
pub async fn run(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("slidelog serve is not built yet")
}

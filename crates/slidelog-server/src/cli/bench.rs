//! `slidelog bench` (built in its own issue).

use std::process::ExitCode;

/// Arguments of `slidelog bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Not built yet.
pub async fn run(_args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("slidelog bench is not built yet")
}

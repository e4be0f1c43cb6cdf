//! `slidelog inspect` (built in its own issue).

use std::process::ExitCode;

/// Arguments of `slidelog inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {}

/// Not built yet.
pub async fn run(_args: InspectArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("slidelog inspect is not built yet")
}

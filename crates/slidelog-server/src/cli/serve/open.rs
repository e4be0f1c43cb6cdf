//! Serve's store: open the store named by the flags (the memory store built
//! here, a Redis store after a preflight that refuses a misconfiguration)
//! and wrap it in the service state, [`App`].

use super::ServeArgs;
use crate::app::{App, AppConfig};
use crate::preflight::Preflight;
use anyhow::Context;
use slidelog::redact::mask_password;
use slidelog::url::{StoreUrl, open_store};
use std::sync::Arc;

/// Opens the store named by the flags and wraps it in the service state.
pub(super) async fn build_app(args: &ServeArgs) -> anyhow::Result<App> {
    let mut config = app_config(args)?;
    let mut options = args.store.options();
    options.memory_key_cap = args.memory_key_cap;
    options.memory_limit = args.memory_limit;
    options.max_controls = args.max_blocks;
    if StoreUrl::parse(&args.store.store)?.is_memory() {
        // Made as the library makes it from a URL, and kept by the app too:
        // its key count is exported, it is swept on a timer and snapshotted.
        let store = Arc::new(options.memory_store());
        let key = receipt_key(args)?.unwrap_or_else(slidelog::ReceiptKey::random);
        config.receipts = Some(Arc::new(with_receipt_ttl(key, args)?));
        return Ok(App::with_memory_store(store, config));
    }
    // A misconfiguration will not pass by itself: refuse to start on one.
    let timeout = args.store.store_timeout;
    let checked = crate::preflight::check(&args.store.store, &options, timeout).await;
    let preflight = checked.found;
    if let Preflight::Misconfigured(cause) = &preflight
        && !args.allow_store_misconfig
    {
        anyhow::bail!(
            "{cause}; the store refuses slidelog's configuration: fix --store (SLIDELOG_STORE) \
             or the server, or start anyway with --allow-store-misconfig"
        );
    }
    let store = match checked.store {
        // The preflight's store, connected and its engine settled: asking
        // the server again would only log the engine a second time.
        Some(store) => store,
        // Start even while Redis is down: /readyz says unready and the
        // failure policy answers until it comes up, as it would during any
        // later outage.
        None => {
            options.lazy_connect = true;
            open_store(&args.store.store, &options, timeout).await?
        }
    };
    let key = match receipt_key(args)? {
        Some(key) => key,
        None => slidelog::shared_receipt_key(store.as_ref(), timeout).await,
    };
    config.receipts = Some(Arc::new(with_receipt_ttl(key, args)?));
    let app = App::with_builder(store, config, |b| limiter_settings(b, args));
    report_preflight(args, &app, preflight);
    Ok(app)
}

/// The limiter's settings of the flags: time mode, local journal cap,
/// override cache, granularity floor, rejection cache.
fn limiter_settings(b: slidelog::LimiterBuilder, args: &ServeArgs) -> slidelog::LimiterBuilder {
    let b = b
        .time_mode(args.store.time_mode())
        .local_journal_cap(args.local_journal_cap)
        .override_cache(args.override_cache);
    let b = match args.min_granularity {
        Some(floor) => b.min_granularity(floor),
        None => b,
    };
    if args.no_rejection_cache {
        b.no_rejection_cache()
    } else {
        b
    }
}

/// Gathers the service settings of the flags.
fn app_config(args: &ServeArgs) -> anyhow::Result<AppConfig> {
    Ok(AppConfig {
        policy: args.failure_policy()?,
        store_timeout: args.store.store_timeout,
        admin_token: admin_token(args)?,
        receipts: None,
        trust_client_time: args.trust_client_time,
        bounds: slidelog::Bounds {
            max_limit: args.max_limit,
            max_cost: args.max_cost,
            max_limits: args.max_limits,
            max_descriptors: args.max_descriptors,
        },
        policies: policies(args)?,
        require_policy: args.require_policy,
        key_space: crate::browse::KeySpace::new(
            &args.store.store,
            &args.store.key_prefix,
            args.store
                .store_timeout
                .max(std::time::Duration::from_secs(1)),
        ),
    })
}

/// Loads --policies; the error names file:line:col.
fn policies(args: &ServeArgs) -> anyhow::Result<Option<Arc<crate::policies::PolicyHandle>>> {
    let Some(path) = &args.policies else {
        return Ok(None);
    };
    let handle = crate::policies::PolicyHandle::load(path).context("invalid --policies")?;
    tracing::info!(
        path = %path.display(),
        policies = handle.get().len(),
        require_policy = args.require_policy,
        "policies loaded (reloaded when the file changes)"
    );
    Ok(Some(handle))
}

/// Says what the preflight found about a store serve starts with anyway.
fn report_preflight(args: &ServeArgs, app: &App, preflight: Preflight) {
    match preflight {
        Preflight::Ready => {}
        Preflight::Unreachable(reason) => tracing::warn!(
            store = %mask_password(&args.store.store),
            error = %reason,
            "store not reachable at start; serving with the {} policy until it is",
            args.on_store_error
        ),
        // Logged at error level; /readyz answers 503 with the cause.
        Preflight::Misconfigured(cause) => app.limiter().note_misconfiguration(&cause),
    }
}

/// `key` with the validity of --receipt-ttl (1 ms to a day).
fn with_receipt_ttl(
    key: slidelog::ReceiptKey,
    args: &ServeArgs,
) -> anyhow::Result<slidelog::ReceiptKey> {
    let ttl = args.receipt_ttl.as_millis();
    let max = slidelog::MAX_RECEIPT_TTL_MS;
    u64::try_from(ttl)
        .ok()
        .and_then(|ms| key.with_ttl_ms(ms))
        .with_context(|| format!("--receipt-ttl must be from 1ms to {max}ms (a day), got {ttl}ms"))
}

/// Reads the receipt secret of --receipt-secret-file (trailing newline
/// ignored). The error names the file and the bound, never the contents.
fn receipt_key(args: &ServeArgs) -> anyhow::Result<Option<slidelog::ReceiptKey>> {
    let Some(path) = &args.receipt_secret_file else {
        return Ok(None);
    };
    let bytes = crate::flag_file::read(path, "--receipt-secret-file", 4096)?;
    let secret = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let secret = secret.strip_suffix(b"\r").unwrap_or(secret);
    let key = slidelog::ReceiptKey::from_secret(secret)
        .with_context(|| format!("--receipt-secret-file {}", path.display()))?;
    Ok(Some(key))
}

/// Reads the admin token: --admin-token (or SLIDELOG_ADMIN_TOKEN), or the
/// contents of --admin-token-file without its trailing newline. The error
/// names the file, never its contents.
fn admin_token(args: &ServeArgs) -> anyhow::Result<Option<slidelog::redact::Secret>> {
    let Some(path) = &args.admin_token_file else {
        return Ok(args.admin_token.clone());
    };
    // Bounded, regular files only, as every file a flag names.
    let bytes = crate::flag_file::read(
        path,
        "--admin-token-file",
        crate::flag_file::MAX_FLAG_FILE_BYTES,
    )?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("--admin-token-file {} is not UTF-8", path.display()))?;
    let token = text.trim_end_matches(['\r', '\n']);
    if token.is_empty() {
        anyhow::bail!("--admin-token-file {} is empty", path.display());
    }
    Ok(Some(token.into()))
}

//! Validation: one parsed file checked against the rules of the format and
//! turned into descriptor trees, refusing for the reasons the reference
//! service refuses (empty domain or key, duplicate domain or composite key,
//! bad unit, empty or self `replaces`, `share_threshold` without a
//! wildcard), each with the file, line and column.

use super::pattern::Pattern;
use super::rule::{Kind, Rule};
use super::tree::{Node, ValueKind};
use super::yaml::{DescriptorYaml, FileYaml, RateLimitYaml, at, text};
use super::{ConfigError, Domain, LoadOptions, RateLimitConfig, RuleLimitError, Unit};
use serde_saphyr::Spanned;
use slidelog_core::Limit;
use std::path::Path;
use std::sync::Arc;

/// Errors of one file.
struct Ctx<'a> {
    file: &'a Path,
}

impl Ctx<'_> {
    fn invalid(&self, (line, column): (u64, u64), message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.file.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// Adds one parsed file to `config`: a new domain, or with merging on, more
/// descriptors for a domain an earlier file configured.
pub(super) fn add_file(
    config: &mut RateLimitConfig,
    file: &Path,
    parsed: FileYaml,
    options: &LoadOptions,
) -> Result<(), ConfigError> {
    let ctx = Ctx { file };
    let place = parsed.domain.as_ref().map_or((1, 1), |d| at(&d.referenced));
    let domain = text(&parsed.domain).to_owned();
    if domain.is_empty() {
        return Err(ctx.invalid(place, "config file cannot have empty domain"));
    }
    let descriptors = parsed.descriptors.unwrap_or_default();
    if let Some(existing) = config.domains.get_mut(&domain) {
        if !options.merge_domains {
            return Err(ConfigError::DuplicateDomain {
                path: file.to_owned(),
                line: place.0,
                column: place.1,
                domain,
                first: existing.file.display().to_string(),
            });
        }
        load_level(&ctx, &mut existing.root, &descriptors, &domain, &[])?;
    } else {
        let mut root = Node::default();
        load_level(&ctx, &mut root, &descriptors, &domain, &[])?;
        let first = file.to_owned();
        config.domains.insert(
            domain,
            Domain {
                root,
                file: first,
                unmatched: Default::default(),
                overrides: Default::default(),
            },
        );
    }
    config.files.push(file.to_owned());
    Ok(())
}

/// Loads one level of `descriptors` under `node`. `share` holds, per level
/// above, the pattern that a `share_threshold` wildcard put in the key.
fn load_level(
    ctx: &Ctx<'_>,
    node: &mut Node,
    descriptors: &[Spanned<DescriptorYaml>],
    parent_path: &str,
    share: &[Option<String>],
) -> Result<(), ConfigError> {
    for d in descriptors {
        let place = d
            .value
            .key
            .as_ref()
            .map_or(at(&d.referenced), |k| at(&k.referenced));
        let (key, value) = (text(&d.value.key), text(&d.value.value));
        if key.is_empty() {
            return Err(ctx.invalid(place, "descriptor has empty key"));
        }
        let composite = if value.is_empty() {
            key.to_owned()
        } else {
            format!("{key}_{value}")
        };
        let path = format!("{parent_path}.{composite}");
        let kind = match (value.is_empty(), Pattern::parse(value)) {
            (true, _) => ValueKind::None,
            (false, Some(p)) => ValueKind::Wild(p),
            (false, None) => ValueKind::Exact(value.to_owned()),
        };
        let child = load_descriptor(ctx, &d.value, &kind, &path, share)?;
        if !node.insert(key.to_owned(), kind, child) {
            return Err(ctx.invalid(
                place,
                format!("duplicate descriptor composite key '{path}'"),
            ));
        }
    }
    Ok(())
}

/// Builds one descriptor's node: its rule and its own descriptors.
fn load_descriptor(
    ctx: &Ctx<'_>,
    d: &DescriptorYaml,
    value: &ValueKind,
    path: &str,
    share: &[Option<String>],
) -> Result<Node, ConfigError> {
    let shares = d.share_threshold.as_ref().is_some_and(|s| s.value);
    let mut share = share.to_vec();
    match (shares, value) {
        (true, ValueKind::Wild(p)) => share.push(Some(p.as_str().to_owned())),
        (true, _) => {
            let place = at(&d.share_threshold.as_ref().expect("set").referenced);
            return Err(ctx.invalid(
                place,
                format!("share_threshold can only be used with wildcard values (with a '*'), but found '{}'", path.rsplit('.').next().unwrap_or(path)),
            ));
        }
        (false, _) => share.push(None),
    }
    if d.quota_mode == Some(true) {
        tracing::warn!(
            file = %ctx.file.display(),
            descriptor = path,
            "quota_mode: slidelog enforces this descriptor as an ordinary limit"
        );
    }
    let mut node = Node {
        value_to_metric: d.value_to_metric.unwrap_or(false),
        share: shares,
        ..Node::default()
    };
    if let Some(rl) = &d.rate_limit {
        let mut rule = build_rule(ctx, rl, path)?;
        rule.shadow_mode = d.shadow_mode.unwrap_or(false);
        rule.quota_mode = d.quota_mode.unwrap_or(false);
        rule.detailed_metric = d.detailed_metric.unwrap_or(false);
        rule.metadata = d.metadata.clone().map(Arc::new);
        rule.share = share.clone();
        node.rule = Some(Arc::new(rule));
    }
    let children = d.descriptors.as_deref().unwrap_or_default();
    load_level(ctx, &mut node, children, path, &share)?;
    Ok(node)
}

/// Reads a descriptor's `rate_limit`, checked; the descriptor-level flags are
/// set by the caller.
fn build_rule(ctx: &Ctx<'_>, rl: &Spanned<RateLimitYaml>, path: &str) -> Result<Rule, ConfigError> {
    let r = &rl.value;
    let place = at(&rl.referenced);
    let name = Some(text(&r.name).to_owned()).filter(|n| !n.is_empty());
    let replaces = check_replaces(ctx, r, name.as_deref())?;
    let unit = Unit::parse(text(&r.unit));
    let (kind, unit, requests_per_unit, window_ms) = if r.unlimited == Some(true) {
        unlimited(ctx, r, unit, place)?
    } else {
        limited(ctx, r, unit, place)?
    };
    let charge = r.charge.as_ref().is_some_and(|c| c.value);
    if charge && kind == Kind::Unlimited {
        let place = at(&r.charge.as_ref().expect("set").referenced);
        return Err(ctx.invalid(
            place,
            "charge needs a limit: it cannot be used with unlimited",
        ));
    }
    Ok(Rule {
        kind,
        unit,
        requests_per_unit,
        window_ms,
        name,
        replaces,
        shadow_mode: false,
        quota_mode: false,
        detailed_metric: false,
        charge,
        metadata: None,
        path: path.to_owned(),
        config_path: path.to_owned(),
        share: Vec::new(),
        budget: Arc::default(),
        counters: Default::default(),
        shared_counters: None,
    })
}

type Shape = (Kind, Unit, u64, u64);

/// Reads `unlimited: true`: a valid `unit` beside it is refused, as in the
/// reference; `requests_per_unit` is ignored.
fn unlimited(
    ctx: &Ctx<'_>,
    r: &RateLimitYaml,
    unit: Option<Unit>,
    place: (u64, u64),
) -> Result<Shape, ConfigError> {
    if unit.is_some() {
        let place = r.unit.as_ref().map_or(place, |u| at(&u.referenced));
        return Err(ctx.invalid(place, "should not specify rate limit unit when unlimited"));
    }
    if let Some(w) = &r.window {
        return Err(ctx.invalid(
            at(&w.referenced),
            "should not specify a window when unlimited",
        ));
    }
    if let Some(b) = &r.block {
        return Err(ctx.invalid(
            at(&b.referenced),
            "should not specify a block when unlimited (nothing is refused)",
        ));
    }
    Ok((Kind::Unlimited, Unit::Second, 0, Unit::Second.millis()))
}

/// Reads a limit, or with `requests_per_unit: 0` (or none, which the reference
/// reads as 0) a rule that blocks every request.
fn limited(
    ctx: &Ctx<'_>,
    r: &RateLimitYaml,
    unit: Option<Unit>,
    place: (u64, u64),
) -> Result<Shape, ConfigError> {
    let window_ms = window_ms(ctx, r, unit, place)?;
    let unit = unit.unwrap_or_else(|| Unit::for_window(window_ms));
    let rpu = r.requests_per_unit.as_ref();
    match rpu.map(|n| n.value.0) {
        None | Some(0) => {
            if rpu.is_none() {
                tracing::warn!(
                    file = %ctx.file.display(),
                    line = place.0,
                    "rate_limit without requests_per_unit reads as 0: every request is over the limit"
                );
            }
            Ok((Kind::Blocked, unit, 0, window_ms))
        }
        Some(n) => {
            let limit = Limit::new(n, window_ms).map_err(|e| {
                let e = RuleLimitError::from(e);
                ctx.invalid(at(&rpu.expect("set").referenced), e.to_string())
            })?;
            let limit = match &r.block {
                Some(block) => with_block(ctx, limit, block)?,
                None => limit,
            };
            let limit = granular(ctx, r, limit)?;
            Ok((Kind::Limited(limit), unit, n, window_ms))
        }
    }
}

/// Reads the window: slidelog's `window`, or the unit times `unit_multiplier`.
fn window_ms(
    ctx: &Ctx<'_>,
    r: &RateLimitYaml,
    unit: Option<Unit>,
    place: (u64, u64),
) -> Result<u64, ConfigError> {
    if let (Some(_), Some(m)) = (&r.window, &r.unit_multiplier) {
        return Err(ctx.invalid(at(&m.referenced), "set window or unit_multiplier, not both"));
    }
    if let Some(w) = &r.window {
        return explicit_window(ctx, w);
    }
    let Some(unit) = unit else {
        let (p, raw) = r
            .unit
            .as_ref()
            .map_or((place, ""), |u| (at(&u.referenced), text(&r.unit)));
        return Err(ctx.invalid(
            p,
            format!("invalid rate limit unit '{raw}': use second, minute, hour, day, week, month or year (or a window like 90s)"),
        ));
    };
    unit_window(ctx, r, unit, place)
}

/// Reads slidelog's `block: 10m` onto `limit` (at most 366 days).
fn with_block(ctx: &Ctx<'_>, limit: Limit, block: &Spanned<String>) -> Result<Limit, ConfigError> {
    let p = at(&block.referenced);
    let d = yaml_duration(ctx, block, "block", "10m")?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    limit
        .with_block_ms(ms)
        .map_err(|e| ctx.invalid(p, format!("rate_limit block: {e}")))
}

/// Reads slidelog's `granularity: 1s` onto `limit` (docs/design.md §1.1):
/// a duration of whole milliseconds that divides the window.
fn granular(ctx: &Ctx<'_>, r: &RateLimitYaml, limit: Limit) -> Result<Limit, ConfigError> {
    let Some(g) = &r.granularity else {
        return Ok(limit);
    };
    let p = at(&g.referenced);
    let d = yaml_duration(ctx, g, "granularity", "1s")?;
    let ms = Limit::per(1, d)
        .map_err(|e| ctx.invalid(p, format!("rate_limit granularity: {e}")))?
        .window_ms();
    limit
        .with_granularity(ms)
        .map_err(|e| ctx.invalid(p, format!("rate_limit {e}")))
}

/// Reads a duration field of slidelog's extensions (`window: 90s`,
/// `block: 10m`, `granularity: 1s`): the error names the field, its value
/// and an example, at the value's place.
fn yaml_duration(
    ctx: &Ctx<'_>,
    value: &Spanned<String>,
    field: &str,
    example: &str,
) -> Result<std::time::Duration, ConfigError> {
    humantime::parse_duration(&value.value).map_err(|e| {
        let msg = format!(
            "rate_limit {field} {:?} is not a duration like {example}: {e}",
            value.value
        );
        ctx.invalid(at(&value.referenced), msg)
    })
}

/// Reads slidelog's `window: 90s`.
fn explicit_window(ctx: &Ctx<'_>, w: &Spanned<String>) -> Result<u64, ConfigError> {
    let p = at(&w.referenced);
    let d = yaml_duration(ctx, w, "window", "90s")?;
    let limit = Limit::per(1, d).map_err(|e| ctx.invalid(p, format!("rate_limit {e}")))?;
    Ok(limit.window_ms())
}

/// Multiplies the unit by `unit_multiplier` (1 when absent), within the window bound.
fn unit_window(
    ctx: &Ctx<'_>,
    r: &RateLimitYaml,
    unit: Unit,
    place: (u64, u64),
) -> Result<u64, ConfigError> {
    let multiplier_place = r
        .unit_multiplier
        .as_ref()
        .map_or(place, |m| at(&m.referenced));
    let multiplier = r.unit_multiplier.as_ref().map_or(1, |m| m.value.0);
    if multiplier == 0 {
        return Err(ctx.invalid(
            multiplier_place,
            "unit_multiplier must be at least 1, got 0",
        ));
    }
    let ms = unit.millis().saturating_mul(multiplier);
    Limit::new(1, ms).map_err(|e| {
        let msg = format!(
            "rate_limit unit {} x unit_multiplier {multiplier}: {e}",
            unit.name()
        );
        ctx.invalid(multiplier_place, msg)
    })?;
    Ok(ms)
}

/// Checks `replaces`: every entry names a rule, and not this one.
fn check_replaces(
    ctx: &Ctx<'_>,
    r: &RateLimitYaml,
    name: Option<&str>,
) -> Result<Vec<String>, ConfigError> {
    let mut names = Vec::new();
    for entry in r.replaces.as_deref().unwrap_or_default() {
        let p = at(&entry.referenced);
        let replaced = entry.value.name.as_ref().map_or("", |t| t.0.as_str());
        if replaced.is_empty() {
            return Err(ctx.invalid(p, "should not have an empty replaces entry"));
        }
        if Some(replaced) == name {
            return Err(ctx.invalid(
                p,
                format!("replaces should not contain name of same descriptor ('{replaced}')"),
            ));
        }
        names.push(replaced.to_owned());
    }
    Ok(names)
}

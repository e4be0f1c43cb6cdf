//! Parsing: the YAML of one file into plain structs with their places
//! (`Spanned`), before any rule of the format is checked (that is
//! [`super::build`]). Unknown keys are refused here, naming the key, as the
//! reference service refuses them; null where a list or mapping is allowed
//! (`descriptors:` left empty) reads as absent, as it does there.

use super::ConfigError;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::{Location, Spanned};
use std::fmt;
use std::path::Path;

/// One file: `domain` and the top-level `descriptors`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileYaml {
    #[serde(default)]
    pub domain: Option<Spanned<Option<Text>>>,
    #[serde(default)]
    pub descriptors: Option<Vec<Spanned<DescriptorYaml>>>,
}

/// One entry of `descriptors`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DescriptorYaml {
    #[serde(default)]
    pub key: Option<Spanned<Option<Text>>>,
    #[serde(default)]
    pub value: Option<Spanned<Option<Text>>>,
    #[serde(default)]
    pub rate_limit: Option<Spanned<RateLimitYaml>>,
    #[serde(default)]
    pub descriptors: Option<Vec<Spanned<DescriptorYaml>>>,
    #[serde(default)]
    pub shadow_mode: Option<bool>,
    #[serde(default)]
    pub detailed_metric: Option<bool>,
    #[serde(default)]
    pub value_to_metric: Option<bool>,
    #[serde(default)]
    pub share_threshold: Option<Spanned<bool>>,
    #[serde(default)]
    pub quota_mode: Option<bool>,
    /// Free-form data the reference service hands to its client; kept as is.
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
}

/// A descriptor's `rate_limit`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimitYaml {
    #[serde(default)]
    pub unit: Option<Spanned<Option<Text>>>,
    #[serde(default)]
    pub requests_per_unit: Option<Spanned<Count>>,
    #[serde(default)]
    pub unlimited: Option<bool>,
    #[serde(default)]
    pub name: Option<Spanned<Option<Text>>>,
    #[serde(default)]
    pub replaces: Option<Vec<Spanned<ReplacesYaml>>>,
    /// slidelog's extension: a window that is not one unit.
    #[serde(default)]
    pub window: Option<Spanned<String>>,
    /// The window is this many units (1 when absent).
    #[serde(default)]
    pub unit_multiplier: Option<Spanned<Count>>,
    /// slidelog's extension: records count at their time rounded up to a
    /// multiple of this duration (`granularity: 1s`), docs/design.md §1.1.
    #[serde(default)]
    pub granularity: Option<Spanned<String>>,
    /// slidelog's extension: hits are charged (recorded even over the limit).
    #[serde(default)]
    pub charge: Option<Spanned<bool>>,
    /// slidelog's extension: a key this rule refuses stays refused this
    /// long from that refusal (`block: 10m`; docs/design.md §5.4).
    #[serde(default)]
    pub block: Option<Spanned<String>>,
}

/// One entry of `replaces`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplacesYaml {
    #[serde(default)]
    pub name: Option<Text>,
}

/// A scalar read as its text, whatever YAML would type it: `value: 404`,
/// `value: true` and `value: n` are the strings `"404"`, `"true"` and `"n"`,
/// as the reference service's YAML library reads them into its string
/// fields; null is absent (a value-less key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
                Ok(Text(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

/// A whole number, 0 or more (`requests_per_unit`, `unit_multiplier`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number, 0 or more")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
                Ok(Count(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
                u64::try_from(v)
                    .map(Count)
                    .map_err(|_| E::custom(format!("expected a whole number, 0 or more, got {v}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Returns the text of an optional, possibly null, scalar ("" when absent or null).
pub(super) fn text(s: &Option<Spanned<Option<Text>>>) -> &str {
    s.as_ref()
        .and_then(|s| s.value.as_ref())
        .map_or("", |t| t.0.as_str())
}

/// Returns the `(line, column)` of a place, 1-based.
pub(super) fn at(l: &Location) -> (u64, u64) {
    (l.line(), l.column())
}

/// Parses one file; a YAML or shape error names the line and column.
pub(super) fn parse_file(file: &Path, text: &str) -> Result<FileYaml, ConfigError> {
    if text.trim().is_empty() {
        // An empty document has no domain: the reference's own message.
        return Err(ConfigError::Invalid {
            path: file.to_owned(),
            line: 1,
            column: 1,
            message: "config file cannot have empty domain".into(),
        });
    }
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| at(&l));
        // The crate's message may carry a source snippet: keep its first line.
        let message = e.to_string();
        let message = message.lines().next().unwrap_or("invalid YAML");
        // It may also repeat the place we already give: drop that.
        let message = message.strip_prefix("error: ").unwrap_or(message);
        let message = match message.split_once(": ") {
            Some((head, rest)) if head.starts_with("line ") && head.contains(" column ") => rest,
            _ => message,
        }
        .to_owned();
        ConfigError::Invalid {
            path: file.to_owned(),
            line,
            column,
            message,
        }
    })
}

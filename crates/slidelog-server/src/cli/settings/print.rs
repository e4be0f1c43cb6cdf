//! `slidelog serve --print-settings`: every `serve` flag's effective value
//! (after the settings file, the environment and the command line) as a
//! TOML settings file, each line saying where its value came from. Secrets
//! never print: a store URL's passwords are masked (`slidelog::redact`), a
//! token, password or secret value is `***` (the `*-file` paths that hold
//! them print: they are no secret).

use super::{Applied, is_own, is_switch};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};
use std::fmt::Write as _;

/// The effective settings of `serve` as TOML. `cmd` is the command the
/// matches came from (with the settings file applied).
pub fn print(cmd: &Command, matches: &ArgMatches, applied: &Applied) -> String {
    let (Some(serve), Some(sub)) = (
        cmd.find_subcommand("serve"),
        matches.subcommand_matches("serve"),
    ) else {
        return String::new();
    };
    let mut out =
        String::from("# slidelog serve: effective settings (slidelog serve --print-settings)\n");
    if let Some(path) = &applied.path {
        let _ = writeln!(out, "# settings file: {}", path.display());
    }
    // In name order: applying the file moves the flags it set to the end
    // of clap's list.
    let mut args: Vec<(&str, &Arg)> = serve
        .get_arguments()
        .filter_map(|a| Some((a.get_long()?, a)))
        .filter(|(long, _)| !is_own(long))
        .collect();
    args.sort_by_key(|(long, _)| *long);
    for (long, arg) in args {
        let _ = writeln!(out, "{}", line(arg, long, sub, applied));
    }
    out
}

/// `long = value  # source`, or a comment for a flag with no value.
fn line(arg: &Arg, long: &str, sub: &ArgMatches, applied: &Applied) -> String {
    let id = arg.get_id().as_str();
    let raw: Vec<String> = sub
        .get_raw(id)
        .map(|vs| vs.map(|v| v.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if raw.is_empty() {
        return format!("# {long}: not set");
    }
    let from_file = applied.keys.iter().any(|k| k == long);
    let source = match sub.value_source(id) {
        // A setting some flag requires is given as an argument (settings::required).
        Some(ValueSource::CommandLine) if applied.required.iter().any(|k| k == long) => {
            "settings file".to_owned()
        }
        Some(ValueSource::CommandLine) => "flag".to_owned(),
        Some(ValueSource::EnvVariable) => {
            format!(
                "env {}",
                arg.get_env()
                    .map_or_else(String::new, |e| e.to_string_lossy().into_owned())
            )
        }
        _ if from_file => "settings file".to_owned(),
        _ => "default".to_owned(),
    };
    let secret = is_secret(arg, long);
    let values: Vec<String> = raw.iter().map(|v| value(arg, v, secret)).collect();
    let value = if values.len() == 1 {
        values.into_iter().next().unwrap_or_default()
    } else {
        format!("[{}]", values.join(", "))
    };
    format!("{long} = {value}  # {source}")
}

/// A token, password or secret (the value itself, not a file naming it).
fn is_secret(arg: &Arg, long: &str) -> bool {
    if long.ends_with("-file") || long.ends_with("-path") || long.ends_with("-dir") {
        return false;
    }
    arg.is_hide_env_values_set() && !long.contains("store")
        || ["token", "password", "secret"]
            .iter()
            .any(|w| long.contains(w))
}

/// One value as TOML: switches and whole numbers bare, the rest quoted.
fn value(arg: &Arg, raw: &str, secret: bool) -> String {
    if secret {
        return quote("***");
    }
    if (is_switch(arg) || raw == "true" || raw == "false")
        && let Ok(b) = raw.parse::<bool>()
    {
        return b.to_string();
    }
    if !raw.is_empty() && raw.len() < 19 && raw.bytes().all(|b| b.is_ascii_digit()) {
        return raw.to_owned();
    }
    if raw.contains("://") {
        return quote(&slidelog::redact::mask_password(raw));
    }
    quote(raw)
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_and_files_are_not() {
        let token = Arg::new("admin_token").long("admin-token");
        assert!(is_secret(&token, "admin-token"));
        let file = Arg::new("admin_token_file").long("admin-token-file");
        assert!(!is_secret(&file, "admin-token-file"));
        assert_eq!(value(&token, "hunter2", true), "\"***\"");
        let store = Arg::new("store").long("store").hide_env_values(true);
        assert!(!is_secret(&store, "store"));
        assert_eq!(
            value(&store, "redis://u:pw@h:1/0", false),
            "\"redis://u:***@h:1/0\""
        );
        assert_eq!(value(&store, "a\"b", false), r#"'a"b'"#);
    }
}

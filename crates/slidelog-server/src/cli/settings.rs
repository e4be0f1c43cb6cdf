//! `slidelog serve --settings FILE`: every `serve` flag set in one TOML
//! file by its long name (`memory-limit = "512MiB"`, `no-grpc = true`), and
//! `--print-settings`, the effective settings as TOML with secrets masked.
//!
//! Generic over clap, so a flag added later is a setting with no code here:
//! each key of the file becomes the *default value* of the `serve` argument
//! with that long name. Clap's own order then gives the precedence: a
//! command-line flag beats its environment variable, which beats the file,
//! which beats the built-in default. What being defaults means for clap's
//! relations between flags: a flag on the command line that conflicts with
//! a setting overrides it (`--grpc` against `no-grpc = true`: the setting
//! is left out); a flag that requires one the file sets
//! (`--memory-snapshot-interval` with the file's `memory-snapshot`) gets it
//! as an argument, since a default does not meet `requires`; and a switch
//! set to `true` in the file cannot be turned off on the command line
//! (edit the file).
//!
//! TOML rather than YAML (the Envoy configs' format) because every value
//! here is a flat key and a scalar, TOML's spans give `file:line:col` for
//! every key and value, and it has no implicit typing surprises (`no` is a
//! string, not false).
//!
//! The file is read bounded: a regular file only (a named pipe or
//! `/dev/zero` is refused before it is opened, so nothing hangs or fills
//! memory), at most [`MAX_SETTINGS_BYTES`].

use clap::{Arg, ArgAction, ArgMatches, Command};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

mod print;

pub use print::print;

/// The flag that names the settings file (and its environment variable).
pub const SETTINGS: &str = "settings";
/// The flag that prints the effective settings.
pub const PRINT_SETTINGS: &str = "print-settings";
/// The largest settings file read.
pub const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// Why the settings file was not applied. Every message names the file and,
/// for its content, the line (and column for a key).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file could not be read.
    #[error("--settings {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device, a directory).
    #[error("--settings {path}: not a regular file ({kind}): give a TOML file")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Over [`MAX_SETTINGS_BYTES`].
    #[error(
        "--settings {path}: larger than the {MAX_SETTINGS_BYTES}-byte bound of a settings file"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Not UTF-8 or not TOML.
    #[error("{path}:{line}:{col}: not TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The parser's message.
        message: String,
    },
    /// A key that is no long flag of `serve`.
    #[error(
        "{path}:{line}:{col}: unknown setting '{key}' (a setting is a long flag of `slidelog serve` without its dashes, as memory-limit = \"512MiB\"; see slidelog serve --help)"
    )]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The key.
        key: String,
    },
    /// A value the flag refuses.
    #[error("{path}:{line}: {key}: {message}")]
    Value {
        /// The file.
        path: PathBuf,
        /// 1-based line of the value.
        line: usize,
        /// The key.
        key: String,
        /// The flag's own error.
        message: String,
    },
}

/// The settings file applied to the command: its path, the long names it
/// set (for `--print-settings` to tell their source) and the command line
/// to parse.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// The file, when one was given.
    pub path: Option<PathBuf>,
    /// Long names of the flags it set.
    pub keys: Vec<String>,
    /// The command line to parse: the user's, with the settings that a flag
    /// on it requires given before the user's flags (`required`).
    pub argv: Vec<OsString>,
    /// Long names of those settings.
    pub required: Vec<String>,
}

impl Applied {
    /// No settings file: the user's command line as it is.
    fn none(argv: &[OsString]) -> Self {
        Self {
            argv: argv.to_vec(),
            ..Self::default()
        }
    }
}

/// Adds `--settings` and `--print-settings` to the `serve` subcommand of
/// `cmd` and, when `argv` names a settings file for `serve`, makes each of
/// its keys the default of the flag of that long name.
pub fn attach(cmd: Command, argv: &[OsString]) -> Result<(Command, Applied), SettingsError> {
    let cmd = cmd.mut_subcommand("serve", add_flags);
    // The first pass only finds the file. A command line that clap refuses
    // as it stands (a flag that requires one the file sets) still names
    // it: clap's partial parse; the real parse then has the last word.
    let first = cmd.clone().try_get_matches_from(argv);
    let first = first.or_else(|_| cmd.clone().ignore_errors(true).try_get_matches_from(argv));
    let Ok(matches) = first else {
        return Ok((cmd, Applied::none(argv)));
    };
    let Some(("serve", sub)) = matches.subcommand() else {
        return Ok((cmd, Applied::none(argv)));
    };
    let Some(path) = sub.get_one::<PathBuf>(SETTINGS).cloned() else {
        return Ok((cmd, Applied::none(argv)));
    };
    let text = read_bounded(&path)?;
    let mut serve = cmd
        .find_subcommand("serve")
        .cloned()
        .unwrap_or_else(|| Command::new("serve"));
    serve.build();
    let mut settings = parse(&path, &text, &serve)?;
    settings.retain(|s| !overridden(&serve, sub, &s.id));
    let keys = settings.iter().map(|s| s.long.clone()).collect();
    let cmd = cmd.mut_subcommand("serve", |mut serve| {
        for setting in &settings {
            let values = setting.values.clone();
            serve = serve.mut_arg(&setting.id, |arg| arg.default_values(values));
        }
        serve
    });
    let (argv, required) = required(&cmd, argv, &settings);
    let applied = Applied {
        path: Some(path),
        keys,
        argv,
        required,
    };
    Ok((cmd, applied))
}

/// The command line with the settings that a flag on it requires
/// (`--memory-snapshot-interval` requires `--memory-snapshot`) given as
/// arguments right after `serve`: clap's `requires` is not met by a
/// default. Nothing is overridden by this: the user gave none of them.
fn required(
    cmd: &Command,
    argv: &[OsString],
    settings: &[Setting],
) -> (Vec<OsString>, Vec<String>) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let mut argv = argv.to_vec();
    let mut given = Vec::new();
    // Each round adds at least one setting, or stops.
    for _ in 0..settings.len() {
        let Err(e) = cmd.clone().try_get_matches_from(&argv) else {
            break;
        };
        let missing = match (e.kind(), e.get(ContextKind::InvalidArg)) {
            (ErrorKind::MissingRequiredArgument, Some(ContextValue::Strings(m))) => m,
            _ => break,
        };
        let names = |s: &&Setting| {
            let flag = format!("--{}", s.long);
            missing
                .iter()
                .any(|m| m == &flag || m.starts_with(&format!("{flag} ")))
        };
        let wanted: Vec<&Setting> = settings.iter().filter(names).collect();
        let args: Vec<OsString> = wanted.iter().flat_map(|s| s.as_args()).collect();
        if args.is_empty() {
            break;
        }
        given.extend(wanted.iter().map(|s| s.long.clone()));
        // argv[1] is `serve`: the settings go right after it.
        let at = argv.len().min(2);
        argv.splice(at..at, args);
    }
    (argv, given)
}

/// Whether a flag the user gave (command line or environment) conflicts
/// with the file's setting `id` (`--grpc` against the file's `no-grpc`):
/// the user's flag then overrides the setting, which is left out.
fn overridden(serve: &Command, user: &ArgMatches, id: &str) -> bool {
    use clap::parser::ValueSource::{CommandLine, EnvVariable};
    let given = |arg: &Arg| {
        let id = arg.get_id().as_str();
        user.try_contains_id(id).unwrap_or(false)
            && matches!(user.value_source(id), Some(CommandLine | EnvVariable))
    };
    let Some(setting) = serve.get_arguments().find(|a| a.get_id() == id) else {
        return false;
    };
    serve.get_arg_conflicts_with(setting).into_iter().any(given)
        || serve.get_arguments().filter(|a| given(a)).any(|a| {
            serve
                .get_arg_conflicts_with(a)
                .iter()
                .any(|c| c.get_id() == id)
        })
}

/// The two flags this module owns.
fn add_flags(serve: Command) -> Command {
    serve
        .arg(
            Arg::new(SETTINGS)
                .long(SETTINGS)
                .env("SLIDELOG_SETTINGS")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help(
                    "A TOML file setting any of these flags by its long name \
                     (memory-limit = \"512MiB\"); flags and environment variables override it",
                ),
        )
        .arg(
            Arg::new(PRINT_SETTINGS)
                .long(PRINT_SETTINGS)
                .action(ArgAction::SetTrue)
                .help(
                    "Print the effective settings (file, environment and flags) as TOML, \
                     secrets masked, and exit",
                ),
        )
}

/// The file's content: a regular file of at most [`MAX_SETTINGS_BYTES`].
/// The type is checked before the file is opened (opening a FIFO blocks).
fn read_bounded(path: &Path) -> Result<String, SettingsError> {
    use std::io::Read;
    let read_err = |source| SettingsError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    check_regular(path, &meta)?;
    let file = std::fs::File::open(path).map_err(read_err)?;
    // Checked again on the open file: the path may have been swapped.
    check_regular(path, &file.metadata().map_err(read_err)?)?;
    let mut bytes = Vec::new();
    file.take(MAX_SETTINGS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(SettingsError::TooLarge {
            path: path.to_owned(),
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let (line, col) = line_col(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        SettingsError::Syntax {
            path: path.to_owned(),
            line,
            col,
            message: "not UTF-8".into(),
        }
    })
}

/// Refuses anything but a regular file, naming what it is.
fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), SettingsError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(SettingsError::NotRegular {
        path: path.to_owned(),
        kind,
    })
}

/// One key of the file, checked: the argument's id and its values as text.
struct Setting {
    id: String,
    long: String,
    values: Vec<String>,
    switch: bool,
}

impl Setting {
    /// The setting as command-line arguments.
    fn as_args(&self) -> Vec<OsString> {
        if self.switch {
            let on = self.values.iter().any(|v| v == "true");
            return on
                .then(|| format!("--{}", self.long).into())
                .into_iter()
                .collect();
        }
        let arg = |v: &String| format!("--{}={v}", self.long).into();
        self.values.iter().map(arg).collect()
    }
}

/// Parses `text` and checks every key against `serve`'s flags and every
/// value with the flag's own parser. The first problem in file order wins.
fn parse(path: &Path, text: &str, serve: &Command) -> Result<Vec<Setting>, SettingsError> {
    let table = DeTable::parse(text).map_err(|e| {
        let (line, col) = line_col(text, e.span().map_or(0, |s| s.start));
        SettingsError::Syntax {
            path: path.to_owned(),
            line,
            col,
            message: e.message().trim().to_owned(),
        }
    })?;
    let mut entries: Vec<_> = table.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut settings = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let long = key.get_ref().as_ref();
        let (line, col) = line_col(text, key.span().start);
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(long) && !is_own(long))
            .ok_or_else(|| SettingsError::UnknownKey {
                path: path.to_owned(),
                line,
                col,
                key: long.to_owned(),
            })?;
        let value_line = line_col(text, value.span().start).0;
        let value_err = |message: String| SettingsError::Value {
            path: path.to_owned(),
            line: value_line,
            key: long.to_owned(),
            message,
        };
        let values = values_of(arg, value.get_ref()).map_err(value_err)?;
        check_values(serve, arg, &values).map_err(value_err)?;
        settings.push(Setting {
            id: arg.get_id().to_string(),
            long: long.to_owned(),
            values,
            switch: is_switch(arg),
        });
    }
    Ok(settings)
}

/// `settings` and `print-settings` are no settings.
fn is_own(long: &str) -> bool {
    matches!(long, SETTINGS | PRINT_SETTINGS | "help" | "version")
}

/// Whether `arg` is a switch (`--no-grpc`) rather than a flag with a value.
pub(crate) fn is_switch(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
}

/// The TOML value as the text clap parses: a scalar is one value, an array
/// several (only for a flag that takes several).
fn values_of(arg: &Arg, value: &DeValue<'_>) -> Result<Vec<String>, String> {
    if is_switch(arg) {
        return match value {
            DeValue::Boolean(b) => Ok(vec![b.to_string()]),
            _ => Err("a switch: give true or false".into()),
        };
    }
    match value {
        DeValue::Array(items) => {
            let many = matches!(arg.get_action(), ArgAction::Append)
                || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
            if !many {
                return Err("takes one value, not an array".into());
            }
            items.iter().map(|v| scalar(v.get_ref())).collect()
        }
        other => Ok(vec![scalar(other)?]),
    }
}

/// A scalar as text: strings as they are, numbers as written, booleans.
fn scalar(value: &DeValue<'_>) -> Result<String, String> {
    match value {
        DeValue::String(s) => Ok(s.to_string()),
        DeValue::Integer(i) if i.radix() == 10 => Ok(i.as_str().replace('_', "")),
        DeValue::Integer(i) => Err(format!("write {} in decimal", i.as_str())),
        DeValue::Float(f) => Ok(f.as_str().to_owned()),
        DeValue::Boolean(b) => Ok(b.to_string()),
        DeValue::Datetime(d) => Ok(d.to_string()),
        DeValue::Array(_) => Err("nested arrays are no value".into()),
        DeValue::Table(_) => Err("a table is no value: settings are top-level keys".into()),
    }
}

/// Runs `values` through the flag's own parser (a parse of `serve
/// --LONG=VALUE`), keeping only an error about that flag's value: other
/// flags' `requires` and the environment are not this key's business.
fn check_values(serve: &Command, arg: &Arg, values: &[String]) -> Result<(), String> {
    if is_switch(arg) {
        return Ok(());
    }
    let long = arg.get_long().unwrap_or_default();
    let argv = values.iter().map(|v| format!("--{long}={v}"));
    let Err(e) = serve
        .clone()
        .no_binary_name(true)
        .try_get_matches_from(argv)
    else {
        return Ok(());
    };
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let about_this = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => {
            s == &format!("--{long}") || s.starts_with(&format!("--{long} "))
        }
        _ => false,
    };
    let value_error = matches!(
        e.kind(),
        ErrorKind::ValueValidation
            | ErrorKind::InvalidValue
            | ErrorKind::InvalidUtf8
            | ErrorKind::WrongNumberOfValues
            | ErrorKind::TooManyValues
            | ErrorKind::TooFewValues
    );
    if !(about_this && value_error) {
        return Ok(());
    }
    let rendered = e.to_string();
    let first = rendered.lines().next().unwrap_or_default();
    Err(first.strip_prefix("error: ").unwrap_or(first).to_owned())
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Whether the parsed command line asks for `--print-settings`.
pub fn wants_print(matches: &ArgMatches) -> bool {
    matches
        .subcommand_matches("serve")
        .is_some_and(|sub| sub.get_flag(PRINT_SETTINGS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_of_an_offset() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, text.find('=').unwrap()), (1, 3));
        assert_eq!(line_col(text, "a = 1\nbé ".len()), (2, 4));
    }
}

//! [`ConfigError`]: why a config cannot be used, with the file, and the line
//! and column when the problem sits at one place in it.

use std::path::PathBuf;

/// A config that cannot be used. Every variant names the file; parse and
/// validation errors also name the line and column.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or folder could not be read.
    #[error("{path}: cannot read: {reason}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file is not valid YAML, or a value breaks a rule of the format.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// Two files configure the same domain (and merging is off).
    #[error(
        "{path}:{line}:{column}: duplicate domain {domain:?}: already configured in {first} \
         (set MERGE_DOMAIN_CONFIG=true or --merge-domain-config to merge the files)"
    )]
    DuplicateDomain {
        /// The second file.
        path: PathBuf,
        /// Line of `domain` in the second file.
        line: u64,
        /// Column of the domain's value in the second file.
        column: u64,
        /// The domain.
        domain: String,
        /// The file that configured it first.
        first: String,
    },
    /// A folder holds no `.yaml` / `.yml` file.
    #[error("{path}: no .yaml or .yml file in the folder")]
    NoFiles {
        /// The folder.
        path: PathBuf,
    },
}

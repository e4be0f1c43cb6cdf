//! Which files a config path names: the file itself, or every `.yaml` /
//! `.yml` under a folder, recursively, sorted, hidden entries skipped.
//! Sorting makes the load order (and so duplicate-domain errors and the
//! order of wildcard matches across merged files) the same on every host.

use super::ConfigError;
use std::path::{Path, PathBuf};

/// Returns the YAML files a path names: the file itself, or every `.yaml`/`.yml`
/// under a folder, sorted, hidden entries skipped.
pub fn config_files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_err = |p: &Path, e: std::io::Error| ConfigError::Read {
        path: p.to_owned(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(|e| read_err(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| read_err(&dir, e))? {
            let entry = entry.map_err(|e| read_err(&dir, e))?;
            let p = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                files.push(p);
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(ConfigError::NoFiles {
            path: path.to_owned(),
        });
    }
    Ok(files)
}

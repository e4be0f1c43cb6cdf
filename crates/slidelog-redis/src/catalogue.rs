//! Every script the Redis store sends, found by its SHA1: a Cluster node
//! that lost its scripts (a promoted replica, `SCRIPT FLUSH`) is sent the
//! source again with `EVAL` (docs/design.md §4.2).

use crate::joint::{JOINT, JOINT_SOURCE, RESERVATION, RESERVATION_SOURCE};
use crate::script::{SCRIPT, SINGLE, SINGLE_SOURCE, SOURCE};
use crate::usage::{USAGE, USAGE_SOURCE};

/// Returns the source of the script whose SHA1 is `sha`, if it is one of
/// the store's scripts.
pub fn source_for_sha(sha: &[u8]) -> Option<&'static str> {
    [
        (&*SCRIPT, SOURCE),
        (&*SINGLE, SINGLE_SOURCE),
        (&*USAGE, USAGE_SOURCE),
        (&*JOINT, JOINT_SOURCE),
        (&*RESERVATION, RESERVATION_SOURCE),
    ]
    .into_iter()
    .find(|(script, _)| sha == script.get_hash().as_bytes())
    .map(|(_, source)| source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_is_found_by_its_hash() {
        assert_eq!(source_for_sha(SCRIPT.get_hash().as_bytes()), Some(SOURCE));
        assert_eq!(
            source_for_sha(SINGLE.get_hash().as_bytes()),
            Some(SINGLE_SOURCE)
        );
        assert_eq!(
            source_for_sha(USAGE.get_hash().as_bytes()),
            Some(USAGE_SOURCE)
        );
        assert_eq!(
            source_for_sha(JOINT.get_hash().as_bytes()),
            Some(JOINT_SOURCE)
        );
        assert_eq!(source_for_sha(b"0000"), None);
    }
}

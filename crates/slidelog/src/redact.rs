//! Secrets out of logs and errors: a store URL with its password masked,
//! the same function every crate uses.
//!
//! ```
//! assert_eq!(
//!     slidelog::redact::mask_password("redis://user:secret@127.0.0.1:6379/0"),
//!     "redis://user:***@127.0.0.1:6379/0"
//! );
//! ```

pub use slidelog_core::redact::{Secret, SecretUrl, mask_password};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            mask_password("redis://user:secret@127.0.0.1:6379/0"),
            "redis://user:***@127.0.0.1:6379/0"
        );
        assert_eq!(mask_password("rediss://secret@h:1"), "rediss://***@h:1");
        assert_eq!(mask_password("redis://h:1"), "redis://h:1");
    }
}

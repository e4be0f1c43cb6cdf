//! A limit's name ([`LimitName`]): `requests`, `tokens`. Names are what
//! answers and the RateLimit header fields report a limit by, so they are
//! short, printable and safe inside a quoted header string without escaping.

use crate::error::InputError;

/// Longest name of a limit, in bytes.
pub const MAX_NAME_BYTES: usize = 32;

/// The name of a limit: 1 to [`MAX_NAME_BYTES`] bytes of ASCII letters,
/// digits, `_`, `-` and `.`, starting with a letter.
///
/// Held inline (no allocation), so a [`crate::Limit`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitName {
    len: u8,
    bytes: [u8; MAX_NAME_BYTES],
}

impl LimitName {
    /// Validates `name`. The error names the field (`limits[].name`) and
    /// the bound.
    ///
    /// ```
    /// # use slidelog_core::limit::LimitName;
    /// assert_eq!(LimitName::new("tokens")?.as_str(), "tokens");
    /// assert!(LimitName::new("").is_err());
    /// assert!(LimitName::new("9lives").is_err());
    /// assert!(LimitName::new("a\"b").is_err());
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn new(name: &str) -> Result<Self, InputError> {
        let ok_first = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
        let ok_rest = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !ok_first || !ok_rest || name.len() > MAX_NAME_BYTES {
            return Err(InputError::Name {
                // Echo at most a bound's worth of what was sent.
                got: name.chars().take(MAX_NAME_BYTES + 1).collect(),
            });
        }
        let mut bytes = [0; MAX_NAME_BYTES];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(Self {
            len: name.len() as u8,
            bytes,
        })
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        // Built only from validated ASCII.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for LimitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for LimitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for LimitName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_in_charset_and_length() {
        assert!(LimitName::new("requests").is_ok());
        assert!(LimitName::new("tokens.out_v2-x").is_ok());
        assert!(LimitName::new(&"a".repeat(MAX_NAME_BYTES)).is_ok());
        for bad in ["", "1a", "-a", "a b", "a=b", "a,b", "a\"", "é", "a;q=1"] {
            assert!(LimitName::new(bad).is_err(), "{bad:?}");
        }
        let long = LimitName::new(&"a".repeat(MAX_NAME_BYTES + 1)).unwrap_err();
        let msg = long.to_string();
        assert!(msg.starts_with("name ") && msg.contains("32"), "{msg}");
        assert_eq!(long.field(), "limits[].name");
    }
}

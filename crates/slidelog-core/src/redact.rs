//! Secrets out of logs and errors: a store URL with its passwords masked. One
//! implementation for every crate, so no path prints a password another
//! path masks.

/// `url` with every password replaced by `***`: the one in the userinfo
/// (`redis://user:pw@host`, `redis://pw@host`) and the value of every query
/// parameter whose name contains `password` (`?sentinel_password=…`).
///
/// ```
/// use slidelog_core::redact::mask_password;
/// assert_eq!(
///     mask_password("redis+sentinel://u:pw@h:26379/m?sentinel_password=s&db=1"),
///     "redis+sentinel://u:***@h:26379/m?sentinel_password=***&db=1"
/// );
/// ```
pub fn mask_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = split_authority(rest);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("***@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name.to_ascii_lowercase().contains("password") => {
                        format!("{name}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// `(authority, path-and-query)` of what follows `scheme://`. The authority
/// normally ends at the first `/` or `?`, but a password that should have
/// been percent-encoded may hold either (`redis://u:pa/ss@h:1`): when an `@`
/// follows that point (before any `?` that follows the `@`), the userinfo
/// runs to the last such `@`, so such a password is masked whole rather than
/// printed as part of a path. A query value holding an `@` can make this
/// mask more than the password; never less.
fn split_authority(rest: &str) -> (&str, &str) {
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    // A host never holds '@': the userinfo ends at the last '@' whose host
    // part (up to the next '/' or '?') holds no other '@'.
    let at = rest.rmatch_indices('@').map(|(i, _)| i).find(|&i| {
        let after = &rest[i + 1..];
        !after[..after.find(['/', '?']).unwrap_or(after.len())].contains('@')
    });
    match at {
        Some(at) if at >= end => {
            let host_end = rest[at..].find(['/', '?']).map_or(rest.len(), |i| at + i);
            rest.split_at(host_end)
        }
        _ => rest.split_at(end),
    }
}

/// A secret (a token, a password) that never shows in `Debug` or `Display`
/// output: both print `***`. [`Secret::expose`] gives the value to the one
/// place that needs it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// A store URL whose `Debug` and `Display` show it with its passwords
/// masked ([`mask_password`]); [`SecretUrl::expose`] gives the URL itself.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wraps `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL itself, password included.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", mask_password(&self.0))
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&mask_password(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::{Secret, SecretUrl, mask_password};

    #[test]
    fn secrets_never_show_in_debug_or_display() {
        let token = Secret::new("t0ken");
        assert_eq!(format!("{token:?} {token}"), "*** ***");
        assert_eq!(token.expose(), "t0ken");
        let url = SecretUrl::new("redis://default:pa/ss@127.0.0.1:1");
        assert!(!format!("{url:?} {url}").contains("pa/ss"));
        assert_eq!(url.expose(), "redis://default:pa/ss@127.0.0.1:1");
    }

    #[test]
    fn every_password_is_masked_and_nothing_else_changes() {
        let cases = [
            (
                "redis://user:secret@127.0.0.1:6379/0",
                "redis://user:***@127.0.0.1:6379/0",
            ),
            ("rediss://secret@h:1", "rediss://***@h:1"),
            ("redis://h:1", "redis://h:1"),
            ("redis://h:1/2", "redis://h:1/2"),
            (
                "redis://:pw@h:1?protocol=resp3",
                "redis://:***@h:1?protocol=resp3",
            ),
            (
                "redis+cluster://u:p@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
            (
                "redis+sentinel://a:1,b:2/m?sentinel_username=x&sentinel_password=y",
                "redis+sentinel://a:1,b:2/m?sentinel_username=x&sentinel_password=***",
            ),
            ("memory://", "memory://"),
            // Characters that should have been percent-encoded.
            (
                "redis://default:pa/ss@127.0.0.1:1",
                "redis://default:***@127.0.0.1:1",
            ),
            (
                "redis://default:pa?ss@127.0.0.1:1/0",
                "redis://default:***@127.0.0.1:1/0",
            ),
            ("redis://u:p@ss@h:1/2", "redis://u:***@h:1/2"),
            ("redis://u:a/b?c@d@h:1?x=1", "redis://u:***@h:1?x=1"),
            ("redis://:p%2Fs@h:1", "redis://:***@h:1"),
            (
                "redis+cluster://u:p/w@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
            (
                "redis+sentinel://u:p/w@a:1,b:2/m/1",
                "redis+sentinel://u:***@a:1,b:2/m/1",
            ),
            ("not a url", "not a url"),
        ];
        for (url, masked) in cases {
            assert_eq!(mask_password(url), masked, "{url}");
        }
    }
}

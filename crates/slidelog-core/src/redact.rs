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
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
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

#[cfg(test)]
mod tests {
    use super::mask_password;

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
            ("not a url", "not a url"),
        ];
        for (url, masked) in cases {
            assert_eq!(mask_password(url), masked, "{url}");
        }
    }
}

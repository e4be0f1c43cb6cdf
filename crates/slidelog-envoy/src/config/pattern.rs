//! Wildcard values: `*` stands for any run of characters (the empty one
//! included), anywhere in the value and any number of times, as in the
//! reference service (`foo*`, `*.example.com`, `/api*v1`, `svc*ep*rpc`).
//! Every other character, `?` and regex metacharacters included, is literal.

/// A configured `value` that holds at least one `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    /// The literal pieces between the stars: `a*b*c` is `["a", "b", "c"]`.
    pieces: Vec<String>,
}

impl Pattern {
    /// Returns the pattern of `value`, or `None` when it holds no `*`.
    pub fn parse(value: &str) -> Option<Self> {
        if !value.contains('*') {
            return None;
        }
        Some(Self {
            text: value.to_owned(),
            pieces: value.split('*').map(str::to_owned).collect(),
        })
    }

    /// Returns the value as written in the config, stars included.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Tells whether `value` matches: the first piece is a prefix, the last a
    /// suffix, and the middle ones appear in order in between. Taking the
    /// leftmost place of each middle piece is enough: a later place could
    /// only leave less room for the rest.
    pub fn matches(&self, value: &str) -> bool {
        let (first, rest) = self.pieces.split_first().expect("split yields a piece");
        let (last, middle) = rest.split_last().expect("a pattern has a star");
        if value.len() < first.len() + last.len()
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        let mut inner = &value[first.len()..value.len() - last.len()];
        for piece in middle {
            match inner.find(piece.as_str()) {
                Some(at) => inner = &inner[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    fn m(p: &str, v: &str) -> bool {
        Pattern::parse(p).unwrap().matches(v)
    }

    #[test]
    fn stars_match_anywhere_and_any_number_of_times() {
        assert!(Pattern::parse("plain").is_none());
        assert!(m("foo*", "foo") && m("foo*", "foobar") && !m("foo*", "fo"));
        assert!(m("*.example.com", "a.example.com") && !m("*.example.com", "example.com"));
        assert!(m("bar*b", "barb") && m("bar*b", "bar-xyz-b") && !m("bar*b", "barbx"));
        assert!(m("foo*bar*baz", "foobarbaz") && m("foo*bar*baz", "foo1bar2baz"));
        assert!(!m("foo*bar*baz", "foobaz") && !m("foo*bar*baz", "foobazbar"));
        assert!(m("foo*bar*", "foobar") && m("foo*bar*", "foo_bar_x") && !m("foo*bar*", "foo"));
        assert!(m("*", "") && m("*", "anything") && m("**", "x"));
        // The prefix and the suffix may not share characters.
        assert!(!m("ab*ba", "aba") && m("ab*ba", "abba"));
        // Other characters are literal.
        assert!(m("a.?*", "a.?z") && !m("a.?*", "abz"));
        assert!(m("é*ü", "éxü"));
    }
}

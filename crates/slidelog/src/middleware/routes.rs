//! Which limits apply to a request: a small table of route rules, first match
//! wins, with a default for every other request.

use super::cost::CostListError;
use http::request::Parts;
use http::{HeaderValue, Method};
use slidelog_core::{InputError, Limit, LimitParseError, MAX_LIMITS};
use std::sync::Arc;

/// The limits of one route (or of the default), validated once.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// Prefix of the keys counted under this rule: a route with its own
    /// limits has its own logs (docs/design.md §1: a key is used with one set of limits).
    pub(crate) scope: Arc<str>,
    /// `None`: not limited.
    pub(crate) limits: Option<Arc<[Limit]>>,
    /// `RateLimit-Policy` of the limits, formatted once: it never changes.
    pub(crate) policy: Option<HeaderValue>,
    /// With costs given by name ([`RouteLimits::name_costs`]): the position
    /// of each named limit among `limits`, in the order of the names.
    pub(crate) named: Option<Arc<[usize]>>,
}

impl Rule {
    fn new(scope: String, limits: Option<Arc<[Limit]>>) -> Self {
        let policy = limits
            .as_deref()
            .and_then(|l| HeaderValue::from_str(&crate::headers::policy_value(l)).ok());
        Self {
            scope: scope.into(),
            limits,
            policy,
            named: None,
        }
    }
}

#[derive(Debug, Clone)]
struct RouteRule {
    method: Option<Method>,
    pattern: Pattern,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Pattern {
    Exact(String),
    /// `"/api/*"`: the path `/api` and everything under `/api/`.
    Prefix(String),
}

impl Pattern {
    fn parse(path: &str) -> Self {
        match path.strip_suffix("/*") {
            Some(prefix) => Self::Prefix(prefix.to_owned()),
            None => Self::Exact(path.to_owned()),
        }
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            Self::Exact(p) => p == path,
            Self::Prefix(p) => path
                .strip_prefix(p.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
        }
    }
}

/// Limits per route with a default.
///
/// A path is exact (`/login`), or a prefix when it ends in `/*` (`/api/*`
/// matches `/api` and `/api/…`). It is compared with the request path and,
/// with the `axum` feature, with axum's matched route (`/users/{id}`). Rules
/// are tried in the order they were added; the first match decides. Each rule
/// counts in its own logs: the same client has separate logs on `/login` and
/// on the default.
///
/// ```
/// use slidelog::Limit;
/// use slidelog::middleware::RouteLimits;
/// let routes = RouteLimits::new([Limit::new(100, 60_000)?])?  // everything else: 100/min
///     .route("/login", [Limit::new(5, 60_000)?])?              // 5/min
///     .route_method(http::Method::POST, "/api/*", [Limit::new(10, 1_000)?])? // writes: 10/s
///     .unlimited("/healthz");
/// # Ok::<(), slidelog::InputError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RouteLimits {
    routes: Vec<RouteRule>,
    default: Rule,
}

impl RouteLimits {
    /// Every request not matched by a route gets `limits` (1 to 16 limits).
    pub fn new(limits: impl Into<Vec<Limit>>) -> Result<Self, InputError> {
        Ok(Self {
            routes: Vec::new(),
            default: Rule::new("default".into(), Some(validated(limits.into())?)),
        })
    }

    /// Only the routes added are limited; every other request passes.
    pub fn unlimited_by_default() -> Self {
        Self {
            routes: Vec::new(),
            default: Rule::new("default".into(), None),
        }
    }

    /// Requests to `path` (any method) get `limits`.
    pub fn route(self, path: &str, limits: impl Into<Vec<Limit>>) -> Result<Self, InputError> {
        Ok(self.add(None, path, Some(validated(limits.into())?)))
    }

    /// Requests with `method` to `path` get `limits`.
    pub fn route_method(
        self,
        method: Method,
        path: &str,
        limits: impl Into<Vec<Limit>>,
    ) -> Result<Self, InputError> {
        Ok(self.add(Some(method), path, Some(validated(limits.into())?)))
    }

    /// Requests to `path` are not limited (health checks, metrics).
    pub fn unlimited(self, path: &str) -> Self {
        self.add(None, path, None)
    }

    fn add(mut self, method: Option<Method>, path: &str, limits: Option<Arc<[Limit]>>) -> Self {
        let scope = match &method {
            Some(m) => format!("{m} {path}"),
            None => path.to_owned(),
        };
        self.routes.push(RouteRule {
            method,
            pattern: Pattern::parse(path),
            rule: Rule::new(scope, limits),
        });
        self
    }

    /// Returns a fingerprint of the table: 8 hex digits of a stable hash
    /// (FNV-1a, the same in every process and version) of every rule's
    /// method, path and limits, in order. A derived namespace carries it
    /// ([`super::namespace`]), so layers with other limits never share logs.
    pub(crate) fn fingerprint(&self) -> String {
        let mut text = String::new();
        let rules = self.routes.iter().map(|r| &r.rule).chain([&self.default]);
        for rule in rules {
            text.push_str(&rule.scope);
            for limit in rule.limits.as_deref().unwrap_or_default() {
                text.push_str(&format!(" {}/{}", limit.max(), limit.window_ms()));
            }
            text.push('\n');
        }
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{:08x}", hash as u32 ^ (hash >> 32) as u32)
    }

    /// Resolves a cost list given by limit name against every limited rule,
    /// once, when the layer is built: each name must be carried by one limit
    /// of every limited route (limits not named cost 1). The rules then
    /// remember where each named cost goes.
    pub(crate) fn name_costs(&mut self, names: &[&str]) -> Result<(), CostListError> {
        if names.is_empty() || names.len() > MAX_LIMITS {
            return Err(CostListError::Count { got: names.len() });
        }
        for (index, name) in names.iter().enumerate() {
            if names[..index].contains(name) {
                return Err(CostListError::DuplicateName {
                    index,
                    name: (*name).to_owned(),
                });
            }
        }
        let rules = self.routes.iter_mut().map(|r| &mut r.rule);
        for rule in rules.chain([&mut self.default]) {
            let Some(limits) = rule.limits.as_deref() else {
                continue;
            };
            let positions = names
                .iter()
                .enumerate()
                .map(|(index, name)| {
                    limits
                        .iter()
                        .position(|l| l.name() == Some(*name))
                        .ok_or_else(|| CostListError::UnknownName {
                            index,
                            name: (*name).to_owned(),
                            route: rule.scope.to_string(),
                            limits: crate::headers::policy_value(limits),
                        })
                })
                .collect::<Result<Arc<[usize]>, _>>()?;
            rule.named = Some(positions);
        }
        Ok(())
    }

    /// Returns every rule that limits (the routes in order, then the
    /// default when it limits), to check a cost list against when the layer
    /// is built.
    pub(crate) fn limited_rules(&self) -> impl Iterator<Item = (&str, &[Limit])> {
        let rules = self.routes.iter().map(|r| &r.rule);
        rules
            .chain([&self.default])
            .filter_map(|rule| Some((&*rule.scope, rule.limits.as_deref()?)))
    }

    /// Returns the rule for a request.
    pub(crate) fn rule_for(&self, parts: &Parts) -> &Rule {
        let path = parts.uri.path();
        let routed = super::extract::route_path(parts);
        self.routes
            .iter()
            .find(|r| {
                r.method.as_ref().is_none_or(|m| m == parts.method)
                    && (r.pattern.matches(path) || r.pattern.matches(routed))
            })
            .map_or(&self.default, |r| &r.rule)
    }
}

/// One limit for every request (`"100/minute".parse::<Limit>()?`).
impl From<Limit> for RouteLimits {
    fn from(limit: Limit) -> Self {
        Self {
            routes: Vec::new(),
            default: Rule::new("default".into(), Some(Arc::from([limit]))),
        }
    }
}

/// The same limits for every request, in the service's vocabulary:
/// `"100/minute"`, or several separated by commas, `"10/second, 1000/hour"`.
///
/// ```
/// use slidelog::middleware::RouteLimits;
/// let routes: RouteLimits = "10/second, 1000/hour".parse()?;
/// # Ok::<(), slidelog::LimitParseError>(())
/// ```
impl std::str::FromStr for RouteLimits {
    type Err = LimitParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(slidelog_core::limit::parse_list(text)?)?)
    }
}

/// 1 to 16 limits, no name given twice, as a request needs them.
fn validated(limits: Vec<Limit>) -> Result<Arc<[Limit]>, InputError> {
    if limits.is_empty() || limits.len() > MAX_LIMITS {
        return Err(InputError::LimitCount { got: limits.len() });
    }
    slidelog_core::limit::check_names(&limits)?;
    Ok(limits.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: Method, path: &str) -> Parts {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    fn max_of(routes: &RouteLimits, method: Method, path: &str) -> Option<u64> {
        routes
            .rule_for(&parts(method, path))
            .limits
            .as_ref()
            .map(|l| l[0].max())
    }

    #[test]
    fn first_match_wins_and_prefixes_respect_segments() {
        let l = |n| [Limit::new(n, 1_000).unwrap()];
        let routes = RouteLimits::new(l(1))
            .unwrap()
            .route_method(Method::POST, "/api/*", l(2))
            .unwrap()
            .route("/api/*", l(3))
            .unwrap()
            .unlimited("/healthz");
        assert_eq!(max_of(&routes, Method::POST, "/api/x"), Some(2));
        assert_eq!(max_of(&routes, Method::GET, "/api/x"), Some(3));
        assert_eq!(max_of(&routes, Method::GET, "/api"), Some(3));
        assert_eq!(max_of(&routes, Method::GET, "/apix"), Some(1));
        assert_eq!(max_of(&routes, Method::GET, "/healthz"), None);
        assert_eq!(max_of(&routes, Method::GET, "/"), Some(1));
    }

    #[test]
    fn empty_or_too_many_limits_are_errors() {
        assert_eq!(
            RouteLimits::new(Vec::new()).unwrap_err(),
            InputError::LimitCount { got: 0 }
        );
        let l = Limit::new(1, 1).unwrap();
        assert_eq!(
            RouteLimits::unlimited_by_default()
                .route("/x", vec![l; 17])
                .unwrap_err(),
            InputError::LimitCount { got: 17 }
        );
    }
}

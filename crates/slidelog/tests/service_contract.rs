//! The tower contract of the layer, called directly (no network): readiness
//! is the inner service's, the service made ready is the one called, a
//! refused request releases what `poll_ready` reserved, and the inner service
//! is reachable (`get_ref`, `get_mut`, `into_inner`).

use http::{Request, Response, StatusCode};
use slidelog::middleware::{Constant, RateLimitLayer, RouteLimits};
use slidelog::{Limit, Limiter};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tower::limit::ConcurrencyLimitLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

fn request() -> Request<String> {
    Request::get("/").body(String::new()).unwrap()
}

fn layer(max: u64) -> RateLimitLayer<Constant> {
    RateLimitLayer::new(
        Limiter::memory(),
        Constant::new("all"),
        RouteLimits::new([Limit::new(max, 60_000).unwrap()]).unwrap(),
    )
}

#[tokio::test]
async fn refused_requests_release_the_inner_readiness() {
    // The inner service admits one call at a time: `poll_ready` takes the
    // only permit. A refused request must give it back, or the service would
    // stall forever after the first 429.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let inner = ConcurrencyLimitLayer::new(1).layer(service_fn(move |_: Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new("ok".to_owned())) }
    }));
    let mut svc = layer(2).layer(inner);
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = tokio::time::timeout(
            Duration::from_secs(5),
            svc.ready().await.unwrap().call(request()),
        )
        .await
        .expect("never stalls")
        .unwrap();
        statuses.push(response.status());
    }
    assert_eq!(
        statuses,
        [200, 200, 429, 429, 429, 429].map(|c| StatusCode::from_u16(c).unwrap())
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A service that is ready only every other poll, and counts calls.
#[derive(Clone, Default)]
struct Flaky {
    polls: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl Service<Request<String>> for Flaky {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.polls.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
            cx.waker().wake_by_ref();
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Response::new("ok".to_owned())))
    }
}

#[tokio::test]
async fn readiness_is_the_inner_services_and_the_inner_is_reachable() {
    let flaky = Flaky::default();
    let mut svc = layer(1).layer(flaky.clone());
    // Pending is passed through, then ready.
    let response = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(flaky.polls.load(Ordering::SeqCst), 2);

    assert_eq!(svc.get_ref().calls.load(Ordering::SeqCst), 1);
    svc.get_mut().calls.store(10, Ordering::SeqCst);
    assert_eq!(svc.limiter().store().kind(), "memory");
    let inner = svc.into_inner();
    assert_eq!(inner.calls.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn a_plain_string_body_service_gets_text_refusals() {
    let svc = layer(1).layer(service_fn(|_: Request<String>| async {
        Ok::<_, Infallible>(Response::new("ok".to_owned()))
    }));
    assert_eq!(svc.clone().oneshot(request()).await.unwrap().status(), 200);
    let refused = svc.oneshot(request()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        refused
            .body()
            .starts_with("rate limit exceeded: 1 per 60000 ms")
    );
    assert!(refused.extensions().get::<slidelog::Decision>().is_some());
}

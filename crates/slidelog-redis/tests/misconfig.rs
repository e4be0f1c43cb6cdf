//! A misconfiguration is loud, not transient (docs/design.md §6):
//! a wrong password, an unknown ACL user, a user without permission to run
//! the script (NOPERM), a database index the server does not have and a
//! failed TLS handshake are errors with `is_transient() == false` that name
//! their cause — at connect time and on later decisions of a lazily
//! connected store (before the fix, the first decisions only "timed out").

mod common;

use slidelog_core::{Limit, Request, Store, StoreError};
use slidelog_redis::{ConnectError, RedisStore};
use slidelog_testkit::RedisServer;
use std::time::{Duration, Instant};

/// The per-call timeout of these stores.
const TIMEOUT: Duration = Duration::from_millis(100);

fn request() -> Request {
    Request::single("k", Limit::new(10, 60_000).unwrap()).unwrap()
}

/// Connects eagerly and expects a non-transient failure naming `cause`.
async fn refused_at_connect(url: &str, cause: &str) {
    let err = RedisStore::connect(url, common::options_with_timeout("mis", TIMEOUT))
        .await
        .expect_err("a misconfigured store does not connect");
    match &err {
        ConnectError::Connect {
            transient, reason, ..
        } => {
            assert!(!transient, "{url}: reported as transient: {err}");
            assert!(reason.contains(cause), "{url}: {reason:?} lacks {cause:?}");
        }
        other => panic!("{url}: unexpected {other:?}"),
    }
}

/// A lazily connected store: decisions fail, and within 2 s they fail with
/// a misconfiguration (not a timeout) that names `cause`.
async fn refused_on_decisions(url: &str, cause: &str) -> StoreError {
    let store =
        RedisStore::connect_lazy(url, common::options_with_timeout("mis", TIMEOUT)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let err = store.check(&request()).await.expect_err("no decision");
        if err.is_misconfiguration() {
            assert!(!err.is_transient());
            assert!(err.to_string().contains(cause), "{err}");
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "{url}: still {err} after 2 s, never a misconfiguration"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_wrong_password_is_not_transient() {
    let redis = RedisServer::start_with_args(&["--requirepass", "right"]);
    let url = format!("redis://:hunter2@{}", redis.addr());
    refused_at_connect(&url, "authentication failed").await;
    let err = refused_on_decisions(&url, "authentication failed").await;
    assert!(!err.to_string().contains("hunter2"), "password in {err}");
}

#[tokio::test]
async fn an_unknown_acl_user_is_not_transient() {
    let redis = RedisServer::start();
    let url = format!("redis://nobody:pw@{}", redis.addr());
    refused_at_connect(&url, "authentication failed").await;
    refused_on_decisions(&url, "authentication failed").await;
}

#[tokio::test]
async fn noperm_is_not_transient() {
    let redis = RedisServer::start();
    let mut admin = redis.client();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("pinger")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+ping")
        .arg("+select")
        .query::<()>(&mut admin)
        .unwrap();
    let url = format!("redis://pinger:pw@{}", redis.addr());
    // PING works, so the store connects; the script is refused.
    let store = RedisStore::connect(&url, common::options_with_timeout("noperm", TIMEOUT))
        .await
        .unwrap();
    let err = store.check(&request()).await.expect_err("NOPERM");
    assert!(err.is_misconfiguration(), "{err}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains("NOPERM"), "{err}");
}

#[tokio::test]
async fn a_missing_database_is_not_transient() {
    let redis = RedisServer::start();
    let url = format!("{}/99", redis.url());
    refused_at_connect(&url, "database index").await;
    refused_on_decisions(&url, "database index").await;
}

#[tokio::test]
async fn a_failed_tls_handshake_is_not_transient() {
    // A server whose certificate comes from a CA the client does not trust.
    let tls = common::tls_server(&[]);
    let url = format!("rediss://127.0.0.1:{}", tls.tls_port);
    refused_at_connect(&url, "TLS handshake failed").await;
    refused_on_decisions(&url, "TLS handshake failed").await;
}

#[tokio::test]
async fn a_store_that_is_down_stays_transient() {
    let port = slidelog_testkit::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let err = RedisStore::connect(&url, common::options_with_timeout("down", TIMEOUT))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::Connect {
                transient: true,
                ..
            }
        ),
        "{err}"
    );
}

//! A Sentinel group whose data servers require a password: the URL's
//! credentials reach the master the sentinels name, and a wrong password is
//! a clear error that never shows the password.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::SentinelStore;
use slidelog_testkit::SentinelGroup;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_urls_password_reaches_the_master() {
    let group = tokio::task::spawn_blocking(|| SentinelGroup::start_with_password("s3cret-pw"))
        .await
        .unwrap();
    let options = common::options_with_timeout("sentinel-auth", Duration::from_secs(2));
    let url = group.url();
    assert!(url.contains(":s3cret-pw@"), "{url}");
    let store = SentinelStore::connect_sentinel(&url, options.clone())
        .await
        .expect("connect with the password");
    let r = Request::single("k", Limit::new(1, 60_000).unwrap()).unwrap();
    assert!(store.check(&r).await.unwrap().allowed);
    assert!(!store.check(&r).await.unwrap().allowed);

    let wrong = url.replace("s3cret-pw", "wrong-pw");
    let err = SentinelStore::connect_sentinel(&wrong, options)
        .await
        .unwrap_err();
    common::assert_hides(&err, &["wrong-pw", "s3cret-pw"]);
}

//! A Redis Cluster that requires a password: the URL's credentials reach
//! every node (redirects and slot refreshes included), and a wrong password
//! is a clear error that never shows the password.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::ClusterStore;
use slidelog_testkit::RedisCluster;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_urls_password_reaches_every_node() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_password("s3cret-pw"))
        .await
        .unwrap();
    let options = common::options_with_timeout("cluster-auth", Duration::from_secs(2));
    let url = cluster.url();
    assert!(url.contains(":s3cret-pw@"), "{url}");
    let store = ClusterStore::connect_cluster(&url, options.clone())
        .await
        .expect("connect with the password");
    let limit = Limit::new(1, 60_000).unwrap();
    // Keys on every master.
    for i in 0..30 {
        let r = Request::single(format!("k{i}"), limit).unwrap();
        assert!(store.check(&r).await.unwrap().allowed);
        assert!(!store.check(&r).await.unwrap().allowed);
    }

    let wrong = url.replace("s3cret-pw", "wrong-pw");
    let err = ClusterStore::connect_cluster(&wrong, options)
        .await
        .unwrap_err();
    common::assert_hides(&err, &["wrong-pw", "s3cret-pw"]);
    assert!(err.to_string().contains("***"), "{err}");
}

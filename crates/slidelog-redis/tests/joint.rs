//! Joint decisions on Redis (docs/design.md §1 "One request, several
//! keys", §4.7): a user's limit and a route's limit decided as one request,
//! all or nothing, through the scripts (`check_all.lua`) and the module
//! (`SLIDELOG.CHECKALL`), on Redis, Valkey and Cluster (keys of one slot,
//! and of several: reservations on the scripts, record-then-refund on the
//! module).

mod common;

use slidelog_core::{Checks, Limit, Mode, Now, RefusedBy, Request, Store};
use slidelog_redis::{ClusterStore, Engine, RedisOptions, RedisStore, SentinelStore};
use slidelog_testkit::{
    RedisCluster, RedisServer, SentinelGroup, ServerKind, module_path, unique_prefix,
};
use std::time::Duration;

const MINUTE: u64 = 60_000;

fn user(key: &str) -> Request {
    Request::single(key, Limit::new(10, MINUTE).unwrap()).unwrap()
}

fn route(key: &str) -> Request {
    Request::single(key, Limit::new(3, MINUTE).unwrap()).unwrap()
}

/// The route admits 3 of 6 joint requests; the 3 it refuses are recorded
/// in neither key, so the user alone is admitted exactly 7 more times.
async fn user_and_route(store: &dyn Store, user_key: &str, route_key: &str) {
    let checks = Checks::new([user(user_key), route(route_key)]).unwrap();
    let mut admitted = 0;
    for i in 0..6 {
        let joint = store
            .decide_all(&checks, Mode::Record, Now::Server)
            .await
            .unwrap_or_else(|e| panic!("joint check {i}: {e}"));
        if joint.allowed {
            admitted += 1;
            assert!(joint.checks.iter().all(|d| d.decision.record.is_some()));
            continue;
        }
        assert_eq!(joint.refused_by, Some(RefusedBy { check: 1, limit: 0 }));
        // The user's own answer: it would admit, its count as if admitted.
        let own = &joint.checks[0].decision;
        assert!(
            own.allowed && own.count == 4 && own.record.is_none(),
            "{own:?}"
        );
        assert_eq!(joint.checks[1].decision.count, 3);
    }
    assert_eq!(admitted, 3);
    let mut more = 0;
    for _ in 0..10 {
        more += u32::from(store.check(&user(user_key)).await.unwrap().allowed);
    }
    assert_eq!(more, 7, "the user's log holds only the 3 admitted requests");
}

async fn standalone(kind: ServerKind, module: bool) -> (RedisStore, RedisServer) {
    let server = if module {
        RedisServer::start_with_module(kind, &[])
    } else {
        RedisServer::start_kind(kind)
    };
    let engine = if module { "module" } else { "script" };
    let url = format!("{}?engine={engine}", server.url());
    let store = RedisStore::connect(&url, common::options("joint"))
        .await
        .expect("connect");
    let expected = if module {
        Engine::Module
    } else {
        Engine::Script
    };
    assert_eq!(store.engine_in_use(), Some(expected));
    (store, server)
}

#[tokio::test]
async fn scripts_on_redis() {
    let (store, _server) = standalone(ServerKind::Redis, false).await;
    user_and_route(&store, "user:42", "path=/login").await;
}

#[tokio::test]
async fn scripts_on_valkey() {
    let (store, _server) = standalone(ServerKind::Valkey, false).await;
    user_and_route(&store, "user:42", "path=/login").await;
}

#[tokio::test]
async fn module_on_redis() {
    let (store, _server) = standalone(ServerKind::Redis, true).await;
    user_and_route(&store, "user:42", "path=/login").await;
}

#[tokio::test]
async fn module_on_valkey() {
    let (store, _server) = standalone(ServerKind::Valkey, true).await;
    user_and_route(&store, "user:42", "path=/login").await;
}

/// A key the module holds, in a joint decision of the scripts: the script
/// hands that key to `SLIDELOG.CHECK` within its own run, and a joint peek
/// records nothing on either representation.
#[tokio::test]
async fn scripts_hand_a_module_key_to_the_module_within_the_joint_run() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let options = common::options("joint-mixed");
    let module = RedisStore::connect(&format!("{}?engine=module", server.url()), options.clone())
        .await
        .unwrap();
    let scripts = RedisStore::connect(&format!("{}?engine=script", server.url()), options)
        .await
        .unwrap();
    // The route's key becomes a module log; the user's stays a sorted set.
    assert!(module.check(&route("r")).await.unwrap().allowed);
    let checks = Checks::new([user("u"), route("r")]).unwrap();
    let peek = scripts
        .decide_all(&checks, Mode::Peek, Now::Server)
        .await
        .unwrap();
    assert!(peek.allowed);
    assert_eq!(peek.checks[1].decision.count, 2);
    let mut admitted = 0;
    for _ in 0..4 {
        let joint = scripts
            .decide_all(&checks, Mode::Record, Now::Server)
            .await
            .unwrap();
        admitted += u32::from(joint.allowed);
    }
    assert_eq!(admitted, 2, "the route had one record of its 3");
    let user_count = scripts.peek(&user("u")).await.unwrap().count;
    assert_eq!(user_count, 3, "2 recorded, plus the peek's own unit");
}

/// The master of a Sentinel group: one call, as on a single server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_through_the_scripts_and_the_module() {
    let path = module_path().display().to_string();
    let group = tokio::task::spawn_blocking(move || {
        let load = ["--loadmodule", path.as_str()];
        SentinelGroup::start_with_server_args(&load, &load)
    })
    .await
    .unwrap();
    for engine in ["script", "module"] {
        let prefix = unique_prefix(&format!("joint-sentinel-{engine}"));
        let url = format!("{}?engine={engine}", group.url());
        let store = SentinelStore::connect_sentinel(&url, cluster_options(&prefix))
            .await
            .expect("connect");
        user_and_route(&store, "user:42", "path=/login").await;
    }
}

fn cluster_options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_keys_of_one_slot_through_the_scripts() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let prefix = unique_prefix("joint-cluster");
    let url = format!("{}?engine=script", cluster.url());
    let store = ClusterStore::connect_cluster(&url, cluster_options(&prefix))
        .await
        .unwrap();
    // One hash tag: both keys (and their weights keys) in one slot.
    user_and_route(&store, "{tenant7}:user:42", "{tenant7}:path=/login").await;
    // Over many slots and tags, every master serves some joint decisions.
    for i in 0..30 {
        let (u, r) = (format!("{{t{i}}}:u"), format!("{{t{i}}}:r"));
        let checks = Checks::new([user(&u), route(&r)]).unwrap();
        let joint = store
            .decide_all(&checks, Mode::Record, Now::Server)
            .await
            .unwrap();
        assert!(joint.allowed, "{i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_keys_of_one_slot_through_the_module() {
    let path = module_path();
    let cluster = tokio::task::spawn_blocking(move || {
        RedisCluster::start_with_node_args(3, 0, &|| {
            vec!["--loadmodule".into(), path.display().to_string()]
        })
    })
    .await
    .unwrap();
    let prefix = unique_prefix("joint-cluster-module");
    let url = format!("{}?engine=module", cluster.url());
    let store = ClusterStore::connect_cluster(&url, cluster_options(&prefix))
        .await
        .unwrap();
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    user_and_route(&store, "{tenant7}:user:42", "{tenant7}:path=/login").await;
}

/// The scenario with keys in two slots: reservations, then confirm or
/// cancel (docs/design.md §4.7); nothing is left pending afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_keys_of_several_slots_through_reservations() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let prefix = unique_prefix("joint-cross");
    let store = ClusterStore::connect_cluster(&cluster.url(), cluster_options(&prefix))
        .await
        .unwrap();
    let (u, r) = ("user:42", "path=/login");
    let slot = |k: &str| cluster.key_slot(&format!("{prefix}{k}"));
    assert_ne!(slot(u), slot(r), "the two keys must be in two slots");
    user_and_route(&store, u, r).await;
    let mut c = cluster.node(cluster.master_of_slot(slot(r))).client();
    let pending = slidelog_redis::keys::pending_key(format!("{prefix}{r}").as_bytes());
    let left: i64 = redis::cmd("ZCARD").arg(pending).query(&mut c).unwrap();
    assert_eq!(left, 0, "every reservation confirmed or cancelled");
}

/// The scenario with keys in two slots on the module engine: each slot
/// records, and a refused request's admitted slot is refunded its share
/// (docs/design.md §4.7), so the user's log holds only the admitted ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_keys_of_several_slots_on_the_module_record_then_refund() {
    let path = module_path();
    let cluster = tokio::task::spawn_blocking(move || {
        RedisCluster::start_with_node_args(3, 0, &|| {
            vec!["--loadmodule".into(), path.display().to_string()]
        })
    })
    .await
    .unwrap();
    let prefix = unique_prefix("joint-cross-module");
    let url = format!("{}?engine=module", cluster.url());
    let store = ClusterStore::connect_cluster(&url, cluster_options(&prefix))
        .await
        .unwrap();
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    let (u, r) = ("user:42", "path=/login");
    let slot = |k: &str| cluster.key_slot(&format!("{prefix}{k}"));
    assert_ne!(slot(u), slot(r), "the two keys must be in two slots");
    user_and_route(&store, u, r).await;
    // A joint peek across slots records nothing.
    let checks = Checks::new([user(u), route(r)]).unwrap();
    let peek = store
        .decide_all(&checks, Mode::Peek, Now::Server)
        .await
        .unwrap();
    assert_eq!(peek.refused_by, Some(RefusedBy { check: 0, limit: 0 }));
    assert!(peek.checks.iter().all(|d| d.decision.record.is_none()));
}

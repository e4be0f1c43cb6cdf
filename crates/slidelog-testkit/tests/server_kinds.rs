//! Each server kind starts the program it names, at the version the stores guide (docs/guide/stores.md)
//! says is tested (Redis 7.0, Valkey 8.1), and a Valkey cluster comes up
//! from the same harness as a Redis one.

use slidelog_testkit::{RedisCluster, RedisServer, ServerKind};

fn info_server(server: &RedisServer) -> String {
    let mut c = server.client();
    redis::cmd("INFO").arg("server").query(&mut c).unwrap()
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(str::trim)
}

#[test]
fn redis_is_redis_7_0() {
    let server = RedisServer::start_kind(ServerKind::Redis);
    assert_eq!(server.kind(), ServerKind::Redis);
    let info = info_server(&server);
    assert_eq!(field(&info, "valkey_version"), None, "{info}");
    let version = field(&info, "redis_version").expect("redis_version");
    assert!(
        version.starts_with("7.0."),
        "docs/guide/stores.md: tested with Redis 7.0, got {version}"
    );
}

#[test]
fn valkey_is_valkey_8_1() {
    let server = RedisServer::start_kind(ServerKind::Valkey);
    assert_eq!(server.kind(), ServerKind::Valkey);
    let info = info_server(&server);
    let version = field(&info, "valkey_version").expect("valkey_version: not a Valkey server");
    assert!(
        version.starts_with("8.1."),
        "docs/guide/stores.md: tested with Valkey 8.1, got {version}"
    );
}

#[test]
fn a_valkey_cluster_comes_up_from_the_same_harness() {
    let cluster = RedisCluster::start_kind_with(ServerKind::Valkey, 3, 0);
    assert_eq!(cluster.kind(), ServerKind::Valkey);
    assert_eq!(cluster.master_ports().len(), 3);
    let info = info_server(cluster.node(cluster.master_ports()[0]));
    assert!(field(&info, "valkey_version").is_some(), "{info}");
}

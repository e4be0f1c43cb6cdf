//! Credentials and TLS: `redis://:pass@…` against `requirepass`, an ACL user
//! `redis://user:pass@…`, wrong passwords (a non-transient error that never
//! shows the password), and `rediss://` against redis-server's TLS port with
//! a test CA made by the `openssl` command.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ConnectError, RedisOptions, RedisStore};
use slidelog_testkit::RedisServer;

fn request() -> Request {
    Request::single("k", Limit::new(1, 60_000).unwrap()).unwrap()
}

#[tokio::test]
async fn password_and_acl_user_in_the_url() {
    let server = RedisServer::start_with_args(&["--requirepass", "s3cret-pw"]);
    let port = server.port();
    let store = RedisStore::connect(
        &format!("redis://:s3cret-pw@127.0.0.1:{port}"),
        common::options("auth"),
    )
    .await
    .expect("requirepass");
    assert!(store.check(&request()).await.unwrap().allowed);

    let mut c = server.client();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "alice", "on", ">alice-pw", "~*", "&*", "+@all"])
        .query(&mut c)
        .unwrap();
    let alice = RedisStore::connect(
        &format!("redis://alice:alice-pw@127.0.0.1:{port}/0"),
        common::options("acl"),
    )
    .await
    .expect("ACL user");
    assert!(alice.check(&request()).await.unwrap().allowed);

    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{port}"),
        format!("redis://alice:wrong-pw@127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}"),
    ] {
        let e = match RedisStore::connect(&url, common::options("badauth")).await {
            Err(e) => e,
            // Without a password the connection opens; commands are refused.
            Ok(store) => {
                let e = store.check(&request()).await.unwrap_err();
                assert!(!e.is_transient(), "{e}");
                continue;
            }
        };
        let text = e.to_string();
        assert!(!text.contains("wrong-pw"), "{text}");
        assert!(
            matches!(
                e,
                ConnectError::Connect {
                    transient: false,
                    ..
                }
            ),
            "{text}"
        );
    }
}

#[tokio::test]
async fn rediss_over_tls_with_a_private_ca() {
    let tls = common::tls_server(&["--requirepass", "tls-pw"]);
    let (tls_port, ca) = (tls.tls_port, tls.ca_pem.clone());
    let tls_options = RedisOptions {
        tls_root_cert_pem: Some(ca),
        ..common::options("tls")
    };
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("rediss://:tls-pw@{host}:{tls_port}");
        let store = RedisStore::connect(&url, tls_options.clone())
            .await
            .expect("TLS");
        store.ping().await.unwrap();
        assert!(store.check(&request()).await.unwrap().allowed);
        assert!(!store.check(&request()).await.unwrap().allowed);
        store.reset("k").await.unwrap();
    }
    // Without trusting the CA the handshake fails, and says nothing of the password.
    let url = format!("rediss://:tls-pw@127.0.0.1:{tls_port}");
    let e = RedisStore::connect(&url, common::options("tls-untrusted"))
        .await
        .unwrap_err();
    common::assert_hides(&e, &["tls-pw"]);
    drop(tls);
}

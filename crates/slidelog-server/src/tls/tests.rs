//! Reloading: a renewal that does not load keeps the certificate served,
//! logged once; a good one replaces it.

use super::*;

fn certs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    slidelog_testkit::tls::make_test_certs(dir.path());
    dir
}

#[test]
fn a_renewal_that_does_not_load_keeps_the_served_certificate() {
    let (first, second) = (certs(), certs());
    let serving = tempfile::tempdir().unwrap();
    let (cert, key) = (serving.path().join("c"), serving.path().join("k"));
    std::fs::copy(first.path().join("server.crt"), &cert).unwrap();
    std::fs::copy(first.path().join("server.key"), &key).unwrap();
    let args = TlsArgs {
        tls_cert: Some(cert.clone()),
        tls_key: Some(key.clone()),
        tls_client_ca: None,
    };
    let tls = Tls::from_flags(&args, &metrics::NoopRecorder)
        .unwrap()
        .unwrap();
    let before = tls.0.loaded.lock().clone();
    let config = tls.0.http.load_full();

    // The second certificate with the first key: refused, once.
    std::fs::copy(second.path().join("server.crt"), &cert).unwrap();
    tls.reload();
    let error = tls.0.reload_error.lock().clone().expect("an error");
    assert!(error.starts_with("--tls-cert and --tls-key"), "{error}");
    assert_eq!(*tls.0.loaded.lock(), before);
    // A key that is no PEM: named, never quoted.
    std::fs::write(&key, "not a key at all").unwrap();
    tls.reload();
    let error = tls.0.reload_error.lock().clone().expect("an error");
    assert!(
        error.contains("--tls-key") && !error.contains("not a key"),
        "{error}"
    );
    assert_eq!(*tls.0.loaded.lock(), before);
    assert!(
        Arc::ptr_eq(&config, &tls.0.http.load_full()),
        "still served"
    );

    std::fs::copy(second.path().join("server.key"), &key).unwrap();
    tls.reload();
    assert!(tls.0.reload_error.lock().is_none());
    assert!(!Arc::ptr_eq(&config, &tls.0.http.load_full()), "replaced");
    assert_eq!(tls.0.grpc.load().alpn_protocols, [b"h2".to_vec()]);
    let loaded = tls.0.loaded.lock().clone();
    assert_eq!(
        loaded.cert,
        std::fs::read(second.path().join("server.crt")).unwrap()
    );
}

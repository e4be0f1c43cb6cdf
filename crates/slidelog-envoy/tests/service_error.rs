//! `ServiceError` says a store failure's cause once: its message
//! is the store error's, not the store error's message *and* the store error
//! again as its source, which every chain printer would print twice.

use slidelog_core::StoreError;
use slidelog_envoy::ServiceError;
use std::error::Error as _;

/// The messages of `e` and of its sources, outermost first, on one line.
fn chain(e: &ServiceError) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        line.push_str(": ");
        line.push_str(&c.to_string());
        cause = c.source();
    }
    line
}

#[test]
fn a_store_failure_is_said_once_in_the_chain_and_in_the_status() {
    let store = StoreError::Unavailable("Connection refused (os error 111)".into());
    let e = ServiceError::from(store.clone());
    // The message the JSON endpoint's 503 body and the gRPC status carry.
    assert_eq!(e.to_string(), store.to_string());
    let line = chain(&e);
    assert_eq!(line.matches("Connection refused").count(), 1, "{line}");
    let status = tonic::Status::from(ServiceError::from(store));
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(status.message().matches("Connection refused").count(), 1);
}

//! The generated protocol types: `envoy.service.ratelimit.v3` (request,
//! response, `RateLimitService` server and client) and the messages it uses.
//! Google's well-known types map to `prost_types`.
#![allow(missing_docs, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/envoy_protos.rs"));

/// The encoded `FileDescriptorSet` of `proto/` (with its imports), for tools
/// and for the test that compares it with Envoy's published descriptors.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/rls_descriptor.bin"));

pub use envoy::config::core::v3::HeaderValue;
pub use envoy::extensions::common::ratelimit::v3::{RateLimitDescriptor, rate_limit_descriptor};
pub use envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse, rate_limit_response,
    rate_limit_service_client::RateLimitServiceClient,
    rate_limit_service_server::{RateLimitService, RateLimitServiceServer},
};
pub use envoy::r#type::v3::RateLimitUnit;

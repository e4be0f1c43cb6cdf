//! The multi-host store URLs of Redis Cluster and Sentinel: parsed by the one
//! store-URL model, [`slidelog_core::url`], re-exported here for the stores
//! that connect with them.

pub use slidelog_core::url::MultiHostUrl;

//! The shared behavioural suite (docs/design.md §1–§2) over the memory store.

use slidelog_core::Store;
use slidelog_memory::MemoryStore;
use std::sync::Arc;

slidelog_testkit::store_suite!(|| async { (Arc::new(MemoryStore::new()) as Arc<dyn Store>, ()) });

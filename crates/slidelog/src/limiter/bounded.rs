//! The bounded store call: every store call of a [`Limiter`](crate::Limiter)
//! runs under its timeout, so a store never hangs a caller (docs/design.md
//! §6). The only timeout between a transport and the store.

use slidelog_core::StoreError;
use std::future::Future;
use std::time::Duration;

/// The time a store call may take: `None` for a store in this process's
/// memory, which answers in microseconds without I/O (a timer would only
/// add overhead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallBound(pub(crate) Option<Duration>);

impl CallBound {
    /// Runs `call` under the bound; past it the call is dropped and answers
    /// [`StoreError::Timeout`].
    pub(crate) async fn run<T>(
        self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.0 {
            None => call.await,
            Some(limit) => tokio::time::timeout(limit, call)
                .await
                .unwrap_or(Err(StoreError::Timeout(limit))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_past_the_bound_is_a_timeout_and_no_bound_waits() {
        let slow = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok::<_, StoreError>(1)
        };
        let bound = CallBound(Some(Duration::from_millis(10)));
        assert_eq!(
            bound.run(slow).await,
            Err(StoreError::Timeout(Duration::from_millis(10)))
        );
        assert_eq!(CallBound(None).run(async { Ok(2) }).await, Ok(2));
    }
}

//! Retry backoff for watch streams that does not reset on `Init`.
//!
//! Responsibility: [`WatchBackoff::retry_backoff`] — after a watch error, wait before polling
//! the watcher again: 800 ms, doubling to 30 s (kube-runtime's default delays), back to no
//! delay after an event that shows the watch works (anything but `Init`). kube-runtime's own
//! `default_backoff` resets on *any* `Ok` item, and its watcher announces every relist with
//! `Ok(Init)` before the list request: so a watch that keeps failing (a 403 from missing RBAC,
//! a kind that is not served) was retried every 800 ms forever — steady polling of the API
//! server by a broken watch. Here `Init` leaves the delay as it is.
//! Inputs: a watcher stream. Outputs: the same items, with pauses after errors.

use std::time::Duration;

use futures::{Stream, StreamExt, stream};
use kube::runtime::watcher;

/// The first pause after an error.
pub const INITIAL_DELAY: Duration = Duration::from_millis(800);
/// The longest pause.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

/// The pause after `errors` errors in a row (1 → [`INITIAL_DELAY`]).
#[must_use]
pub fn delay_after(errors: u32) -> Duration {
    let doublings = errors.saturating_sub(1).min(16);
    INITIAL_DELAY
        .saturating_mul(1_u32 << doublings)
        .min(MAX_DELAY)
}

/// [`WatchBackoff::retry_backoff`] for watcher streams.
pub trait WatchBackoff<K>:
    Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized
{
    /// The stream with a pause after each error (see the module docs).
    fn retry_backoff(self) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
    where
        Self: Send + 'static,
        K: Send + 'static,
    {
        // (the stream, errors in a row, whether the last item was an error)
        stream::unfold(
            (Box::pin(self), 0_u32, false),
            |(mut inner, errors, after_error)| async move {
                if after_error {
                    tokio::time::sleep(delay_after(errors)).await;
                }
                let item = inner.next().await?;
                let errors = match &item {
                    Err(_) => errors.saturating_add(1),
                    Ok(watcher::Event::Init) => errors,
                    Ok(_) => 0,
                };
                let after_error = item.is_err();
                Some((item, (inner, errors, after_error)))
            },
        )
    }
}

impl<K, S> WatchBackoff<K> for S where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized
{
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn delays_double_from_800_ms_to_30_s() {
        let ms: Vec<u128> = (1..=8).map(|n| delay_after(n).as_millis()).collect();
        assert_eq!(
            ms,
            [800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000]
        );
        assert_eq!(delay_after(u32::MAX), MAX_DELAY);
    }

    /// A watch that always fails the same way kube-runtime's does: `Init`, then the error.
    fn failing(
        polls: Arc<AtomicU32>,
    ) -> impl Stream<Item = Result<watcher::Event<()>, watcher::Error>> {
        stream::iter(0..).flat_map(move |_| {
            polls.fetch_add(1, Ordering::Relaxed);
            stream::iter([
                Ok(watcher::Event::Init),
                Err(watcher::Error::NoResourceVersion),
            ])
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_that_keeps_failing_is_retried_ever_more_slowly_despite_init() {
        let polls = Arc::new(AtomicU32::new(0));
        let s = failing(polls.clone()).retry_backoff();
        let task = tokio::spawn(s.for_each(|_| async {}));
        tokio::time::sleep(Duration::from_secs(120)).await;
        let attempts = polls.load(Ordering::Relaxed);
        // 0.8 + 1.6 + 3.2 + 6.4 + 12.8 + 25.6 + 30 + 30 = 110.4 s: 9 attempts in two minutes
        // (kube-runtime's default_backoff, reset by every Init, retries about every 800 ms).
        assert!((8..=10).contains(&attempts), "{attempts} attempts");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_after_errors_resets_the_delay() {
        let items = vec![
            Err(watcher::Error::NoResourceVersion),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::InitDone),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::<()>::InitDone),
        ];
        let start = tokio::time::Instant::now();
        let mut s = std::pin::pin!(stream::iter(items).retry_backoff());
        let mut at = Vec::new();
        while s.next().await.is_some() {
            at.push(start.elapsed().as_millis());
        }
        // Errors at 0 and 800 ms, the event after 1.6 s more, then the next error without
        // pause and the last event 800 ms after it.
        assert_eq!(at, [0, 800, 2_400, 2_400, 3_200]);
    }
}

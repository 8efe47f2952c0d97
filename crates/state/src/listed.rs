//! A store's first list as a flag any number of tasks can wait on or check.
//!
//! Responsibility: [`listed`] spawns one task that awaits `Store::wait_until_ready` and
//! publishes the outcome on a `tokio::sync::watch` channel. kube-runtime's readiness future
//! keeps only the waker of the task that polled it last, so two tasks waiting at once (or a
//! `now_or_never` check, which polls with a no-op waker) can leave a waiter asleep after the
//! store is ready — seen as a cache that "synced" exactly at its 60 s timeout. Only the one
//! task here ever waits on the store.
//! Inputs: a reflector `Store`. Outputs: a `watch::Receiver<Option<bool>>` (`None`: not
//! listed yet; `Some(true)`: listed; `Some(false)`: the watch ended first).

use kube::runtime::reflector::Store;
use tokio::sync::watch;

/// The first-list flag of `store` (see the module docs).
#[must_use]
pub fn listed<K>(store: &Store<K>) -> watch::Receiver<Option<bool>>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Send + Sync,
{
    let (tx, rx) = watch::channel(None);
    let store = store.clone();
    tokio::spawn(async move {
        // The one waiter of this store's readiness (see the module docs).
        #[allow(clippy::disallowed_methods)]
        let outcome = store.wait_until_ready().await.is_ok();
        tx.send_replace(Some(outcome));
    });
    rx
}

/// Whether the flag says listed, without waiting.
#[must_use]
pub fn is_listed(flag: &watch::Receiver<Option<bool>>) -> bool {
    *flag.borrow() == Some(true)
}

/// Waits for the flag; `Err(())` when the watch ended before its first list.
///
/// # Errors
/// The watch ended first.
pub async fn wait_listed(flag: &watch::Receiver<Option<bool>>) -> Result<(), ()> {
    let mut flag = flag.clone();
    match flag.wait_for(Option::is_some).await.map(|v| *v) {
        Ok(Some(true)) => Ok(()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    /// Many tasks waiting at once, and checks in between, all see the first list.
    #[tokio::test]
    async fn every_concurrent_waiter_wakes_when_the_store_lists() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let flag = listed(&store);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let flag = flag.clone();
                tokio::spawn(async move { wait_listed(&flag).await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!is_listed(&flag));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for w in waiters {
            let outcome = tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("a waiter was never woken")
                .unwrap();
            assert_eq!(outcome, Ok(()));
        }
        assert!(is_listed(&flag));
    }
}

//! Liveness of the long-running tasks, for `/healthz`.
//!
//! Responsibility: [`Liveness`], a shared registry of named tasks (controllers, watches, the
//! HTTP servers) that must run as long as the process does. Each is registered with its
//! [`AbortHandle`]; a task whose future has finished — it returned, panicked or was aborted —
//! is dead, and [`Liveness::check`] names every dead task, so `/healthz` fails and the kubelet
//! restarts the container instead of leaving a controller that silently stopped working.
//! Tasks that end by design (a one-off wait) are simply not registered.
//!
//! Inputs: task names and handles. Outputs: `Ok(())` while all run, else `Err(message)`.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::{AbortHandle, JoinHandle};

/// A shared registry of tasks that must not end (cheap to clone: one registry).
#[derive(Debug, Clone, Default)]
pub struct Liveness(Arc<Mutex<Vec<(String, AbortHandle)>>>);

impl Liveness {
    /// A registry with no tasks.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Watches the task of `handle` under `name` (names need not be unique).
    pub fn watch(&self, name: impl Into<String>, handle: AbortHandle) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.into(), handle));
    }

    /// Watches every `(name, handle)` of `tasks`.
    pub fn watch_all(&self, tasks: impl IntoIterator<Item = (String, AbortHandle)>) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.extend(tasks);
    }

    /// Spawns `task` on the current runtime and watches it under `name`.
    pub fn spawn<F>(&self, name: impl Into<String>, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(task);
        self.watch(name, handle.abort_handle());
        handle
    }

    /// How many tasks are watched.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no task is watched.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names of the tasks that have ended, in registration order.
    #[must_use]
    pub fn dead(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, handle)| handle.is_finished())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `Ok(())` while every watched task runs, else `Err` naming the ones that ended.
    ///
    /// # Errors
    /// `tasks stopped: NAME, NAME` when any watched task has ended.
    pub fn check(&self) -> Result<(), String> {
        let dead = self.dead();
        if dead.is_empty() {
            Ok(())
        } else {
            Err(format!("tasks stopped: {}", dead.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_returns_panics_or_is_aborted_is_named() {
        let live = Liveness::new();
        assert!(live.is_empty());
        let forever = live.spawn("forever", std::future::pending());
        let returns = live.spawn("returns", async {});
        let panics = live.spawn("panics", async { panic!("boom") });
        let aborted = live.spawn("aborted", std::future::pending());
        assert_eq!(live.len(), 4);
        returns.await.unwrap();
        assert!(panics.await.unwrap_err().is_panic());
        aborted.abort();
        assert!(aborted.await.unwrap_err().is_cancelled());
        assert_eq!(live.dead(), ["returns", "panics", "aborted"]);
        assert_eq!(
            live.check(),
            Err("tasks stopped: returns, panics, aborted".to_owned())
        );
        assert!(!forever.is_finished());
    }

    #[tokio::test]
    async fn running_tasks_are_healthy() {
        let live = Liveness::new();
        assert_eq!(live.check(), Ok(()));
        let other = live.clone();
        let _a = other.spawn("a", std::future::pending());
        let b = tokio::spawn(std::future::pending::<()>());
        live.watch_all([("b".to_owned(), b.abort_handle())]);
        assert_eq!(live.len(), 2);
        assert_eq!(live.check(), Ok(()));
        b.abort();
        let _ = b.await;
        assert_eq!(live.check(), Err("tasks stopped: b".to_owned()));
    }
}

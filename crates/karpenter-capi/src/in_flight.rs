//! A bound on the API requests one client has outstanding.
//!
//! Responsibility: [`InFlightLimit`], a tower layer for kube's client stack that lets at most
//! `max` requests of one client be outstanding at once. A request counts from its start until
//! its response body has been read to the end or dropped, not only until the response head
//! arrives: kube-rs speaks HTTP/1.1 (no HTTP/2 multiplexing, unlike client-go), so every
//! outstanding request holds a connection of its own with its buffers, and the body is where a
//! response's bytes are. Without the bound, the first provisioning loop of `bench e2e` (140
//! launches at once) kept over a hundred connections open at once, with their buffers, at the
//! controller's memory peak. A watch waits for a slot to start, as every request does, but does
//! not keep it: it streams for as long as it lives.
//!
//! Requests wait in order: the slot is taken in `poll_ready`, which kube's buffer worker polls
//! before each call (as [`crate::rate_limit`]'s token).
//!
//! Inputs: `max`. Outputs: a layer; response bodies that let their slot go when done.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The layer: each service it builds has its own slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightLimit {
    /// Requests outstanding at once (at least 1).
    pub max: usize,
}

impl InFlightLimit {
    /// The controller's clients' bound.
    pub const DEFAULT: InFlightLimit = InFlightLimit { max: 32 };
}

impl<S> tower::Layer<S> for InFlightLimit {
    type Service = InFlightLimited<S>;

    fn layer(&self, inner: S) -> InFlightLimited<S> {
        InFlightLimited {
            inner,
            slots: Arc::new(Semaphore::new(self.max.max(1))),
            waiting: None,
            slot: None,
        }
    }
}

type Acquiring =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send>>;

/// A service whose requests each hold a slot (see [`InFlightLimit`]).
pub struct InFlightLimited<S> {
    inner: S,
    slots: Arc<Semaphore>,
    /// The wait for a slot, while there is none.
    waiting: Option<Acquiring>,
    /// The slot taken for the next call.
    slot: Option<OwnedSemaphorePermit>,
}

impl<S> std::fmt::Debug for InFlightLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightLimited")
            .field("free", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

/// Whether a request is a watch (`watch=true` or `watch=1` in its query), which streams for
/// as long as it lives.
fn is_watch<B>(req: &http::Request<B>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1"))
    })
}

impl<S, B, RB> tower::Service<http::Request<B>> for InFlightLimited<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Slotted<RB>>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if self.slot.is_none() {
            let slots = &self.slots;
            let waiting = self
                .waiting
                .get_or_insert_with(|| Box::pin(Arc::clone(slots).acquire_owned()));
            match waiting.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(slot) => {
                    self.waiting = None;
                    // The semaphore is never closed: an error cannot happen (and would only
                    // let the request go unbounded).
                    self.slot = slot.ok();
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // Callers poll readiness first (tower's contract); the slot was taken there.
        let slot = self.slot.take().filter(|_| !is_watch(&req));
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Slotted { body, slot }))
        })
    }
}

/// A response body that holds its request's slot until it has been read to the end or is
/// dropped.
#[derive(Debug)]
pub struct Slotted<B> {
    body: B,
    slot: Option<OwnedSemaphorePermit>,
}

impl<B> http_body::Body for Slotted<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) {
            this.slot = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::VecDeque;
    use tower::{Layer as _, Service as _, ServiceExt as _};

    /// A body of the given chunks, then its end.
    #[derive(Debug)]
    struct Chunks(VecDeque<&'static [u8]>);

    impl http_body::Body for Chunks {
        type Data = &'static [u8];
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<&'static [u8]>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
        }
    }

    /// Answers at once with a one-chunk body.
    struct Answer;

    impl tower::Service<http::Request<()>> for Answer {
        type Response = http::Response<Chunks>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(Chunks(VecDeque::from([
                &b"{}"[..],
            ])))))
        }
    }

    /// Reads a body to its end.
    async fn read_all<B: http_body::Body + Unpin>(mut body: B) -> Vec<u8>
    where
        B::Data: AsRef<[u8]>,
        B::Error: std::fmt::Debug,
    {
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            if let Ok(data) = frame.unwrap().into_data() {
                out.extend_from_slice(data.as_ref());
            }
        }
        out
    }

    fn get(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).unwrap()
    }

    fn ready_now<S: tower::Service<http::Request<()>>>(s: &mut S) -> bool {
        let waker = futures::task::noop_waker();
        matches!(
            s.poll_ready(&mut Context::from_waker(&waker)),
            Poll::Ready(Ok(()))
        )
    }

    #[tokio::test]
    async fn a_slot_is_held_until_the_body_is_read_or_dropped() {
        let mut s = InFlightLimit { max: 2 }.layer(Answer);
        s.ready().await.unwrap();
        let first = s.call(get("/api/v1/pods")).await.unwrap();
        s.ready().await.unwrap();
        let second = s.call(get("/api/v1/nodes")).await.unwrap();
        // Both answers arrived, but their bodies are unread: no third request may start.
        assert!(!ready_now(&mut s));
        // Reading a body to its end gives its slot back.
        assert_eq!(read_all(first.into_body()).await, b"{}");
        assert!(ready_now(&mut s));
        let third = s.call(get("/api/v1/nodes")).await.unwrap();
        assert!(!ready_now(&mut s));
        // Dropping an unread body gives its slot back too.
        drop(second);
        assert!(ready_now(&mut s));
        drop(third);
    }

    #[tokio::test]
    async fn a_watch_waits_for_a_slot_to_start_but_does_not_keep_it() {
        let mut s = InFlightLimit { max: 1 }.layer(Answer);
        s.ready().await.unwrap();
        let watch = s
            .call(get("/api/v1/pods?watch=true&resourceVersion=1"))
            .await
            .unwrap();
        // The watch streams on; other requests are not held up by it.
        assert!(ready_now(&mut s));
        let list = s.call(get("/api/v1/pods?watchx=true")).await.unwrap();
        assert!(!ready_now(&mut s), "not a watch: it keeps its slot");
        drop(list);
        assert!(ready_now(&mut s));
        drop(watch);
    }

    #[test]
    fn watches_are_told_by_their_query() {
        assert!(is_watch(&get("/api/v1/pods?watch=true")));
        assert!(is_watch(&get("/api/v1/pods?resourceVersion=5&watch=1")));
        assert!(!is_watch(&get("/api/v1/pods?watch=false")));
        assert!(!is_watch(&get("/api/v1/pods")));
        assert!(!is_watch(&get("/api/v1/namespaces/watch=true/pods")));
    }
}

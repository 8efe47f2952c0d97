//! Client-side rate limiting of API requests: `--kube-client-qps` and `--kube-client-burst`.
//!
//! Responsibility: [`RateLimit`], a tower layer for kube's client stack that makes every
//! request (reads, writes, and the start of each watch) take a token from a token bucket — as
//! client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`, which upstream Karpenter
//! configures with `KUBE_CLIENT_QPS` (200) and `KUBE_CLIENT_BURST` (300): the bucket holds at
//! most `burst` tokens and refills at `qps` per second; a request without a token waits. kube-rs
//! has no limiter of its own. Each client built with the layer gets its own bucket (the
//! workload and the management client are limited separately, as upstream's two clients).
//!
//! The wait happens in `poll_ready`: kube's client drives its stack through a buffer whose
//! worker polls readiness before each call, so requests wait in order and a watch only waits
//! to start, never while it streams.
//!
//! Inputs: `qps`, `burst`. Outputs: a layer; [`Bucket`] is the pure arithmetic.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A token bucket: at most `burst` tokens, refilled at `qps` per second.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket at `now`. `qps` must be positive and `burst` at least 1 (the flags check).
    #[must_use]
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now`: `None` when one was there, else how long until one will be
    /// (nothing is taken then; ask again after the wait).
    pub fn take(&mut self, now: Instant) -> Option<Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = self.last.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The layer: each service it builds has its own [`Bucket`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests per second, sustained (at least 1).
    pub qps: u32,
    /// Requests allowed at once above the sustained rate.
    pub burst: u32,
}

impl RateLimit {
    /// Upstream Karpenter's defaults (`KUBE_CLIENT_QPS=200`, `KUBE_CLIENT_BURST=300`).
    pub const DEFAULT: RateLimit = RateLimit {
        qps: 200,
        burst: 300,
    };
}

impl<S> tower::Layer<S> for RateLimit {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: Bucket::new(f64::from(self.qps.max(1)), self.burst, Instant::now()),
            wait: None,
            permitted: false,
        }
    }
}

/// A service whose calls each take a token (see [`RateLimit`]).
#[derive(Debug)]
pub struct RateLimited<S> {
    inner: S,
    bucket: Bucket,
    wait: Option<Pin<Box<Sleep>>>,
    /// A token was taken for the next call.
    permitted: bool,
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.permitted {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            match self.bucket.take(Instant::now()) {
                None => self.permitted = true,
                Some(delay) => self.wait = Some(Box::pin(tokio::time::sleep(delay))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        // Callers poll readiness first (tower's contract); the token was taken there.
        self.permitted = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer as _, Service as _};

    /// Answers each request with itself.
    struct Echo;

    impl tower::Service<u32> for Echo {
        type Response = u32;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<u32, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, n: u32) -> Self::Future {
            std::future::ready(Ok(n))
        }
    }

    #[test]
    fn a_full_bucket_serves_the_burst_then_refills_at_qps() {
        let start = Instant::now();
        let mut b = Bucket::new(10.0, 3, start);
        assert_eq!(b.take(start), None);
        assert_eq!(b.take(start), None);
        assert_eq!(b.take(start), None);
        let wait = b.take(start).unwrap();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // Half a token later: half the wait.
        let wait = b.take(start + Duration::from_millis(50)).unwrap();
        assert!((wait.as_secs_f64() - 0.05).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.take(start + Duration::from_millis(100)), None);
        // A long pause refills only up to the burst.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(later), None);
        }
        assert!(b.take(later).is_some());
    }

    /// The service: `burst` calls are ready at once; the next becomes ready only once a token
    /// refilled (tokio's paused clock, advanced by hand).
    #[tokio::test(start_paused = true)]
    async fn the_service_waits_for_a_token_before_each_call() {
        let limit = RateLimit { qps: 2, burst: 2 };
        let mut svc = limit.layer(Echo);
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for n in 0..2 {
            assert!(svc.poll_ready(&mut cx).is_ready());
            assert_eq!(svc.call(n).await, Ok(n));
        }
        assert!(svc.poll_ready(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(499)).await;
        assert!(svc.poll_ready(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(svc.poll_ready(&mut cx).is_ready());
        assert_eq!(svc.call(7).await, Ok(7));
        // Readiness polled twice takes one token only.
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(svc.poll_ready(&mut cx).is_ready());
        assert!(svc.poll_ready(&mut cx).is_ready());
        assert_eq!(svc.call(8).await, Ok(8));
        assert!(svc.poll_ready(&mut cx).is_pending());
    }
}

//! The threads reviews are evaluated on, off the async workers: a slow evaluation then
//! holds up neither the other connections of its worker nor the timeout answer at the
//! review's deadline, and a panic costs one request.
//!
//! Tokio's blocking pool would do the same, but it wakes its idle threads in the order
//! they went idle, so consecutive reviews run on different threads. Each of them keeps its
//! own allocator heap and stack, and a review allocates and frees hundreds of small
//! values: spread over four threads, each review finds its heap cold in the cache. This
//! pool wakes the thread that went idle last, so at any rate below saturation one thread
//! answers nearly every review with its heap warm, and more threads start (up to the
//! limit) only while reviews overlap, which keeps a slow review from holding up the rest.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, Thread};

use tokio::sync::oneshot;

/// A job computes its result, calls the function it is given (its thread is then free
/// for the next job), and only then hands the result over. So a caller that submits its
/// next job as soon as it has a result finds the same thread at the top of the idle stack.
type Job = Box<dyn FnOnce(&dyn Fn()) + Send>;

/// A fixed upper number of evaluation threads, started as reviews overlap, each woken
/// last-idle-first.
#[derive(Debug)]
pub struct EvaluationPool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<PoolState>,
    max_threads: usize,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    /// The threads waiting for work, the one that went idle last at the end.
    idle: Vec<Thread>,
    /// Threads in `park` (or on their way to it); the rest are running a job.
    parked: usize,
    started: usize,
    /// Set when the pool is dropped: its threads end once the queue is empty.
    closed: bool,
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PoolState")
            .field("queued", &self.queue.len())
            .field("idle", &self.idle.len())
            .field("parked", &self.parked)
            .field("started", &self.started)
            .field("closed", &self.closed)
            .finish()
    }
}

/// Why a job gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobFailed {
    #[error("panicked: {0}")]
    Panicked(String),
    #[error("no evaluation thread could be started: {0}")]
    NoThread(String),
}

impl EvaluationPool {
    /// A pool of at most `max_threads` threads (at least one); none is started yet.
    pub fn new(max_threads: usize) -> EvaluationPool {
        EvaluationPool {
            shared: Arc::new(Shared {
                state: Mutex::new(PoolState::default()),
                max_threads: max_threads.max(1),
            }),
        }
    }

    /// The pool the server's reviews run on, sized to the cores this process may use
    /// (twice as many threads, at least four, so that reviews stuck in slow policies
    /// leave threads for the rest).
    pub fn global() -> &'static EvaluationPool {
        static POOL: OnceLock<EvaluationPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let cores = thread::available_parallelism().map_or(2, usize::from);
            EvaluationPool::new((2 * cores).max(4))
        })
    }

    /// Runs `work` on one of the pool's threads and gives its result, or why there is none.
    pub async fn run<T, F>(&self, work: F) -> Result<T, JobFailed>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        self.submit(Box::new(move |finished: &dyn Fn()| {
            let result = panic::catch_unwind(AssertUnwindSafe(work));
            finished();
            // The caller may have stopped waiting (its deadline passed): nothing to tell.
            let _ = sender.send(result.map_err(|payload| panic_message(&*payload)));
        }))?;
        match receiver.await {
            Ok(result) => result.map_err(JobFailed::Panicked),
            // Jobs are only dropped unrun when no thread could be started.
            Err(_) => Err(JobFailed::NoThread("the job was dropped unrun".into())),
        }
    }

    fn submit(&self, job: Job) -> Result<(), JobFailed> {
        let mut state = self.shared.lock();
        state.queue.push_back(job);
        if let Some(idle) = state.idle.pop() {
            drop(state);
            idle.unpark();
            return Ok(());
        }
        if state.started >= self.shared.max_threads {
            // Every thread is busy; the first to finish takes the job.
            return Ok(());
        }
        state.started += 1;
        let started = state.started;
        drop(state);
        let shared = Arc::clone(&self.shared);
        let spawned = thread::Builder::new()
            .name(format!("graft-eval-{started}"))
            .spawn(move || shared.work());
        if let Err(error) = spawned {
            let mut state = self.shared.lock();
            state.started -= 1;
            if state.started == 0 {
                // No thread would ever run them: their callers get an error now.
                state.queue.clear();
                return Err(JobFailed::NoThread(error.to_string()));
            }
        }
        Ok(())
    }
}

impl Drop for EvaluationPool {
    fn drop(&mut self) {
        let idle = {
            let mut state = self.shared.lock();
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        for thread in idle {
            thread.unpark();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A job never runs under the lock, so a poisoned lock still holds a whole state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A thread's life: take the oldest queued job, or wait at the top of the idle stack.
    fn work(&self) {
        let me = thread::current();
        let finished = || Self::go_idle(&mut self.lock(), &me);
        loop {
            let job = {
                let mut state = self.lock();
                loop {
                    if let Some(job) = state.queue.pop_front() {
                        // Woken spuriously, or still listed since its last job: off the
                        // idle stack either way.
                        state.idle.retain(|idle| idle.id() != me.id());
                        break job;
                    }
                    if state.closed {
                        return;
                    }
                    Self::go_idle(&mut state, &me);
                    state.parked += 1;
                    drop(state);
                    // A submitter that popped this thread has unparked it (perhaps
                    // before this call, which then returns at once).
                    thread::park();
                    state = self.lock();
                    state.parked -= 1;
                }
            };
            job(&finished);
        }
    }

    /// Lists `me` at the top of the idle stack, unless it is listed already.
    fn go_idle(state: &mut PoolState, me: &Thread) {
        if !state.idle.iter().any(|idle| idle.id() == me.id()) {
            state.idle.push(me.clone());
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn gives_the_result_and_turns_a_panic_into_an_error() {
        let pool = EvaluationPool::new(2);
        runtime().block_on(async {
            assert_eq!(pool.run(|| 7).await, Ok(7));
            let failed: Result<u8, _> = pool.run(|| panic!("engine bug")).await;
            assert_eq!(failed, Err(JobFailed::Panicked("engine bug".into())));
            let formatted: Result<u8, _> = pool.run(|| panic!("bug {}", 2)).await;
            assert_eq!(formatted, Err(JobFailed::Panicked("bug 2".into())));
            // The thread that caught the panic still serves.
            assert_eq!(pool.run(|| 8).await, Ok(8));
        });
    }

    #[test]
    fn consecutive_jobs_run_on_the_thread_that_went_idle_last() {
        let pool = EvaluationPool::new(4);
        runtime().block_on(async {
            // Two overlapping jobs start two threads.
            let barrier = Arc::new(Barrier::new(2));
            let (first, second) = {
                let (a, b) = (Arc::clone(&barrier), Arc::clone(&barrier));
                tokio::join!(
                    pool.run(move || {
                        a.wait();
                        thread::current().id()
                    }),
                    pool.run(move || {
                        b.wait();
                        thread::current().id()
                    })
                )
            };
            let (first, second) = (first.expect("first"), second.expect("second"));
            assert_ne!(first, second);
            // A thread is listed as idle before it hands its result over.
            assert_eq!(pool.shared.lock().idle.len(), 2);
            // A thread still on its way to `park` would take a queued job itself (it is
            // as warm as any): wait until neither is, so the order below is the stack's.
            while pool.shared.lock().parked < 2 {
                thread::yield_now();
            }
            let last_idle = pool.shared.lock().idle.last().map(Thread::id);
            for _ in 0..20 {
                let ran_on = pool.run(|| thread::current().id()).await.expect("run");
                assert_eq!(Some(ran_on), last_idle);
            }
            assert_eq!(pool.shared.lock().started, 2);
        });
    }

    #[test]
    fn never_starts_more_threads_than_its_limit_and_runs_every_job() {
        let pool = EvaluationPool::new(3);
        runtime().block_on(async {
            let jobs = (0..64).map(|n| {
                pool.run(move || {
                    thread::sleep(std::time::Duration::from_micros(200));
                    (n, thread::current().id())
                })
            });
            let results = futures::future::join_all(jobs).await;
            let mut threads: Vec<_> = results
                .iter()
                .map(|result| result.as_ref().expect("ran").1)
                .collect();
            threads.sort_by_key(|id| format!("{id:?}"));
            threads.dedup();
            assert!(threads.len() <= 3, "{} threads", threads.len());
            let numbers: Vec<_> = results.into_iter().map(|r| r.expect("ran").0).collect();
            assert_eq!(numbers, (0..64).collect::<Vec<_>>());
            assert!(pool.shared.lock().started <= 3);
        });
    }

    #[test]
    fn a_dropped_pool_ends_its_threads_after_their_jobs() {
        let pool = EvaluationPool::new(2);
        let shared = Arc::clone(&pool.shared);
        runtime().block_on(async {
            assert_eq!(pool.run(|| 1).await, Ok(1));
        });
        drop(pool);
        // Each thread holds the shared state while it lives.
        let weak = Arc::downgrade(&shared);
        drop(shared);
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while weak.strong_count() > 0 {
            assert!(
                std::time::Instant::now() < give_up,
                "a thread outlived its pool"
            );
            thread::yield_now();
        }
    }
}

//! The threads reviews are evaluated on, off the async workers: a slow evaluation then
//! holds up neither the other connections of its worker nor the timeout answer at the
//! review's deadline, and a panic costs one request.
//!
//! Tokio's blocking pool would do the same, but it wakes its idle threads in the order
//! they went idle: the thread woken for a review is the one that has slept longest, so
//! each review pays for a real wake-up and a switch to that thread. This pool wakes the
//! thread that went idle last. Under load that thread has often not gone to sleep yet (it
//! lists itself as idle before it hands its previous result over), so it takes the next
//! review without sleeping: at the maximum rate, 0.85 context switches per review against
//! 1.4, and 0.5–0.6 once the threads are batch threads (below; BENCHMARKS.md). While reviews do not overlap, one thread answers them all, with
//! its allocator heap and stack warm; more threads start (up to the limit) only while
//! reviews overlap, which keeps a slow review from holding up the rest. The threads are
//! batch threads to the kernel ([`schedule_as_batch`]): woken for a review on a busy
//! core, one waits for the async worker to yield instead of preempting it.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

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
    /// How long a thread waits for work before it ends. The stack is woken from the top,
    /// so after a burst the threads it needed no longer are the ones that end.
    keep_alive: Duration,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    /// The threads waiting for work, the one that went idle last at the end.
    idle: Vec<Thread>,
    /// Threads in `park` (or on their way to it); the rest are running a job.
    parked: usize,
    started: usize,
    /// Threads started so far, ended ones included: each thread's name is unique.
    named: usize,
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
    #[error("no evaluation thread could run it")]
    NotRun,
}

impl EvaluationPool {
    /// A pool of at most `max_threads` threads (at least one), each ending after
    /// `keep_alive` without work; none is started yet.
    pub fn new(max_threads: usize, keep_alive: Duration) -> EvaluationPool {
        EvaluationPool {
            shared: Arc::new(Shared {
                state: Mutex::new(PoolState::default()),
                max_threads: max_threads.max(1),
                keep_alive,
            }),
        }
    }

    /// The pool the server's reviews run on, sized to the cores this process may use
    /// (twice as many threads, at least four, so that reviews stuck in slow policies
    /// leave threads for the rest), each kept 10 s without work as Tokio keeps its own.
    pub fn global() -> &'static EvaluationPool {
        static POOL: OnceLock<EvaluationPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let cores = thread::available_parallelism().map_or(2, usize::from);
            EvaluationPool::new((2 * cores).max(4), Duration::from_secs(10))
        })
    }

    /// Queues `work` for one of the pool's threads; the future gives its result, or why
    /// there is none. The job is queued by this call, not when the future is first
    /// polled, and it is skipped if the future is dropped before a thread takes it up
    /// (the caller stopped waiting: its deadline passed).
    pub fn run<T, F>(&self, work: F) -> impl Future<Output = Result<T, JobFailed>> + use<T, F>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        self.submit(Box::new(move |finished: &dyn Fn()| {
            if sender.is_closed() {
                return;
            }
            let result = panic::catch_unwind(AssertUnwindSafe(work));
            finished();
            // Whatever this drops (a result nobody waits for any more, a panic's payload)
            // is dropped by the thread's own `catch_unwind` should it panic.
            let _ = sender.send(result.map_err(|payload| panic_message(&*payload)));
        }));
        async move {
            match receiver.await {
                Ok(result) => result.map_err(JobFailed::Panicked),
                Err(_) => Err(JobFailed::NotRun),
            }
        }
    }

    fn submit(&self, job: Job) {
        let mut state = self.shared.lock();
        state.queue.push_back(job);
        if let Some(idle) = state.idle.pop() {
            drop(state);
            idle.unpark();
            return;
        }
        if state.started >= self.shared.max_threads {
            // Every thread is busy; the first to finish takes the job.
            return;
        }
        state.started += 1;
        state.named += 1;
        let name = format!("graft-eval-{}", state.named);
        drop(state);
        let shared = Arc::clone(&self.shared);
        let Err(error) = thread::Builder::new()
            .name(name)
            .spawn(move || shared.work())
        else {
            return;
        };
        tracing::error!(%error, "cannot start an evaluation thread");
        let unrunnable = {
            let mut state = self.shared.lock();
            state.started -= 1;
            // With no thread at all, nothing would ever run the queued jobs.
            (state.started == 0).then(|| std::mem::take(&mut state.queue))
        };
        // Dropped unlocked: their callers learn at once that they were not run.
        drop(unrunnable);
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
        schedule_as_batch();
        let me = thread::current();
        let finished = || Self::go_idle(&mut self.lock(), &me);
        loop {
            let job = {
                let mut state = self.lock();
                let mut waiting_since = None;
                loop {
                    if let Some(job) = state.queue.pop_front() {
                        // Woken spuriously, or still listed since its last job: off the
                        // idle stack either way.
                        state.idle.retain(|idle| idle.id() != me.id());
                        break job;
                    }
                    let waited = waiting_since.get_or_insert_with(Instant::now).elapsed();
                    if state.closed || waited >= self.keep_alive {
                        state.idle.retain(|idle| idle.id() != me.id());
                        state.started -= 1;
                        return;
                    }
                    Self::go_idle(&mut state, &me);
                    state.parked += 1;
                    drop(state);
                    // A submitter that popped this thread has unparked it (perhaps
                    // before this call, which then returns at once).
                    thread::park_timeout(self.keep_alive - waited);
                    state = self.lock();
                    state.parked -= 1;
                }
            };
            // A job catches its work's panics; this catches what dropping its result or
            // a panic's payload may throw, so that the thread, listed as idle by then,
            // lives on. The payload is forgotten: dropping it could throw again.
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| job(&finished))) {
                std::mem::forget(payload);
            }
        }
    }

    /// Lists `me` at the top of the idle stack, unless it is listed already.
    fn go_idle(state: &mut PoolState, me: &Thread) {
        if !state.idle.iter().any(|idle| idle.id() == me.id()) {
            state.idle.push(me.clone());
        }
    }
}

/// Asks the kernel to schedule the calling thread as a batch thread (`SCHED_BATCH`, at
/// nice 0): it gets its fair share of the CPU as before, but its wake-up does not preempt
/// the running thread. On a busy core that is the async worker, which then finishes the
/// reads and writes of its ready connections, and hands over further reviews, before the
/// evaluation runs, instead of being switched out once per review (BENCHMARKS.md).
/// Where the kernel refuses, the thread keeps the default policy.
#[cfg(target_os = "linux")]
fn schedule_as_batch() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityOsValue, ThreadSchedulePolicy,
    };
    let batch = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);
    let nice_zero = ThreadPriority::Os(ThreadPriorityOsValue::default());
    let native = thread_priority::thread_native_id();
    if let Err(error) = thread_priority::set_thread_priority_and_policy(native, nice_zero, batch) {
        tracing::debug!(
            ?error,
            "an evaluation thread keeps the default scheduling policy"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn schedule_as_batch() {}

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
    use std::sync::mpsc;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    /// Spins until `done` holds, failing after 10 s instead of hanging.
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < give_up, "never happened: {what}");
            thread::yield_now();
        }
    }

    #[test]
    fn gives_the_result_and_turns_a_panic_into_an_error() {
        let pool = EvaluationPool::new(2, Duration::from_secs(60));
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
        let pool = EvaluationPool::new(4, Duration::from_secs(60));
        runtime().block_on(async {
            // Two overlapping jobs start two threads.
            let barrier = Arc::new(Barrier::new(2));
            let (a, b) = (Arc::clone(&barrier), Arc::clone(&barrier));
            let (first, second) = tokio::join!(
                pool.run(move || {
                    a.wait();
                    thread::current().id()
                }),
                pool.run(move || {
                    b.wait();
                    thread::current().id()
                })
            );
            assert_ne!(first.expect("first"), second.expect("second"));
            // A thread is listed as idle before it hands its result over.
            assert_eq!(pool.shared.lock().idle.len(), 2);
            // A thread still on its way to `park` would take a queued job itself (it is
            // as warm as any): wait until neither is, so the order below is the stack's.
            wait_until("both threads parked", || pool.shared.lock().parked == 2);
            let last_idle = pool.shared.lock().idle.last().map(Thread::id);
            for _ in 0..20 {
                let ran_on = pool.run(|| thread::current().id()).await.expect("run");
                assert_eq!(Some(ran_on), last_idle);
            }
            assert_eq!(pool.shared.lock().started, 2);
        });
    }

    #[test]
    fn never_starts_more_threads_than_its_limit_and_answers_each_caller() {
        let pool = EvaluationPool::new(3, Duration::from_secs(60));
        runtime().block_on(async {
            let jobs = (0..64).map(|n| {
                pool.run(move || {
                    // Long enough for the jobs to overlap.
                    thread::sleep(Duration::from_micros(200));
                    (n, thread::current().id())
                })
            });
            let results: Vec<_> = futures::future::join_all(jobs)
                .await
                .into_iter()
                .map(|result| result.expect("ran"))
                .collect();
            // Each caller has its own job's result.
            let numbers: Vec<_> = results.iter().map(|(n, _)| *n).collect();
            assert_eq!(numbers, (0..64).collect::<Vec<_>>());
            let mut threads: Vec<_> = results.iter().map(|(_, id)| format!("{id:?}")).collect();
            threads.sort();
            threads.dedup();
            assert!(threads.len() <= 3, "{} threads", threads.len());
            assert!(pool.shared.lock().started <= 3);
        });
    }

    #[test]
    fn a_job_whose_caller_stopped_waiting_is_skipped() {
        let pool = EvaluationPool::new(1, Duration::from_secs(60));
        let (release, blocked) = mpsc::channel::<()>();
        let runtime = runtime();
        // The one thread is busy, so the second job waits in the queue.
        let busy = pool.run(move || blocked.recv().is_ok());
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        drop(pool.run(move || flag.store(true, std::sync::atomic::Ordering::SeqCst)));
        release.send(()).expect("the busy job waits");
        assert_eq!(runtime.block_on(busy), Ok(true));
        // The thread runs (or skips) queued jobs in order: this one ran after the other.
        assert_eq!(runtime.block_on(pool.run(|| 9)), Ok(9));
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn a_panic_after_the_work_leaves_the_thread_serving() {
        // A result nobody waits for is dropped on the pool's thread; its drop panics.
        struct Throws;
        impl Drop for Throws {
            fn drop(&mut self) {
                panic!("dropping the result");
            }
        }
        let pool = EvaluationPool::new(1, Duration::from_secs(60));
        let (release, blocked) = mpsc::channel::<()>();
        let abandoned = pool.run(move || {
            let _ = blocked.recv();
            Throws
        });
        wait_until("the job taken up", || pool.shared.lock().queue.is_empty());
        drop(abandoned);
        release.send(()).expect("the job waits");
        // A dead thread still listed as idle would never run it: bounded, not hung.
        let next = pool.run(|| 10);
        let answer =
            runtime().block_on(async { tokio::time::timeout(Duration::from_secs(10), next).await });
        assert_eq!(answer, Ok(Ok(10)));
        assert_eq!(pool.shared.lock().started, 1);
    }

    #[test]
    fn a_dropped_pool_finishes_its_running_jobs_then_ends_its_threads() {
        let pool = EvaluationPool::new(2, Duration::from_secs(60));
        let shared = Arc::clone(&pool.shared);
        let (release, blocked) = mpsc::channel::<()>();
        let running = pool.run(move || blocked.recv().is_ok());
        wait_until("the job taken up", || shared.lock().queue.is_empty());
        drop(pool);
        release.send(()).expect("the job waits");
        assert_eq!(runtime().block_on(running), Ok(true));
        // Each thread holds the shared state while it lives.
        let weak = Arc::downgrade(&shared);
        drop(shared);
        wait_until("every thread ended", || weak.strong_count() == 0);
    }

    #[test]
    fn a_thread_without_work_for_its_keep_alive_ends_and_a_new_one_starts_when_needed() {
        let pool = EvaluationPool::new(2, Duration::from_millis(20));
        runtime().block_on(async {
            let first = pool.run(|| thread::current().id()).await.expect("ran");
            wait_until("the idle thread ended", || pool.shared.lock().started == 0);
            assert!(pool.shared.lock().idle.is_empty());
            let second = pool.run(|| thread::current().id()).await.expect("ran");
            assert_ne!(first, second);
            // The new thread may have ended again already, when this test was descheduled.
            assert!(pool.shared.lock().started <= 1);
        });
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn evaluation_threads_are_scheduled_as_batch_threads() {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadSchedulePolicy};
        let pool = EvaluationPool::new(1, Duration::from_secs(60));
        let policy = runtime().block_on(pool.run(thread_priority::thread_schedule_policy));
        assert_eq!(
            policy.expect("ran").expect("policy read"),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch)
        );
    }
}

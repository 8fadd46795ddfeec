//! Work shared between the calling thread and the pool's workers, as they arrive.
//!
//! A pool worker that has been idle for a while sleeps, and waking it is the operating system's
//! (on a virtual machine, the hypervisor's) business, which can take as long as a whole small
//! product. A call that hands all its work to the workers (rayon's `install` or `broadcast`)
//! waits for the last of them to wake before it can finish.
//!
//! [`share`] puts the tasks of a call on a board instead ([`thread_pool`] holds the workers). The calling thread starts on them at
//! once, and each worker takes tasks from the board when it wakes. A worker that arrives after
//! the last task was taken returns without touching the call's data, so the call never waits
//! for a sleeping worker: it is about as fast as the caller alone when the workers are asleep,
//! and as fast as the whole team when they are awake. The caller returns when every task that
//! was taken is done.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::{Error, Result};

/// A task of a call: `task(i)` for the call's `i`-th task.
type Task<'a> = dyn Fn(usize) + Sync + 'a;

/// The tasks of one call, shared by the caller and the workers it woke.
struct Board {
    /// The next task not yet taken (it runs past `tasks` as late workers look and leave).
    next: AtomicUsize,
    /// How many tasks are done.
    done: AtomicUsize,
    tasks: usize,
    /// The call's task, its lifetime erased: called only for a task taken below `tasks`, which
    /// the caller waits for ([`share`]); a pointer, as it dangles once the call has returned.
    task: *const Task<'static>,
    /// The first panic of a task, for the caller to resume once every taken task is done.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: the task is `Sync` and called only while the call that owns it waits ([`share`]);
// the rest is atomics and a lock.
unsafe impl Send for Board {}
// SAFETY: as above.
unsafe impl Sync for Board {}

impl Board {
    /// Takes and runs tasks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.tasks {
                return;
            }
            // SAFETY: task i was taken below `tasks`, so the call is still waiting ([`share`]).
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| unsafe { (*self.task)(i) })) {
                self.panic.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(payload);
            }
            // Release: what the task wrote is visible to the caller that sees it done.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `task(i)` once for every `i < tasks`, on the calling thread and on up to `threads - 1`
/// workers of the pool of `threads`, each task on whichever thread takes it first. Returns when
/// every task has run; a panic of a task is resumed on the caller after that.
pub(super) fn share(threads: usize, tasks: usize, task: &Task<'_>) -> Result<()> {
    let helpers = threads.min(tasks).saturating_sub(1);
    if helpers == 0 {
        (0..tasks).for_each(task);
        return Ok(());
    }
    let pool = thread_pool(threads)?;
    // SAFETY: the board outlives this call (the late workers hold it), but `task` is called
    // only for a task taken below `tasks`, and this function does not return (nor unwind)
    // before every such task is done; a worker that takes none never calls it.
    let task = unsafe { std::mem::transmute::<*const Task<'_>, *const Task<'static>>(task) };
    let board = Arc::new(Board {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        tasks,
        task,
        panic: Mutex::new(None),
    });
    for _ in 0..helpers {
        let board = board.clone();
        pool.spawn(move || board.work());
    }
    board.work();
    // Every task is taken; wait for those still running on the workers (at most one each).
    wait_for(&board.done, tasks);
    if let Some(payload) = board.panic.lock().unwrap_or_else(PoisonError::into_inner).take() {
        resume_unwind(payload);
    }
    Ok(())
}

/// Runs `work` on every item, each once, as [`share`] runs tasks; returns the first error of
/// any item (the others still run).
pub(super) fn for_each<T: Send>(
    threads: usize,
    items: Vec<T>,
    work: impl Fn(T) -> Result<()> + Sync,
) -> Result<()> {
    let items: Vec<Mutex<Option<T>>> = items.into_iter().map(|item| Mutex::new(Some(item))).collect();
    let failed = Mutex::new(None);
    share(threads, items.len(), &|i| {
        // Each index is taken once, so the item is always there and the lock never contended.
        let item = items[i].lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(Err(error)) = item.map(&work) {
            failed.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(error);
        }
    })?;
    failed.into_inner().unwrap_or_else(PoisonError::into_inner).map_or(Ok(()), Err)
}

/// Spins, then yields, until `count` reaches `total`; never sleeps, so that the waiting thread
/// is still awake for the work that follows.
pub(super) fn wait_for(count: &AtomicUsize, total: usize) {
    let backoff = Backoff::new();
    while count.load(Ordering::Acquire) < total {
        backoff.snooze();
    }
}

/// How soon after a call on a pool the next one is taken to find its workers awake: a rayon
/// worker out of work looks for more for some tens of microseconds before it sleeps, and this
/// is the shorter end of that (`docs/performance-notes.md`).
pub(super) const AWAKE_GAP: Duration = Duration::from_micros(10);

/// When the latest call on each thread count ended.
static LAST_ENDS: Mutex<Vec<(usize, Instant)>> = Mutex::new(Vec::new());

/// Records that a call on `threads` threads ends now (see [`in_a_loop`]).
pub(super) fn call_ended(threads: usize) {
    let now = Instant::now();
    let mut ends = LAST_ENDS.lock().unwrap_or_else(PoisonError::into_inner);
    match ends.iter_mut().find(|(t, _)| *t == threads) {
        Some((_, end)) => *end = now,
        None => ends.push((threads, now)),
    }
}

/// Whether the latest call on `threads` threads ended less than [`AWAKE_GAP`] ago: calls made
/// one after another, whose team, once woken, is still awake for the next.
pub(super) fn in_a_loop(threads: usize) -> bool {
    let ends = LAST_ENDS.lock().unwrap_or_else(PoisonError::into_inner);
    ends.iter().any(|(t, end)| *t == threads && end.elapsed() < AWAKE_GAP)
}

/// The rayon pool with exactly `threads` workers, built once per count and kept.
pub(super) fn thread_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    static POOLS: Mutex<Vec<Arc<rayon::ThreadPool>>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.iter().find(|p| p.current_num_threads() == threads) {
        return Ok(pool.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("sgemm-cpu-{i}"))
        .build()
        .map_err(|e| Error::ThreadPool(e.to_string()))?;
    let pool = Arc::new(pool);
    pools.push(pool.clone());
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_on_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            for tasks in [0, 1, 2, 7, 100] {
                let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                share(threads, tasks, &|i| {
                    runs[i].fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                    "{threads} threads, {tasks} tasks"
                );
            }
        }
    }

    #[test]
    fn only_a_call_just_ended_makes_a_loop() {
        // Thread counts no other test uses: each count's last call is its own.
        assert!(!in_a_loop(61), "no call on 61 threads yet");
        call_ended(62);
        std::thread::sleep(AWAKE_GAP * 10);
        assert!(!in_a_loop(62), "the last call ended long ago");
        assert!(!in_a_loop(61), "a call on other threads does not count");
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_after_the_others() {
        let runs = AtomicUsize::new(0);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            share(4, 50, &|i| {
                runs.fetch_add(1, Ordering::Relaxed);
                assert_ne!(i, 17, "task 17 fails");
            })
        }));
        assert!(outcome.is_err());
        assert_eq!(runs.load(Ordering::Relaxed), 50);
    }
}
